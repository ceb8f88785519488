"""Processes as Linux's /proc shows them, for tests of what a run leaves running: a process's
children and all its descendants, whether one is still alive, and a bounded wait; and a child
process asked one line at a time (``LineChild``)."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def descendants(pid: int) -> set[int]:
    """Its children, theirs, and so on."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for kid in children(todo.pop()):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has exited


def wait_for(condition: Callable[[], bool], what: str, bound: float = 120.0) -> None:
    """Wait for an event; ``bound`` only turns a hang into a failure, it decides nothing."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.02)


class LineChild:
    """A child process asked one line at a time: ``ask`` writes a line to its standard input
    and reads its standard output up to the next line that starts with ``prefix`` (what the
    child's libraries print there is passed over), returning the rest of that line, or None
    when the child ended first. Its standard error goes to a file, not a pipe nobody drains
    (``said``: its end)."""

    def __init__(
        self, command: list[str], *, prefix: str = "", env: Mapping[str, str] | None = None
    ) -> None:
        self.prefix = prefix
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=None if env is None else dict(env),
        )

    def read(self) -> str | None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # ends when the child does
            if line.startswith(self.prefix):
                return line[len(self.prefix) :]
        return None

    def ask(self, line: str) -> str | None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None  # it died at once
        return self.read()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def said(self, tail: int = 4000) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-tail:].decode("utf-8", "replace")

    def close(self, timeout: float = 30) -> None:
        """End the child (its standard input closed, killed after ``timeout``)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
