"""The analysis pool's processes: they die with the process that started them, forkserver and
all (``kill -9`` of ``eosfix hub``), and a Ctrl-C while a worker starts waits until it has
started (no worker the pool does not know of, no multiprocessing traceback)."""

from __future__ import annotations

import multiprocessing.process
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eosfix.batch import pool
from eosfix.batch.verdict import analyze_folder
from tests.conftest import ROOT, SAMPLES
from tests.support.cachebuilder import chatml_files
from tests.support.processes import alive, descendants, wait_for

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
    reason="needs Linux's /proc and two CPUs (one CPU: no worker process)",
)


def test_kill_9_of_eosfix_hub_leaves_no_process_behind(fake_hub):
    for i in range(60):
        fake_hub.add_repo(f"org/m{i:03d}", chatml_files(1000 + 10 * i))
    # the last 20 repos' requests wait until the end: the run is mid-way, its pool started
    held = threading.Event()
    fake_hub.fail("*", 200, match=r"org/m0[45][0-9]", until=held)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosfix", "hub", "--author", "org", "--format", "json"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # the resource tracker, the forkserver and a worker (the forkserver's child)
        t0 = time.monotonic()
        wait_for(lambda: len(descendants(proc.pid)) >= 3, "the analysis pool")
        print("pool", time.monotonic() - t0)
        tree = descendants(proc.pid)
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        wait_for(lambda: not [p for p in tree if alive(p)], f"{tree} to exit", bound=20)
        print("dead", time.monotonic() - t0)
    finally:
        held.set()
        proc.kill()
        proc.wait()


def _job(path: Path, detail: object) -> object:
    return analyze_folder(path, detail)


def test_a_ctrl_c_while_a_worker_starts_comes_once_it_has_started(monkeypatch):
    """With other threads running (as in ``eosfix hub``) the kernel may give SIGINT to any of
    them; Python still runs the handler in the main thread, in the middle of starting a
    worker. It must come after: the pool then knows every process it started."""
    other = threading.Event()
    threading.Thread(target=other.wait, daemon=True).start()  # takes the process's signal
    started: list[multiprocessing.process.BaseProcess] = []
    real_start = multiprocessing.process.BaseProcess.start

    def start(self: multiprocessing.process.BaseProcess) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here, if it may
        real_start(self)
        started.append(self)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    previous = signal.signal(signal.SIGINT, interrupt)
    jobs = pool.Jobs(None, workers=2)
    jobs.count = pool.POOL_MIN  # the next batch goes to the worker processes
    try:
        ticket = jobs.submit(analyze_folder, SAMPLES / "llama3-healthy")
        with pytest.raises(KeyboardInterrupt):
            jobs.flush()
        assert ticket.batch.future is not None  # submitted, then interrupted
        assert started
        assert jobs.pool is not None
        assert {p.pid for p in started} <= set(jobs.pool._processes)
    finally:
        signal.signal(signal.SIGINT, previous)
        other.set()
        jobs.close()
