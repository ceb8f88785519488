"""The page server's memory after hostile GGUF headers: ten checks of a Hub repo whose GGUF
header is 120 MB (4M tokens and 1,500 keys of 8 KB names: within the reader's limits,
``MAX_TOKENS`` and ``MAX_HEADER_BYTES``), two at a time as visitors send them, leave
``eosfix serve``'s resident memory within 100 MB of what it was before the first (the
server's own figures, ``tests/support/memory.py``)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

import pytest

from eosfix.serve.config import ServeConfig
from tests.conftest import ROOT
from tests.support import memory
from tests.support.ggufs import big_vocab_header
from tests.support.hostilehub import HostileHub
from tests.support.hubrepos import BROKEN_SAMPLE, repo_files
from tests.support.serve import hub_env, stop_server
from tests.support.service import Page, free_port

TOKENS, ODD_KEYS = 4_000_000, 1_500
IM_END = b"4000098"  # <|im_end|>'s id: the 96 byte tokens, TOKENS more, then the specials
CHECKS, AT_ONCE = 10, 2
LIMIT_MIB = 100e6 / 2**20  # 100 MB

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not memory.measurable(), reason="a process's memory from /proc (Linux)"),
]


def settled_rss(pid: int, quiet: float = 2.0, longest: float = 20.0) -> float:
    """``pid``'s resident memory (MiB) once it has not fallen for ``quiet`` seconds (what a
    check held is freed once its answer is sent)."""
    low, since, end = memory.resident_mib(pid), time.monotonic(), time.monotonic() + longest
    while time.monotonic() - since < quiet and time.monotonic() < end:
        time.sleep(0.25)
        now = memory.resident_mib(pid)
        if now < low:
            low, since = now, time.monotonic()
    return low


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=600) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def serve(hub_url: str, home: Path, port: int) -> subprocess.Popen[bytes]:
    """``eosfix serve`` of this tree against the stand-in Hub, once ``/healthz`` answers."""
    env = {
        **hub_env(ROOT, hub_url, home),
        "EOSFIX_WEBHOOK_SECRET": "memory",
        "EOSFIX_STATE_DIR": str(home / "state"),
        "EOSFIX_PAGE_RATE": "100000",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosfix", "serve", "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            if get(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("eosfix serve did not start")
        time.sleep(0.1)


def test_ten_checks_of_a_120_mb_gguf_header_leave_the_server_within_100_mb(tmp_path):
    with HostileHub() as hub:
        hub.cdn = True  # the .gguf from a CDN, by ranges, as the Hub serves it
        files = {"model-Q4_K_M.gguf": big_vocab_header(TOKENS, ODD_KEYS), "README.md": b"# x\n"}
        hub.add_repo("evil/bigheader-GGUF", files).gguf = {"total": 0, "architecture": "llama"}
        del files
        port = free_port()
        proc = serve(hub.url, tmp_path, port)
        try:
            before = settled_rss(proc.pid)
            answers: list[tuple[int, bytes]] = []

            def visitor(k: int) -> None:
                for _ in range(k, CHECKS, AT_ONCE):
                    answers.append(get(f"http://127.0.0.1:{port}/check?repo=evil/bigheader-GGUF"))

            visitors = [threading.Thread(target=visitor, args=(k,)) for k in range(AT_ONCE)]
            for v in visitors:
                v.start()
            for v in visitors:
                v.join()
            after, peak = settled_rss(proc.pid), memory.peak_mib(proc.pid)
        finally:
            stop_server(proc)
    assert len(answers) == CHECKS
    for status, body in answers:  # each a verdict: the header was read and checked
        assert status == 200, body[-600:]
        assert IM_END in body, body[-600:]
        assert b"could not be checked" not in body
    assert after - before <= LIMIT_MIB, (
        f"{before:.0f} MiB before, {after:.0f} after, peak {peak:.0f}"
    )


def test_a_page_answer_leaves_no_reference_cycle_holding_its_check(fake_hub, tmp_path, monkeypatch):
    """A template's macros keep their context in a reference cycle, and the context holds the
    page's views, their rows and the check (a GGUF's 4M-token vocabulary): the check is freed
    as the answer goes out, not at the collector's next full pass (which a quiet server may
    not run for a long time)."""
    from eosfix.serve import page as page_module

    checks: list[weakref.ref[object]] = []
    real = page_module._result_page

    def keep_refs(request, checked, pr, message):  # type: ignore[no-untyped-def]
        checks.extend(weakref.ref(r.check) for r in checked.results if r.check is not None)
        return real(request, checked, pr, message)

    monkeypatch.setattr(page_module, "_result_page", keep_refs)
    fake_hub.add_repo("org/broken", repo_files(BROKEN_SAMPLE))
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=1000)
    gc.collect()
    gc.disable()
    try:
        with Page(config) as page:
            reply = page.client().get("/check?repo=org/broken")
        assert reply.status == 200
        assert checks
        assert [ref() for ref in checks] == [None] * len(checks)
    finally:
        gc.enable()
