"""Ten page checks of a 120 MB GGUF header: ``eosfix serve``'s resident memory after them.

A stand-in Hub (tests/support/hostilehub.py, in this process) serves ``evil/bigheader-GGUF``:
one GGUF whose header is 120 MB (4M tokens and 1,500 keys of 8 KB names: within the reader's
limits, ``MAX_TOKENS`` and ``MAX_HEADER_BYTES``), from a CDN by ranges as the Hub serves it.
``eosfix serve`` runs as its own process; two visitors send ``GET /check?repo=...`` ten times in
all, two at a time. The server's own figures (``/proc``): its resident memory before the first
check, its peak, and its resident memory once settled after the last (not falling for 2 s).
Each answer must be a verdict naming ``<|im_end|>``'s id.

The target: settled within 100 MB of the start. Exit 1 when this tree misses it.

    python benchmarks/bench_page_memory.py                       # this tree
    python benchmarks/bench_page_memory.py --baseline DIR        # and another checkout after it
    python benchmarks/bench_page_memory.py --tokens 1000000 --checks 6   # smaller, quicker
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.ggufs import BASE, big_vocab_header
from tests.support.hostilehub import HostileHub
from tests.support.serve import PageMemory, page_checks_memory

REPO = "evil/bigheader-GGUF"
TARGET_MB = 100


def run(code: Path, hub_url: str, args: argparse.Namespace) -> PageMemory:
    im_end = str(len(BASE) + args.tokens + 2).encode()  # <|im_end|>: the specials come last
    with tempfile.TemporaryDirectory(prefix="bench-page-memory-") as tmp:
        figures = page_checks_memory(
            code, hub_url, Path(tmp), REPO, checks=args.checks, at_once=args.at_once,
            id_text=im_end,
        )  # fmt: skip
    if figures.verdicts != args.checks:
        raise SystemExit(f"{code}: {figures.verdicts} of {args.checks} answers were a verdict")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. main)")
    parser.add_argument("--tokens", type=int, default=4_000_000, help="the header's tokens")
    parser.add_argument("--odd-keys", type=int, default=1_500, help="keys of 8 KB names")
    parser.add_argument("--checks", type=int, default=10)
    parser.add_argument("--at-once", type=int, default=2)
    args = parser.parse_args()
    codes = {"this tree": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    with HostileHub() as hub:
        hub.cdn = True  # the .gguf from a CDN, by ranges, as the Hub serves it
        header = big_vocab_header(args.tokens, args.odd_keys)
        size = len(header) / 1e6
        files = {"model-Q4_K_M.gguf": header, "README.md": b"# x\n"}
        hub.add_repo(REPO, files).gguf = {"total": 0, "architecture": "llama"}
        del header, files
        figures = {name: run(code, hub.url, args) for name, code in codes.items()}
    print(f"{args.checks} page checks of a {size:.0f} MB GGUF header, {args.at_once} at a time")
    print(f"{'':12} {'start':>8} {'peak':>8} {'after':>8} {'after-start':>12} {'wall s':>7}  (MiB)")
    for name, f in figures.items():
        print(
            f"{name:12} {f.start:8.0f} {f.peak:8.0f} {f.after:8.0f} "
            f"{f.after - f.start:12.0f} {f.wall:7.1f}"
        )
    grew = figures["this tree"].after - figures["this tree"].start
    met = grew <= TARGET_MB * 1e6 / 2**20
    print(f"target: within {TARGET_MB} MB of the start: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
