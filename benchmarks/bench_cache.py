"""Benchmark `eosfix cache`: snapshots per second for check and fix, and peak memory.

Builds a hub cache with the real layout (blobs named by git sha1, relative symlinks,
refs/main) of N snapshots: N/2 ChatML repos, each with its own token ids, two revisions
each. The second revision shares every blob but one: even repos change README.md (same
stop-relevant files: one shared analysis), odd repos change generation_config.json (two
analyses). Every snapshot needs a fix.

    python benchmarks/bench_cache.py               # N = 100, 1000, 5000
    python benchmarks/bench_cache.py 1000 --workers 1

eosfix runs in a fresh process per N, so peak RSS (ru_maxrss of that process plus its
largest worker child) is eosfix's alone. The driver checks afterwards that every blob is
byte-identical and that scan_cache_dir() has no warnings (and times scan_cache_dir alone).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.cachebuilder import CacheBuilder, chatml_files, hash_blobs

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
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, child


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(root: Path, n: int, workers: int) -> dict[str, float]:
    """check, fix, check again: timings and peak memory of eosfix alone (own process)."""
    from eosfix import cache

    t, cpu = time.perf_counter(), _cpu()
    scan = cache.scan_cache(root)
    scan_s = time.perf_counter() - t
    run = cache.run_cache(scan, workers=workers)  # the pool's workers have exited: counted
    check_s, check_cpu = time.perf_counter() - t, _cpu() - cpu
    assert len(run.results) == n, len(run.results)
    assert run.counts()["fixable"] == n, run.counts()
    analyses = run.analyses

    t = time.perf_counter()
    run = cache.run_cache(cache.scan_cache(root), fix=True, workers=workers)
    fix_s = time.perf_counter() - t
    assert run.counts()["fixed"] == n, run.counts()

    t = time.perf_counter()
    again = cache.run_cache(cache.scan_cache(root), workers=workers)
    recheck_s = time.perf_counter() - t
    assert again.exit_code == 0, again.counts()
    own, child = _peak_mb()
    return {
        "n": n, "analyses": analyses, "scan_s": scan_s, "check_s": check_s,
        "check_cpu_s": check_cpu, "fix_s": fix_s, "recheck_s": recheck_s,
        "check_per_s": n / check_s, "fix_per_s": n / fix_s, "recheck_per_s": n / recheck_s,
        "peak_self_mb": own, "peak_child_mb": child,
    }


def bench(n: int, workers: int) -> dict[str, float]:
    """Build a cache of n snapshots, measure eosfix in a fresh process, then verify the cache."""
    from huggingface_hub import scan_cache_dir

    with tempfile.TemporaryDirectory(prefix="eosfix-bench-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        build(root, n)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        assert not scan_cache_dir(root).warnings
        scan_dir_s = time.perf_counter() - t
        blobs = hash_blobs(root)
        out = subprocess.run(
            [sys.executable, __file__, "--measure", str(root), str(n), "--workers", str(workers)],
            check=True, capture_output=True, text=True,
        ).stdout
        assert hash_blobs(root) == blobs, "a blob changed"
        assert not scan_cache_dir(root).warnings
    return {**json.loads(out), "build_s": build_s, "scan_cache_dir_s": scan_dir_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 5000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--measure", metavar="CACHE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.sizes[0], args.workers)))
        return
    print(f"{'N':>6} {'analyses':>8} {'scan_cache_dir':>14} {'check':>8} {'(cpu)':>7} "
          f"{'check/s':>8} {'fix':>8} {'fix/s':>8} {'recheck':>8} {'peak MB self + worker':>22}")
    for n in args.sizes:
        r = bench(n, args.workers)
        print(f"{n:>6} {r['analyses']:>8} {r['scan_cache_dir_s']:>13.2f}s {r['check_s']:>7.2f}s "
              f"{r['check_cpu_s']:>6.2f}s {r['check_per_s']:>8.0f} {r['fix_s']:>7.2f}s "
              f"{r['fix_per_s']:>8.0f} {r['recheck_s']:>7.2f}s "
              f"{r['peak_self_mb']:>10.0f} + {r['peak_child_mb']:.0f}", flush=True)


if __name__ == "__main__":
    main()
