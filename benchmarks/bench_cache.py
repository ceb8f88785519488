"""Benchmark `eosfix cache`: snapshots per second for check and fix, and peak memory.

Builds a hub cache with the real layout (blobs named by git sha1, relative symlinks,
refs/main) of N snapshots: N/2 ChatML repos, each with its own token ids, two revisions
each. The second revision shares every blob but one: even repos change README.md (same
stop-relevant files: one shared analysis), odd repos change generation_config.json (two
analyses). Every snapshot needs a fix.

    python benchmarks/bench_cache.py               # N = 100, 1000, 5000
    python benchmarks/bench_cache.py 1000 --workers 1

Each N runs in its own process, so peak RSS (ru_maxrss of the process plus its largest
worker child) is measured per N.
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
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from cachebuilder import CacheBuilder, chatml_files, hash_blobs  # noqa: E402

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


def one(n: int, workers: int) -> dict[str, float]:
    from huggingface_hub import scan_cache_dir

    from eosfix import cache

    with tempfile.TemporaryDirectory(prefix="eosfix-bench-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        build(root, n)
        build_s = time.perf_counter() - t

        t = time.perf_counter()
        scan_cache_dir(root)
        scan_dir_s = time.perf_counter() - t

        t = time.perf_counter()
        scan = cache.scan_cache(root)
        scan_s = time.perf_counter() - t
        t = time.perf_counter()
        run = cache.run_cache(scan, workers=workers)
        check_s = scan_s + time.perf_counter() - t
        assert len(run.results) == n and run.counts()["fixable"] == n, run.counts()

        blobs = hash_blobs(root)
        t = time.perf_counter()
        run = cache.run_cache(cache.scan_cache(root), fix=True, workers=workers)
        fix_s = time.perf_counter() - t
        assert run.counts()["fixed"] == n, run.counts()
        assert hash_blobs(root) == blobs, "a blob changed"

        t = time.perf_counter()
        again = cache.run_cache(cache.scan_cache(root), workers=workers)
        recheck_s = time.perf_counter() - t
        assert again.exit_code == 0, again.counts()
        assert not scan_cache_dir(root).warnings
        own, child = _peak_mb()
    return {
        "n": n, "analyses": run.analyses, "build_s": build_s, "scan_cache_dir_s": scan_dir_s,
        "check_s": check_s, "fix_s": fix_s, "recheck_s": recheck_s,
        "check_per_s": n / check_s, "fix_per_s": n / fix_s, "recheck_per_s": n / recheck_s,
        "peak_self_mb": own, "peak_child_mb": child,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 5000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.sizes[0], args.workers)))
        return
    print(f"{'N':>6} {'analyses':>8} {'scan_cache_dir':>14} {'check':>8} {'check/s':>8} "
          f"{'fix':>8} {'fix/s':>8} {'recheck':>8} {'peak MB (self+worker)':>22}")
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, str(n), "--one", "--workers", str(args.workers)],
            check=True, capture_output=True, text=True,
        ).stdout
        r = json.loads(out)
        print(f"{n:>6} {r['analyses']:>8} {r['scan_cache_dir_s']:>13.2f}s {r['check_s']:>7.2f}s "
              f"{r['check_per_s']:>8.0f} {r['fix_s']:>7.2f}s {r['fix_per_s']:>8.0f} "
              f"{r['recheck_s']:>7.2f}s {r['peak_self_mb']:>10.0f} + {r['peak_child_mb']:.0f}")


if __name__ == "__main__":
    main()
