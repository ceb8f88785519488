"""A busy machine on demand: processes that spin on every core, bounded in time, always stopped.

As a context manager (``with cpu_contention(): ...``) for tests, or around any command::

    python -m tests.support.contention [--per-core N] [--seconds S] -- python -m pytest -q

Each busy process is a plain Python loop (the kind of load a compile or another test suite
puts on a CI box). It stops by itself after ``seconds``, or as soon as the process that
started it is gone, so a killed test run leaves nothing spinning; the context manager kills
and reaps every one of them on the way out, whatever happened inside.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

_SPIN = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
n = 0
while True:
    n += 1
    if n % 200_000 == 0 and (time.monotonic() > end or os.getppid() != parent):
        break
"""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def cpu_contention(per_core: int = 2, seconds: float = 900.0) -> Iterator[list[int]]:
    """Keep ``per_core`` busy processes per usable core spinning for the block (at most
    ``seconds``); yields their pids."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(per_core * usable_cores()):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(seconds), str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-core", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3600.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give a command after --")
    with cpu_contention(args.per_core, args.seconds) as pids:
        print(f"contention: {len(pids)} busy processes on {usable_cores()} cores", file=sys.stderr)
        return subprocess.call(command)


if __name__ == "__main__":
    raise SystemExit(main())
