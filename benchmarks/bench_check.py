"""Time `eosfix check` against the by-hand check with transformers, each as a whole process.

    python benchmarks/bench_check.py [-n 5] [--corpus DIR]

Per corpus repo that ships tokenizer.json: the median wall time of
``python -m eosfix check DIR --format json`` and of a process that does what people do by
hand (``AutoTokenizer.from_pretrained`` + ``apply_chat_template`` +
``GenerationConfig.from_pretrained``), and their ratio. Then ``eosfix check`` on a small sample
repo. Targets: eosfix >= 10x faster per repo; a small sample repo < 0.35 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("EOSFIX_CORPUS", ROOT.parent / "shared" / "corpus"))
SAMPLE = ROOT / "sample_repos" / "llama3-healthy"
RATIO_TARGET = 10.0
SAMPLE_TARGET_S = 0.35

BY_HAND = """
import sys, warnings
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
"""


def _time(cmd: list[str], repeats: int) -> float:
    """Median wall time of ``cmd`` (one warm-up run first, so the OS file cache is warm)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    subprocess.run(cmd, capture_output=True, env=env, check=False)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()}")
    return statistics.median(times)


def eosfix_cmd(folder: Path) -> list[str]:
    return [sys.executable, "-m", "eosfix", "check", str(folder), "--format", "json"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--repeats", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)

    repos = sorted(p for p in args.corpus.glob("*/") if (p / "tokenizer.json").is_file())
    if not repos:
        print(f"no corpus repo with tokenizer.json under {args.corpus}", file=sys.stderr)
    print(f"median of {args.repeats} runs, whole processes ({sys.executable})")
    print(f"{'repo':<34} {'eosfix':>9} {'by hand':>9} {'ratio':>7}")
    ok = True
    for repo in repos:
        ours = _time(eosfix_cmd(repo), args.repeats)
        theirs = _time([sys.executable, "-c", BY_HAND, str(repo)], args.repeats)
        ratio = theirs / ours
        ok &= ratio >= RATIO_TARGET
        print(f"{repo.name:<34} {ours:>8.3f}s {theirs:>8.3f}s {ratio:>6.1f}x")
    sample = _time(eosfix_cmd(SAMPLE), args.repeats)
    print(f"{'sample_repos/' + SAMPLE.name:<34} {sample:>8.3f}s")
    print()
    met_ratio = "met" if ok and repos else "NOT met"
    met_sample = "met" if sample < SAMPLE_TARGET_S else "NOT met"
    print(f"target eosfix >= {RATIO_TARGET:.0f}x faster per repo: {met_ratio}")
    print(f"target sample repo < {SAMPLE_TARGET_S} s: {met_sample} ({sample:.3f} s)")
    return 0 if (ok and sample < SAMPLE_TARGET_S) else 1


if __name__ == "__main__":
    raise SystemExit(main())
