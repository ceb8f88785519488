"""A process's peak resident memory, measured so that nothing but its own work counts.

``ru_maxrss`` is no such measure on Linux: a child keeps its parent's resident size at fork
through ``exec`` (a pytest worker that loaded torch makes every ``python -c`` it starts read
2 GB), and within one process it never goes down, so a test run after a big one sees no
growth at all. ``VmHWM`` in ``/proc/self/status`` belongs to the address space: a new one at
``exec``, and writing ``5`` to ``/proc/self/clear_refs`` (Linux 4.0+) sets it back to what is
resident now. Both tests and the children they start use this module; a test that watches a
long-running process it started (``eosfix serve``) reads that process's figures by its pid.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")

# What a child process runs to report its own peak: ``python -c LAUNCH ARGS...`` runs
# ``eosfix ARGS...`` and, on exit, writes its peak resident MiB to the file named by
# ``EOSFIX_TEST_PEAK_FILE``.
LAUNCH = """
import atexit, os, sys
from tests.support.memory import peak_mib
atexit.register(lambda: open(os.environ["EOSFIX_TEST_PEAK_FILE"], "w").write(str(peak_mib())))
from eosfix.cli import main
sys.exit(main(sys.argv[1:]))
"""


def measurable() -> bool:
    """This platform tells a process's own peak (Linux's /proc)."""
    return sys.platform.startswith("linux") and _STATUS.exists()


def _status_mib(name: str, pid: int | None) -> float:
    status = _STATUS if pid is None else Path(f"/proc/{pid}/status")
    found = re.search(rf"^{name}:\s+(\d+) kB", status.read_text(), re.MULTILINE)
    assert found is not None, f"no {name} in {status}"
    return int(found.group(1)) / 1024


def peak_mib(pid: int | None = None) -> float:
    """This process's (or process ``pid``'s) peak resident memory since it started (or since
    ``reset_peak``), MiB."""
    return _status_mib("VmHWM", pid)


def resident_mib(pid: int | None = None) -> float:
    """This process's (or process ``pid``'s) resident memory now, MiB."""
    return _status_mib("VmRSS", pid)


def reset_peak() -> None:
    """Start measuring this process's peak from what is resident now."""
    _CLEAR_REFS.write_text("5")
