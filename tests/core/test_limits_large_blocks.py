"""A long-running process gives large freed blocks back to the system
(``eosfix.core.limits.give_back_large_blocks``, which ``eosfix serve`` calls at start)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

# A worker thread frees a 24 MB block (glibc then serves blocks up to that size from its
# arenas), fills 200 MB in 4 MB blocks, keeps a small block allocated after them (above them
# in the arena) and frees the 4 MB blocks: the process's resident memory before and after, MB.
CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from eosfix.core.limits import give_back_large_blocks

    def resident():
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))

    done = give_back_large_blocks() if sys.argv[1] == "set" else None
    before = resident()
    kept = []

    def work():
        big = bytes(24 << 20)
        del big
        blocks = [bytearray(4 << 20) for _ in range(50)]
        kept.append(bytes(2000))  # past the small-object allocator: a block of glibc's
        del blocks

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    print(done, before, resident())
    """
)


def _run(mode: str) -> tuple[str, int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    return out[0], int(out[1]), int(out[2])


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's allocator, resident memory from /proc",
)
def test_freed_large_blocks_go_back_to_the_system():
    done, before, after = _run("set")
    assert done == "True"
    assert after - before <= 16, (before, after)
    _, before, after = _run("left as it is")  # glibc's own policy keeps them: what it fixes
    assert after - before > 100, (before, after)


def test_elsewhere_it_says_it_did_nothing(monkeypatch):
    """Where the C library is not glibc the allocator's policy is left alone."""
    import ctypes

    from eosfix.core import limits

    class NotGlibc:
        def __init__(self, name: object) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NotGlibc)
    assert limits.give_back_large_blocks() is False
