"""Processes as Linux's /proc shows them, for tests of what a run leaves running: a process's
children and all its descendants, whether one is still alive, and a bounded wait."""

from __future__ import annotations

import time
from collections.abc import Callable
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
