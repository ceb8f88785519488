"""Time a small `eosfix check` against the import floor, side by side, as whole processes.

    python benchmarks/bench_startup.py [-n 15] [--sample NAME]

The import floor is ``python -c "import jinja2, pydantic, click"``: what Python takes to
import the libraries eosfix is built on, before it can do anything. Most runs of eosfix are
one small repo (a pre-commit hook, a check after a conversion), where start-up is the whole
cost: ``eosfix check`` of a sample repo should take at most 1.5 times the floor. ``--help``
and ``--version`` (which import no analysis) are timed against the same floor.

Pairs of runs after a warm-up, alternating order; medians, and the median of the paired
ratios (``benchmarks/paired.py``). The target is judged on CPU time, which other processes
on a shared machine barely move; wall time is printed beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired import ROOT, compile_bytecode, machine, paired, table

FLOOR = [sys.executable, "-c", "import jinja2, pydantic, click"]
TARGET = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=15, help="pairs (default 15)")
    parser.add_argument("--sample", default="llama3-healthy", help="a folder of sample_repos/")
    args = parser.parse_args(argv)
    sample = ROOT / "sample_repos" / args.sample
    compile_bytecode()
    print(f"{machine()}; {args.runs} pairs each, whole processes ({sys.executable})")
    print(f"B, the import floor: {' '.join(FLOOR[1:])}")
    commands = {
        f"eosfix check sample_repos/{args.sample}": ["check", str(sample)],
        "eosfix --help": ["--help"],
        "eosfix --version": ["--version"],
    }
    ratios = {}
    for name, cli_args in commands.items():
        pairs = paired([sys.executable, "-m", "eosfix", *cli_args], FLOOR, args.runs)
        ratios[name] = pairs.ratio("cpu")
        print(f"\nA: {name}")
        print(table(pairs, "A", "floor"))
    check = next(iter(ratios))
    met = "met" if ratios[check] <= TARGET else "NOT met"
    print(f"\ntarget {check} <= {TARGET}x the floor (CPU): {met} ({ratios[check]:.2f}x)")
    return 0 if ratios[check] <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
