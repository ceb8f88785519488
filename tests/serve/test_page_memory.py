"""The page's memory: what a check held is freed as its answer goes out, and ``eosfix serve``
checking a large GGUF header again and again settles back near its start. (The full-size
figure, ten checks of a 120 MB header of 4M tokens, is benchmarks/bench_page_memory.py's.)"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from eosfix.serve.config import ServeConfig
from tests.conftest import ROOT
from tests.support import memory
from tests.support.ggufs import BASE, big_vocab_header
from tests.support.hostilehub import HostileHub
from tests.support.hubrepos import BROKEN_SAMPLE, repo_files
from tests.support.serve import page_checks_memory
from tests.support.service import Page

TOKENS = 1_000_000  # a 29 MB header: before, the server kept 672 MiB of it after 6 checks


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


@pytest.mark.slow
@pytest.mark.skipif(not memory.measurable(), reason="a process's memory from /proc (Linux)")
def test_page_checks_of_a_large_gguf_header_leave_the_server_near_its_start(tmp_path: Path):
    """Four page checks of a GGUF header of a million tokens, two at a time as visitors send
    them: ``eosfix serve`` settles within 100 MB of its resident memory before the first (the
    server's own figures), each answer a verdict."""
    with HostileHub() as hub:
        hub.cdn = True  # the .gguf from a CDN, by ranges, as the Hub serves it
        files = {"model-Q4_K_M.gguf": big_vocab_header(TOKENS, 300), "README.md": b"# x\n"}
        hub.add_repo("evil/bigheader-GGUF", files).gguf = {"total": 0, "architecture": "llama"}
        del files
        im_end = str(len(BASE) + TOKENS + 2).encode()  # the specials come last
        figures = page_checks_memory(
            ROOT, hub.url, tmp_path, "evil/bigheader-GGUF", checks=4, at_once=2, id_text=im_end
        )
    assert figures.verdicts == 4
    assert figures.after - figures.start <= 100e6 / 2**20, figures
