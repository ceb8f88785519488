"""Time `eosfix check` against the by-hand check with transformers, each as a whole process.

    python benchmarks/bench_check.py [-n 7] [--corpus DIR] [--repo NAME ...]
    python benchmarks/bench_check.py --baseline DIR [-n 15] [--corpus DIR]

Per corpus repo that ships tokenizer.json (Qwen--Qwen3-4B: an 11 MB one), pairs of
``python -m eosfix check DIR --format json`` and of a process that does what people do by
hand, with transformers and without torch (``AutoTokenizer.from_pretrained`` +
``apply_chat_template`` + ``GenerationConfig.from_pretrained``; torch is made unimportable,
as if it were not installed, and the run fails if anything imported it): medians, and the
median of the paired ratios (``benchmarks/paired.py``). Targets: eosfix >= 10x faster (CPU)
and <= 40 MiB peak.

``--baseline DIR`` compares this checkout with another one (DIR holds its ``eosfix``
package, e.g. ``git archive`` of the commit before a change) on the whole corpus, in pairs
run back to back in alternating order so machine load hits both alike: ``eosfix check`` on
every corpus folder as one process, and the analysis alone (``check`` of every folder in
a fresh process, imports excluded). Each is measured as CPU time (user + system: what the
work costs, barely moved by other processes on a shared machine) and wall time; medians of
the pairs, the median of the paired ratios, and the change.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired import compile_bytecode, machine, paired, table

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("EOSFIX_CORPUS", ROOT.parent / "shared" / "corpus"))
RATIO_TARGET = 10.0
PEAK_TARGET_MIB = 40.0

BY_HAND = """
import sys, warnings
sys.modules["torch"] = None  # transformers without torch: as if it were not installed
warnings.simplefilter("ignore")
from transformers import AutoTokenizer, GenerationConfig
folder = sys.argv[1]
tok = AutoTokenizer.from_pretrained(folder)
tok.apply_chat_template([{"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello"}], tokenize=False)
try:
    GenerationConfig.from_pretrained(folder)
except OSError:  # no generation_config.json: transformers falls back to config.json
    pass
loaded = [m for m, mod in sys.modules.items() if m.split(".")[0] == "torch" and mod is not None]
if loaded:  # exit 4: the benchmark stops (1 would read as "findings")
    print(f"torch was imported: {loaded[:3]}", file=sys.stderr)
    sys.exit(4)
"""


def eosfix_cmd(folder: Path) -> list[str]:
    return [sys.executable, "-m", "eosfix", "check", str(folder), "--format", "json"]


ANALYSIS = """
import sys, time
from pathlib import Path
from eosfix.containers.folder.read import load_repo
from eosfix.containers.folder.keys import FolderStops
from eosfix.decide.check import check
wall, cpu = time.perf_counter(), time.process_time()
for folder in sys.argv[1:]:
    check(load_repo(Path(folder)), FolderStops())
print(time.process_time() - cpu, time.perf_counter() - wall)
"""


def _run(cmd: list[str], src: Path) -> tuple[float, float, str]:
    """CPU and wall time of ``cmd`` with the ``eosfix`` package of ``src`` first on the path."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()  # run from src: the current folder comes first on sys.path
    proc = subprocess.run(cmd, capture_output=True, env=env, cwd=src, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, elapsed, proc.stdout.decode()


def compare(baseline: Path, corpus: Path, repeats: int) -> int:
    """Paired medians of this checkout against ``baseline`` on every corpus folder."""
    folders = [str(p) for p in sorted(corpus.iterdir()) if (p / "tokenizer_config.json").is_file()]
    if not folders:
        print(f"no corpus folder under {corpus}", file=sys.stderr)
        return 1
    check = [sys.executable, "-m", "eosfix", "check", *folders, "--format", "json"]
    analysis = [sys.executable, "-c", ANALYSIS, *folders]
    sides = {"baseline": baseline, "this": ROOT}
    for src in sides.values():  # both with bytecode as pip leaves it, and warm file caches
        compile_bytecode(src)  # (PYTHONDONTWRITEBYTECODE would make a run compile everything)
        _run(check, src)
    rows: dict[str, dict[str, list[float]]] = {}
    for i in range(repeats):
        order = list(sides.items()) if i % 2 == 0 else list(sides.items())[::-1]
        for name, src in order:
            cpu, wall, _ = _run(check, src)
            rows.setdefault("check cpu", {}).setdefault(name, []).append(cpu)
            rows.setdefault("check wall", {}).setdefault(name, []).append(wall)
            cpu, wall = map(float, _run(analysis, src)[2].split())
            rows.setdefault("analysis cpu", {}).setdefault(name, []).append(cpu)
            rows.setdefault("analysis wall", {}).setdefault(name, []).append(wall)
    print(f"{len(folders)} corpus folders, {repeats} pairs ({sys.executable})")
    print(f"baseline: {baseline}")
    labels = {
        "check cpu": "eosfix check, CPU",
        "check wall": "eosfix check, wall",
        "analysis cpu": "analysis only, CPU",
        "analysis wall": "analysis only, wall",
    }
    for what, label in labels.items():
        base, this = (statistics.median(rows[what][k]) for k in ("baseline", "this"))
        ratios = [t / b for b, t in zip(rows[what]["baseline"], rows[what]["this"], strict=True)]
        print(
            f"{label:<20} median baseline {base:6.3f}s, this {this:6.3f}s "
            f"({100 * (this / base - 1):+5.1f}%); median of paired ratios "
            f"{100 * (statistics.median(ratios) - 1):+5.1f}%"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--repeats", type=int, default=7, help="pairs (default 7)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--repo", action="append", help="corpus folder name (repeatable)")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        return compare(args.baseline, args.corpus, args.repeats)

    repos = sorted(p for p in args.corpus.glob("*/") if (p / "tokenizer.json").is_file())
    if args.repo:
        repos = [args.corpus / name for name in args.repo]
        missing = [str(p) for p in repos if not (p / "tokenizer.json").is_file()]
        if missing:
            print(f"no tokenizer.json in {', '.join(missing)} (set EOSFIX_CORPUS)", file=sys.stderr)
            return 1
    if not repos:
        print(f"no corpus repo with tokenizer.json under {args.corpus}", file=sys.stderr)
        return 1
    compile_bytecode()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    print(f"{machine()}; {args.repeats} pairs each, whole processes ({sys.executable})")
    ok = True
    for repo in repos:
        pairs = paired(
            [sys.executable, "-c", BY_HAND, str(repo)], eosfix_cmd(repo), args.repeats, env=env
        )
        speedup, peak = pairs.ratio("cpu"), pairs.median("b", "peak")
        ok &= speedup >= RATIO_TARGET and peak <= PEAK_TARGET_MIB
        size = (repo / "tokenizer.json").stat().st_size / 1e6
        print(f"\n{repo.name} (tokenizer.json {size:.1f} MB): A by hand, B eosfix check")
        print(table(pairs, "by hand", "eosfix"))
        print(
            f"eosfix is {speedup:.1f}x faster (CPU), {pairs.ratio('wall'):.1f}x (wall); "
            f"peak {peak:.1f} MiB"
        )
    met = "met" if ok else "NOT met"
    print(
        f"\ntargets >= {RATIO_TARGET:.0f}x faster (CPU) and <= {PEAK_TARGET_MIB:.0f} MiB peak, "
        f"every repo: {met}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
