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
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.paired import memory_mb, start_serve
from tests.support.ggufs import big_vocab_header
from tests.support.hostilehub import HostileHub
from tests.support.serve import hub_env, stop_server
from tests.support.service import free_port

REPO = "evil/bigheader-GGUF"
TOKENS, ODD_KEYS = 4_000_000, 1_500
IM_END = b"4000098"  # <|im_end|>'s id: the 96 byte tokens, TOKENS more, then the specials
CHECKS, AT_ONCE = 10, 2
TARGET_MB = 100


def settled_mb(pid: int, quiet: float = 2.0, longest: float = 20.0) -> int:
    """``pid``'s resident memory (MB) once it has not fallen for ``quiet`` seconds."""
    low, since, end = memory_mb(pid)["VmRSS"], time.monotonic(), time.monotonic() + longest
    while time.monotonic() - since < quiet and time.monotonic() < end:
        time.sleep(0.25)
        now = memory_mb(pid)["VmRSS"]
        if now < low:
            low, since = now, time.monotonic()
    return low


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=600) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def run(code: Path, hub: HostileHub) -> dict[str, float]:
    """The ten checks against ``code``'s ``eosfix serve``: its memory and the wall time."""
    with tempfile.TemporaryDirectory(prefix="bench-page-memory-") as tmp:
        home = Path(tmp)
        env = {
            **hub_env(code, hub.url, home),
            "EOSFIX_WEBHOOK_SECRET": "memory",
            "EOSFIX_STATE_DIR": str(home / "state"),
            "EOSFIX_PAGE_RATE": "100000",
        }
        port = free_port()
        proc = start_serve(env, port, code, home / "serve.log")
        try:
            before = settled_mb(proc.pid)
            answers: list[tuple[int, bytes]] = []

            def visitor(k: int) -> None:
                for _ in range(k, CHECKS, AT_ONCE):
                    answers.append(get(f"http://127.0.0.1:{port}/check?repo={REPO}"))

            start = time.monotonic()
            visitors = [threading.Thread(target=visitor, args=(k,)) for k in range(AT_ONCE)]
            for v in visitors:
                v.start()
            for v in visitors:
                v.join()
            wall = time.monotonic() - start
            after, peak = settled_mb(proc.pid), memory_mb(proc.pid)["VmHWM"]
        finally:
            stop_server(proc)
    verdicts = sum(status == 200 and IM_END in body for status, body in answers)
    if verdicts != CHECKS:
        raise SystemExit(f"{code}: {verdicts} of {CHECKS} answers were a verdict")
    return {"start": before, "peak": peak, "after": after, "wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. main)")
    args = parser.parse_args()
    codes = {"this tree": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    with HostileHub() as hub:
        hub.cdn = True  # the .gguf from a CDN, by ranges, as the Hub serves it
        files = {"model-Q4_K_M.gguf": big_vocab_header(TOKENS, ODD_KEYS), "README.md": b"# x\n"}
        hub.add_repo(REPO, files).gguf = {"total": 0, "architecture": "llama"}
        del files
        figures = {name: run(code, hub) for name, code in codes.items()}
    print(f"{CHECKS} page checks of a 120 MB GGUF header, {AT_ONCE} at a time")
    print(
        f"{'':12} {'start MB':>9} {'peak MB':>8} {'after MB':>9} {'after-start':>12} {'wall s':>7}"
    )
    for name, f in figures.items():
        print(
            f"{name:12} {f['start']:9.0f} {f['peak']:8.0f} {f['after']:9.0f} "
            f"{f['after'] - f['start']:12.0f} {f['wall']:7.1f}"
        )
    grew = figures["this tree"]["after"] - figures["this tree"]["start"]
    print(f"target: within {TARGET_MB} MB of the start: {'met' if grew <= TARGET_MB else 'MISSED'}")
    return 0 if grew <= TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
