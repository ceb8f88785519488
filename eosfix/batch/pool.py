"""Worker processes for analyses: started on demand, fed in batches, survivable.

The first POOL_MIN jobs run in this process (a pool costs ~50 ms to start, more with
forkserver); after that, jobs go to ``workers`` processes BATCH at a time. If a worker dies
(out of memory), its jobs and every later one become error verdicts instead of a crash.
Workers ignore Ctrl-C (a terminal sends it to the whole process group): the main process stops
the run, and a worker finishes the jobs it holds, so no snapshot is left half fixed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import FrameType
from typing import Any

from eosfix.batch.verdict import Detail, Verdict
from eosfix.core.codes import EOS103

POOL_MIN = 24  # the first jobs run in-process; worker processes start at this many
WORKERS = 2
BATCH = 8  # jobs sent to a worker at once

Job = Callable[[Path, Detail | None], Verdict]
DIED = Verdict("error", error="the analysis process died (out of memory?)")
RETRY_CODE = EOS103.code  # a template could not finish in the backstop's seconds: retry


def _mp_context() -> Any:
    # fork is cheapest (modules already imported), but forking a threaded process can deadlock
    # (Python 3.12+ warns): then use forkserver, which imports the analysis once.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform == "linux":
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["eosfix.batch.verdict"])
    return ctx


def _worker_signals(main: int) -> None:
    """In a worker: Ctrl-C is the main process's to handle; SIGTERM (``terminate``) kills;
    and the worker dies with ``main`` (the process that started the pool), so a ``kill -9``
    of it leaves no worker fixing on or holding its stdout open."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # started while the main process held them
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    _die_with(main)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIVENESS_POLL = 1.0  # seconds between checks where the kernel cannot signal a death


def _die_with(main: int) -> None:
    """Exit when ``main`` does. A worker forked by it: PR_SET_PDEATHSIG on Linux (the kernel
    sends SIGTERM), else a thread that checks the parent. A worker of a forkserver, whose
    parent is the server: a thread that waits on ``main`` itself (a pidfd on Linux, else a
    check every second); then the server, which the workers kept alive (each holds its
    "alive" pipe), sees the pipe close and exits too. Either way ``main`` may be gone
    already."""
    if os.getppid() != main:
        threading.Thread(target=_watch_main, args=(main,), daemon=True).start()
        return
    armed = False
    if sys.platform == "linux":
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if not armed:
        threading.Thread(target=_watch_parent, args=(main,), daemon=True).start()
    _exit_if_orphaned(main)


def _exit_if_orphaned(parent: int) -> None:
    """The parent died (this process was re-parented): stop at once."""
    if os.getppid() != parent:
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while True:
        _exit_if_orphaned(parent)
        time.sleep(_LIVENESS_POLL)


def _watch_main(main: int) -> None:
    """Exit once ``main`` (not this process's parent) has exited."""
    try:
        fd = os.pidfd_open(main)  # Linux 5.3+: readable once the process has exited
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])
        os._exit(1)
    while True:
        try:
            os.kill(main, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # alive (or its number taken by another user's process)
            pass
        time.sleep(_LIVENESS_POLL)


# Signals that stop a run: a handler raising KeyboardInterrupt in the middle of starting a
# worker (os.fork's bookkeeping, a forkserver's reply) is swallowed ("Exception ignored")
# or leaves a worker the pool does not know of (it is not joined, its queues' semaphores are
# unlinked while it starts: a traceback on stderr); so they wait while workers are started,
# and are delivered as soon as that is done.
_STOPPING = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Signals that stop a run wait while the block runs (from the main thread; elsewhere
    no handler can run). Python runs its handlers in the main thread whichever thread the
    kernel gave a signal to, so blocking them in this thread is not enough once other
    threads run: the handlers are also swapped for one that notes each signal, and the
    noted ones are raised again once the old handlers are back. The mask still matters: a
    process forked meanwhile starts with them blocked (a worker unblocks them once it
    ignores Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    swapped = {s: h for s in _STOPPING if (h := signal.getsignal(s)) is not None}
    for signum in swapped:
        signal.signal(signum, note)
    mask = hasattr(signal, "pthread_sigmask")
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING) if mask else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for signum, handler in swapped.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


def _run_batch(fn: Job, paths: Sequence[Path], detail: Detail | None) -> list[Verdict]:
    return [run_job(fn, path, detail) for path in paths]


def run_job(fn: Job, path: Path, detail: Detail | None) -> Verdict:
    """``fn(path, detail)``, run once more when it could not finish on this machine (EOS103:
    a render ran into the wall-clock backstop, which says nothing about the repo); the
    second outcome is reported, whatever it is."""
    found = fn(path, detail)
    return fn(path, detail) if retryable(found) else found


def retryable(found: Verdict) -> bool:
    """Not a verdict on the repo: the machine was too busy to finish its analysis."""
    return RETRY_CODE in found.codes


class _Batch:
    """Up to BATCH jobs of one function, sent to a worker together."""

    __slots__ = ("fn", "future", "paths", "sent", "verdicts")

    def __init__(self, fn: Job) -> None:
        self.fn = fn
        self.paths: list[Path] = []
        self.sent = False
        self.future: Future[list[Verdict]] | None = None
        self.verdicts: list[Verdict] | None = None


class Ticket:
    """A submitted job: ``result()`` waits for its verdict (running it here if it must)."""

    __slots__ = ("batch", "index", "jobs")

    def __init__(self, jobs: Jobs, batch: _Batch, index: int) -> None:
        self.jobs, self.batch, self.index = jobs, batch, index

    def result(self) -> Verdict:
        return self.jobs.result(self)

    def done(self) -> bool:
        """Whether ``result()`` would not wait for a worker process (a job that runs in
        this process counts as done: it only needs this process's time)."""
        batch = self.batch
        if batch.verdicts is not None:
            return True
        if batch.future is not None:
            return batch.future.done()
        if not batch.sent:  # waits for more jobs before it goes to a worker?
            return not self.jobs.goes_to_pool()
        return True  # sent to run in this process

    def __repr__(self) -> str:
        return f"Ticket({self.index} of {len(self.batch.paths)})"


class Jobs:
    """Runs jobs in batches: in this process while there are fewer than POOL_MIN, then in
    ``workers`` processes started on demand. Used from one thread only."""

    def __init__(self, detail: Detail | None, workers: int | None = None) -> None:
        self.detail = detail
        self.workers = min(WORKERS if workers is None else workers, os.cpu_count() or 1)
        self.count = 0
        self.open: dict[Job, _Batch] = {}
        self.pool: ProcessPoolExecutor | None = None
        self.broken = False

    def submit(self, fn: Job, path: Path) -> Ticket:
        batch = self.open.get(fn)
        if batch is None:
            batch = self.open[fn] = _Batch(fn)
        batch.paths.append(path)
        self.count += 1
        if len(batch.paths) >= BATCH:
            self._send(batch)
        return Ticket(self, batch, len(batch.paths) - 1)

    def flush(self) -> None:
        for batch in list(self.open.values()):
            self._send(batch)

    def _send(self, batch: _Batch) -> None:
        if self.open.get(batch.fn) is batch:
            del self.open[batch.fn]
        batch.sent = True
        if self.broken:
            batch.verdicts = [DIED] * len(batch.paths)
        elif self.goes_to_pool():
            if self.pool is None:
                ctx = _mp_context()
                self.pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=ctx,
                    initializer=_worker_signals,
                    initargs=(os.getpid(),),
                )
            try:
                with _signals_held():  # submit forks the workers
                    batch.future = self.pool.submit(_run_batch, batch.fn, batch.paths, self.detail)
            except BrokenProcessPool:
                self.broken = True
                batch.verdicts = [DIED] * len(batch.paths)
        # else: run in this process when its result is needed

    def goes_to_pool(self) -> bool:
        return self.workers > 1 and self.count >= POOL_MIN and not self.broken

    def result(self, ticket: Ticket) -> Verdict:
        batch = ticket.batch
        if batch.verdicts is None:
            if not batch.sent:
                self._send(batch)
            if batch.future is not None:
                try:
                    batch.verdicts = batch.future.result()
                except BrokenProcessPool:
                    self.broken = True
                    batch.verdicts = [DIED] * len(batch.paths)
                batch.future = None
            elif batch.verdicts is None:
                batch.verdicts = _run_batch(batch.fn, batch.paths, self.detail)
            batch.paths = []
        return batch.verdicts[ticket.index]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
