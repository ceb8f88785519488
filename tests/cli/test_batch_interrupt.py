"""Ctrl-C in a batch: real SIGINTs sent to a real eosfix process.

Each test holds the run at a known point by an event, never a wall-clock window: the cache is
held by a ``refs/main`` that is a named pipe (huggingface_hub's scanner blocks reading it
until the test writes the commit), the Hub by a request the stand-in Hub keeps unanswered
until released. The test waits for a line the process prints (an entry on stdout,
``stopping:`` on stderr) before it acts.

The first Ctrl-C stops the run early but whole: what is in flight finishes and is reported,
the output stays a whole document, one line says what was done and what was not, exit 130.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.hubrepos import chatml_org
from tests.support.schemas import BATCH, valid

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


class Run:
    """A real eosfix process; its stdout is read by a thread (so it never blocks on a full
    pipe), its stderr line by line by the test."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eosfix", *map(str, args)],
            env=env or ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        self.out.extend(self.proc.stdout)

    def stderr_until(self, needle: str) -> str:
        """Lines of stderr up to and including the first one holding ``needle``."""
        assert self.proc.stderr is not None
        seen = []
        for line in self.proc.stderr:
            seen.append(line)
            if needle in line:
                return "".join(seen)
        raise AssertionError(f"{needle!r} never came on stderr; got {''.join(seen)!r}")

    def finish(self) -> tuple[int, str, str]:
        """Exit code, all of stdout, the rest of stderr."""
        assert self.proc.stderr is not None
        assert self.proc.stdout is not None
        tail = self.proc.stderr.read()
        code = self.proc.wait(timeout=120)
        self._reader.join(timeout=120)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, "".join(self.out), tail


def blocked_cache(tmp_path: Path, n: int = 5) -> tuple[CacheBuilder, Path, str]:
    """``n`` fixable repos, then one whose refs/main is a named pipe: scanning it waits."""
    b = CacheBuilder(tmp_path / "hub")
    for i in range(n):
        b.add_revision(f"aa/m{i}", chatml_files(1000 + 10 * i))
    commit = b.add_revision("zz/blocked", chatml_files(5000), refs=())
    pipe = b.repo_dir("zz/blocked") / "refs" / "main"
    pipe.parent.mkdir(parents=True)
    os.mkfifo(pipe)
    return b, pipe, commit


def wait_for_reader(pipe: Path, run: Run) -> int:
    """The write end of ``pipe`` once the scanner has it open for reading (every snapshot
    before it is done and written out) and sits in read() on it: kept open, so it waits there.

    "Sits in read()" matters: a SIGINT that lands between the scanner's open() and its read()
    only sets Python's flag, and the read() that follows blocks without running the handler
    (nothing interrupts it), so the test would wait for "stopping:" forever. Where the kernel
    says what a process waits in (/proc/PID/wchan), the signal is sent only once it is the
    pipe; elsewhere the test goes on when the pipe has a reader."""
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        assert run.proc.poll() is None, "eosfix ended before reaching the pipe"
        threading.Event().wait(0.01)
    wchan = Path(f"/proc/{run.proc.pid}/wchan")
    while wchan.exists() and "pipe" not in wchan.read_text():
        assert run.proc.poll() is None, "eosfix ended before reading the pipe"
        threading.Event().wait(0.01)
    return fd


def unblock(fd: int, commit: str) -> None:
    os.write(fd, commit.encode())
    os.close(fd)


def ctrl_c_at_the_pipe(run: Run, pipe: Path, commit: str) -> tuple[str, int, str, str]:
    """Ctrl-C once the run waits on the blocked repo, then let the scan go on: stderr up to
    "stopping:", the exit code, stdout and the rest of stderr."""
    fd = wait_for_reader(pipe, run)
    run.proc.send_signal(signal.SIGINT)
    err = run.stderr_until("stopping:")
    unblock(fd, commit)
    code, out, tail = run.finish()
    return err, code, out, tail


def test_ctrl_c_in_cache_fix_reports_every_snapshot_fixed_and_closes_the_json(tmp_path):
    b, pipe, commit = blocked_cache(tmp_path)
    run = Run("cache", "--cache-dir", b.root, "--fix", "--format", "json")
    err, code, out, tail = ctrl_c_at_the_pipe(run, pipe, commit)
    assert code == 130, err + tail
    payload = json.loads(out)  # a whole document, as documented
    valid(BATCH, payload)
    assert payload["interrupted"] is True
    assert payload["exit_code"] == 130
    assert [e["repo_id"] for e in payload["repos"]] == [f"aa/m{i}" for i in range(5)]
    assert all(e["verdict"] == "fixed" for e in payload["repos"])
    written = [
        p for p in b.root.glob("models--*/snapshots/*/generation_config.json") if not p.is_symlink()
    ]
    assert len(written) == 5  # every file written is reported, and no other
    assert "Traceback" not in err + tail
    assert tail.strip().splitlines()[-1] == (
        "interrupted: 5 snapshots fixed, 0 checked and left as they were, 1 not checked; "
        "run the same command again to go on"
    )


def test_ctrl_c_in_cache_check_leaves_whole_csv_rows_and_says_what_was_not_checked(tmp_path):
    b, pipe, commit = blocked_cache(tmp_path, n=3)
    run = Run("cache", "--cache-dir", b.root, "--format", "csv")
    err, code, out, tail = ctrl_c_at_the_pipe(run, pipe, commit)
    assert code == 130, err + tail
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["repo_id"] for r in rows] == ["aa/m0", "aa/m1", "aa/m2"]
    assert {r["verdict"] for r in rows} == {"fixable"}
    lines = tail.strip().splitlines()
    assert lines[-2].endswith("; interrupted")  # the summary line
    assert lines[-1] == "interrupted: 3 snapshots checked, 1 not checked"
    assert not [p for p in b.root.glob("models--*/snapshots/*/generation_config.json")
                if not p.is_symlink()]  # fmt: skip


def test_ctrl_c_while_the_hub_listing_is_read(fake_hub, tmp_path):
    """Early in an audit: the listing's second page is held; the repos of the first page
    are checked and recorded, the rest is said not to be, and the JSON is whole."""
    chatml_org(fake_hub, 4)
    fake_hub.page_size = 2
    page2 = fake_hub.hold(r"^/api/models$", query="cursor=2")
    state = tmp_path / "audit.jsonl"
    env = {**ENV, **{k: os.environ[k] for k in ("HF_ENDPOINT", "EOSFIX_CACHE", "HF_HOME")}}
    run = Run(
        "hub", "--author", "org", "--format", "json", "--state", state, "--workers", "2", env=env
    )
    assert page2.arrived.wait(60)
    for repo_id in ("org/m000", "org/m001"):  # page 1's repos are in: files all fetched
        while len(fake_hub.downloads(repo_id)) < 4:
            assert run.proc.poll() is None
            threading.Event().wait(0.01)
    run.proc.send_signal(signal.SIGINT)
    err = run.stderr_until("stopping:")
    page2.release()
    code, out, tail = run.finish()
    assert code == 130, err + tail
    payload = json.loads(out)
    valid(BATCH, payload)
    assert [e["repo_id"] for e in payload["repos"]] == ["org/m000", "org/m001"]
    assert payload["interrupted"] is True
    assert payload["errors"] == []  # being stopped is no listing error
    assert tail.strip().splitlines()[-1] == (
        "interrupted: 2 repos checked, 0 listed but not checked; the listing of org was not "
        f"finished; 2 repos recorded in {state}: run the same command again to go on from there"
    )
    assert [json.loads(line)["repo_id"] for line in state.read_text().splitlines()] == [
        "org/m000",
        "org/m001",
    ]
