"""Whole processes timed side by side: the measuring kit of the start-up benchmarks.

Each run is a fresh process, reaped with ``os.wait4``, so its own resource usage is read:
wall time (``time.perf_counter`` around it), CPU time (user + system) and peak RSS
(``ru_maxrss``). Two commands run in pairs after a warm-up, in alternating order (A B, B A,
...), so a machine whose load drifts slows both alike; each figure is quoted as the median,
and the ratio as the median of the pairs' ratios. On a shared machine quote CPU first: other
processes lengthen wall time, much less the CPU time a process itself uses.

eosfix is compiled to bytecode first, as an installed wheel is (``pip install`` compiles it):
with ``PYTHONDONTWRITEBYTECODE`` set, an editable checkout would otherwise be compiled again by
every run and the benchmark would time the compiler.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    wall: float  # seconds
    cpu: float  # seconds, user + system
    peak: float  # MiB, the process's peak resident set
    code: int


def compile_bytecode(root: Path = ROOT) -> None:
    """Write the bytecode of ``root``'s eosfix package, as ``pip install`` does."""
    compileall.compile_dir(root / "eosfix", quiet=1)


def run_once(cmd: Sequence[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Run:
    """One run of ``cmd`` (output discarded), its own resource usage."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()}")
    cpu = usage.ru_utime + usage.ru_stime
    return Run(wall, cpu, usage.ru_maxrss / 1024, proc.returncode)


@dataclass(frozen=True)
class Pairs:
    a: list[Run]
    b: list[Run]

    def median(self, side: str, what: str) -> float:
        return statistics.median(getattr(r, what) for r in getattr(self, side))

    def ratio(self, what: str) -> float:
        """The median of A/B over the pairs."""
        return statistics.median(
            getattr(a, what) / getattr(b, what) for a, b in zip(self.a, self.b, strict=True)
        )

    def spread(self, side: str, what: str) -> float:
        """(max - min) / median of one figure: above ~0.5 the machine was busy, run again."""
        values = [getattr(r, what) for r in getattr(self, side)]
        return (max(values) - min(values)) / statistics.median(values)


def paired(
    a: Sequence[str],
    b: Sequence[str],
    runs: int,
    *,
    warmup: int = 2,
    env: dict[str, str] | None = None,
) -> Pairs:
    """``runs`` pairs of A and B after ``warmup`` runs of each, alternating which goes first."""
    for _ in range(warmup):
        run_once(a, env)
        run_once(b, env)
    out_a: list[Run] = []
    out_b: list[Run] = []
    for i in range(runs):
        if i % 2 == 0:
            out_a.append(run_once(a, env))
            out_b.append(run_once(b, env))
        else:
            out_b.append(run_once(b, env))
            out_a.append(run_once(a, env))
    return Pairs(out_a, out_b)


def table(pairs: Pairs, a_name: str, b_name: str) -> str:
    """Medians of each side and the median paired ratio, per figure."""
    lines = [f"{'':<12} {a_name:>14} {b_name:>14} {'ratio A/B':>10}   spread A, B"]
    for what, unit, label in (("cpu", "s", "CPU"), ("wall", "s", "wall"), ("peak", "MiB", "peak")):
        lines.append(
            f"{label + ' ' + unit:<12} {pairs.median('a', what):>14.3f} "
            f"{pairs.median('b', what):>14.3f} {pairs.ratio(what):>10.2f}   "
            f"{pairs.spread('a', what):.2f}, {pairs.spread('b', what):.2f}"
        )
    return "\n".join(lines)


def machine() -> str:
    """One line about the machine the figures come from."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} CPUs, {cpu}; load average {load:.1f} at the start"


def memory_mb(pid: int) -> dict[str, int]:
    """Resident (``VmRSS``) and peak resident (``VmHWM``) memory of ``pid``, MB (Linux /proc)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def start_serve(
    env: dict[str, str], port: int, cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """``eosfix serve`` as its own process (its stderr in ``log_path``), once ``/healthz``
    answers 200; SystemExit with its log when it exits or has not answered in 60 s."""
    from tests.support.service import http

    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eosfix", "serve", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            if http("GET", f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("eosfix serve did not start:\n" + log_path.read_text())
        time.sleep(0.05)


def answer_hub(hub: Any, commands: Mapping[str, Callable[[list[str]], Any]] | None = None) -> None:
    """The served side of ``ServedHub``: print the stand-in Hub's URL, then answer each line of
    stdin with one JSON line until stdin closes: 'stats' (its request count), 'reset' (forget
    its requests), or a command of ``commands`` (its name -> its answer, given the line's
    words after the name)."""
    known: dict[str, Callable[[list[str]], Any]] = {
        "stats": lambda _: {"requests": len(hub.requests)},
        "reset": lambda _: _forget_requests(hub),
        **(commands or {}),
    }
    with hub:
        print(hub.url, flush=True)
        for line in sys.stdin:
            name, *words = line.split()
            print(json.dumps(known[name](words)), flush=True)


def _forget_requests(hub: Any) -> dict[str, Any]:
    hub.request_log.clear()
    hub.requests.clear()
    return {}


class ServedHub:
    """A stand-in Hub served by another process (``SCRIPT --serve ARGS``, which calls
    ``answer_hub``), so its work shares nothing of the measured process's time."""

    def __init__(self, script: str, *args: object) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, script, "--serve", *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def ask(self, what: str) -> Any:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def audit_env(code: Path, hub_url: str, home: Path) -> dict[str, str]:
    """The environment of an ``eosfix hub`` run of ``code`` (on PYTHONPATH) against the stand-in
    Hub at ``hub_url``, its caches under ``home``, with no token of the machine's."""
    from tests.support.serve import hub_env

    return hub_env(code, hub_url, home)
