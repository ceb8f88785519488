"""Benchmark `eosfix cache`: snapshots per second for check and fix, and peak memory.

Builds a hub cache with the real layout (blobs named by git sha1, relative symlinks,
refs/main) of N snapshots: N/2 ChatML repos, each with its own token ids, two revisions
each. The second revision shares every blob but one: even repos change README.md (same
stop-relevant files: one shared analysis), odd repos change generation_config.json (two
analyses). Every snapshot needs a fix.

    python benchmarks/bench_cache.py               # N = 100, 1000, 5000
    python benchmarks/bench_cache.py 1000 --workers 1
    python benchmarks/bench_cache.py 2000 --baseline DIR [--pairs 3] [--format text]

Each phase runs the real command (`eosfix cache`, output to a file) in a fresh process:
check (text table), check --format json, --fix (text), then a json recheck. Peak RSS is
the VmHWM of that process (``base``: after imports, before the run) plus the ru_maxrss of
its largest worker child, so it is eosfix's alone; flat memory means the same peak for
every N. (ru_maxrss of the process itself would not do: it survives execve, so it reported
the driver's own peak, its scan_cache_dir() of the whole cache: 94 MB at N=5000.) The
driver checks afterwards that every blob is byte-identical and that scan_cache_dir() has
no warnings; it times scan_cache_dir alone, and eosfix's own scan alone (every snapshot and
its key, no analysis; ``scan``). Target: 10,000 snapshots checked in 5 s.

``--baseline DIR`` compares this checkout with another one (DIR holds its ``eosfix`` package,
e.g. a ``git worktree`` of the commit before a change) on one cache of N snapshots:
``eosfix cache --format json`` (``--format text``: the table) of each, in pairs run back to
back in alternating order after a warm-up, so machine load hits both alike; medians of CPU
(user + system) and wall time, the median of the paired ratios, and whether the two printed
the same bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET_N, TARGET_S = 10_000, 5.0  # snapshots, seconds for `eosfix cache` to check them
sys.path.insert(0, str(HERE.parent))

from paired import compile_bytecode

from tests.support.cachebuilder import CacheBuilder, chatml_files, hash_blobs

EXTRA_FILES = {  # what a real snapshot also holds; eosfix never reads these
    "vocab.json": '{"a": 0, "b": 1}\n',
    "merges.txt": "#version: 0.2\na b\n",
    "model.safetensors.index.json": '{"weight_map": {}}\n',
}


def build(root: Path, n: int) -> CacheBuilder:
    builder = CacheBuilder(root)
    for i in range(max(1, n // 2)):
        repo_id = f"org{i % 50}/model-{i}"
        files = {**chatml_files(100_000 + 10 * i), **EXTRA_FILES}
        builder.add_revision(repo_id, files, refs=())
        if i % 2:
            gen = json.loads(files["generation_config.json"])
            gen["temperature"] = 0.6
            files["generation_config.json"] = json.dumps(gen, indent=2) + "\n"
        else:
            files["README.md"] = f"model {i}, revision 2\n"
        builder.add_revision(repo_id, files)
    return builder


def _peak_mb() -> tuple[float, float]:
    """Peak RSS of this process and of its largest finished child (the workers), in MB.

    This process's own is VmHWM: ru_maxrss survives execve, so it would report the
    driver's peak (its scan_cache_dir of the whole cache) when that was larger."""
    with open("/proc/self/status") as f:
        own = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return own / 1024, child / 1024


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


PHASES = {  # name: extra arguments of `eosfix cache`
    "check": [],
    "json": ["--format", "json"],
    "fix": ["--fix"],
    "recheck": ["--format", "json"],
}


def _json_footer(path: Path) -> dict[str, Any]:
    """corrupted, summary and exit_code of a streamed JSON output, read from its end only
    (loading all the entries would count against this process's peak)."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 65536))
        tail = f.read().decode()
    return json.loads("{" + tail[tail.rindex('\n  "corrupted": ') :])


def measure(root: Path, n: int, workers: int, phase: str) -> dict[str, Any]:
    """One phase of `eosfix cache` in this (fresh) process: time, CPU, peak memory."""
    from eosfix.batch import pool
    from eosfix.cli import main

    pool.WORKERS = workers
    base = _peak_mb()[0]
    with tempfile.TemporaryDirectory(prefix="eosfix-bench-out-") as tmp:
        out = Path(tmp) / "out"
        t, cpu = time.perf_counter(), _cpu()
        with out.open("w") as f, contextlib.redirect_stdout(f):
            sys.argv = ["eosfix", "cache", "--cache-dir", str(root), *PHASES[phase]]
            code = main()  # as the console script runs it
        seconds, cpu = time.perf_counter() - t, _cpu() - cpu
        own, child = _peak_mb()
        result: dict[str, Any] = {
            "s": seconds,
            "cpu_s": cpu,
            "exit": code,
            "base_mb": base,
            "peak_self_mb": own,
            "peak_child_mb": child,
        }
        if phase in ("json", "recheck"):
            summary = _json_footer(out)["summary"]
            assert summary["snapshots"] == n, summary
            entries = json.loads(out.read_text())["repos"]  # the whole stream parses (peak taken)
            assert len({e["name"] for e in entries}) == n
            del entries
            result["analyses"] = summary["analyses"]
            expected = "ok" if phase == "recheck" else "fixable"
            assert summary[expected] == n, summary
        else:
            last = out.read_text().rstrip().splitlines()[-1]
            what = "fixed" if phase == "fix" else "would be fixed"
            assert f": {n} {what}" in last, last
    assert code == (0 if phase == "recheck" else 1), code
    return result


def bench(n: int, workers: int) -> dict[str, Any]:
    """Build a cache of n snapshots, measure each phase in a fresh process, verify the cache."""
    from huggingface_hub import scan_cache_dir

    compile_bytecode(HERE.parent)  # as pip leaves it (PYTHONDONTWRITEBYTECODE: else none)
    with tempfile.TemporaryDirectory(prefix="eosfix-bench-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        build(root, n)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        assert not scan_cache_dir(root).warnings
        scan_dir_s = time.perf_counter() - t
        scan_s = _scan_alone(root, n)
        blobs = hash_blobs(root)
        phases = {}
        for phase in PHASES:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--measure",
                    str(root),
                    str(n),
                    "--workers",
                    str(workers),
                    "--phase",
                    phase,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            phases[phase] = json.loads(out)
        assert hash_blobs(root) == blobs, "a blob changed"
        assert not scan_cache_dir(root).warnings
    return {"n": n, "build_s": build_s, "scan_cache_dir_s": scan_dir_s, "scan_s": scan_s, **phases}


def _scan_alone(root: Path, n: int) -> float:
    """Seconds eosfix's own scan of the cache takes (every snapshot and its key), in a fresh
    process (no analysis)."""
    code = (
        "import sys, time; from pathlib import Path; from eosfix.sources.cache import scan_cache;"
        "t = time.perf_counter(); k = sum(1 for _ in scan_cache(Path(sys.argv[1])));"
        "print(k, time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    ).stdout.split()
    assert int(out[0]) == n, out
    return float(out[1])


def _cache_run(src: Path, root: Path, fmt: str = "json") -> tuple[float, float, bytes]:
    """CPU, wall time and output of ``eosfix cache --format FMT`` with ``src``'s eosfix."""
    cmd = [sys.executable, "-m", "eosfix", "cache", "--cache-dir", str(root), "--format", fmt]
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()  # run from src: the current folder comes first on sys.path
    out = subprocess.run(cmd, capture_output=True, env=env, cwd=src, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{src}: eosfix cache failed ({out.returncode}):\n{out.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out.stdout


def compare(baseline: Path, n: int, pairs: int, fmt: str = "json") -> None:
    """Paired runs of this checkout and ``baseline`` on one cache of ``n`` snapshots."""
    sides = {"baseline": baseline, "this": HERE.parent}
    with tempfile.TemporaryDirectory(prefix="eosfix-bench-") as tmp:
        root = Path(tmp)
        build(root, n)
        for src in sides.values():  # as pip leaves it (PYTHONDONTWRITEBYTECODE: else none)
            compile_bytecode(src)
        outputs = {name: _cache_run(src, root, fmt)[2] for name, src in sides.items()}  # warm-up
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for i in range(pairs):
            order = list(sides.items()) if i % 2 == 0 else list(sides.items())[::-1]
            for name, src in order:
                cpu, wall, _ = _cache_run(src, root, fmt)
                runs[name].append((cpu, wall))
    load = os.getloadavg()[0]
    print(f"N={n}, {pairs} pairs, eosfix cache --format {fmt}; load average {load:.1f} at the end")
    print(f"baseline: {baseline}")
    for i, label in ((0, "CPU"), (1, "wall")):
        base, this = (statistics.median(r[i] for r in runs[k]) for k in ("baseline", "this"))
        ratio = statistics.median(
            t[i] / b[i] for b, t in zip(runs["baseline"], runs["this"], strict=True)
        )
        print(
            f"{label:<5} median baseline {base:6.2f}s, this {this:6.2f}s; paired ratio {ratio:.2f}"
        )
    same = outputs["baseline"] == outputs["this"]
    print(f"the same output, byte for byte: {'yes' if same else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 5000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--measure", metavar="CACHE", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print every result as JSON")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--pairs", type=int, default=3, help="pairs with --baseline (default 3)")
    parser.add_argument(
        "--format",
        choices=("json", "text", "csv"),
        default="json",
        help="the output compared with --baseline (default json)",
    )
    args = parser.parse_args()
    if args.baseline is not None:
        for n in args.sizes:
            compare(args.baseline, n, args.pairs, args.format)
        return
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.sizes[0], args.workers, args.phase)))
        return
    mem = "peak MB: base / self + worker"
    print(
        f"{'N':>6} {'analyses':>8} {'hub scan':>8} {'scan':>6} {'check':>7} {'(cpu)':>7} {'check/s':>7} "
        f"{'json':>7} {'fix':>7} {'fix/s':>6} {'recheck':>7}   {mem} (check, json, fix)"
    )
    for n in args.sizes:
        r = bench(n, args.workers)
        if args.json:
            print(json.dumps(r), flush=True)
            continue
        c, j, f, rc = r["check"], r["json"], r["fix"], r["recheck"]
        peaks = ", ".join(
            f"{p['base_mb']:.0f} / {p['peak_self_mb']:.0f} + {p['peak_child_mb']:.0f}"
            for p in (c, j, f)
        )
        print(
            f"{n:>6} {j['analyses']:>8} {r['scan_cache_dir_s']:>7.2f}s {r['scan_s']:>5.2f}s "
            f"{c['s']:>6.2f}s {c['cpu_s']:>6.2f}s {n / c['s']:>7.0f} {j['s']:>6.2f}s {f['s']:>6.2f}s "
            f"{n / f['s']:>6.0f} {rc['s']:>6.2f}s   {peaks}",
            flush=True,
        )
        if n >= TARGET_N:
            met = "met" if c["s"] <= TARGET_S else "NOT met"
            print(
                f"target {TARGET_N} snapshots checked in <= {TARGET_S:.0f} s: {met} "
                f"({c['s']:.1f} s; scan {r['scan_s']:.1f} s, scan_cache_dir "
                f"{r['scan_cache_dir_s']:.1f} s)"
            )


if __name__ == "__main__":
    main()
