"""Two processes running the same script on the same folders, started at one moment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def race(racer: str, roots: list[Path], timeout: float) -> list[int]:
    """Two processes running ``racer`` on ``roots``, started together (each says ready, then
    both are told to go); what each printed, an int. Both must exit 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", racer, *map(str, roots)],
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    counts = [int(p.communicate(timeout=timeout)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    return counts
