"""Benchmark `eosfix hub --author ORG` on a GGUF publisher: every repo checked by its files'
headers (eosfix.targets.gguf_hub, the check `eosfix check ORG/REPO-GGUF` runs), one row per repo.

The stand-in Hub (tests/support/hubserver.py) runs in its own process, answers every request after
LATENCY seconds (default 50 ms, a far-away Hub), redirects .gguf downloads to its CDN host as the
Hub does, and holds REPOS repos (default 1,000) of QUANTS quantisations each (default 6), each file
declared SIZE bytes (default 4.9 GB; only the header and a tensor are held). The headers are
written with gguf-py (tests/support/ggufs.py): a Command-R-style model whose converter sets eot to
``<|END_OF_TURN_TOKEN|>``, with a vocabulary of VOCAB tokens (default 32,000, the size of a
Llama-2/Mistral vocabulary: a key/value section of about 0.5 MB); in one repo out of ten the Q2_K
comes from an older conversion without eot (a quant that differs, which llama.cpp runs on past the
turn end), so the audit must name it.

The audit is the real command in a fresh process (`eosfix hub --author ORG --format csv`, an
empty HF_HOME and eosfix store). Reported: wall time (median of RUNS), requests the stand-in
received (API, resolve, CDN) per repo, verdicts. The baseline is what a whole download of each
file (`hf download`) must move: REPOS x QUANTS x SIZE bytes; it is not timed.

    python benchmarks/bench_gguf_audit.py                       # 1,000 repos, 6 quants, 50 ms
    python benchmarks/bench_gguf_audit.py --repos 200 --runs 1

Target (issue: GGUF repos on the Hub): a publisher of 1,000 repos at 50 ms a request audited
in <= 60 s.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from paired import ServedHub

ORG = "bench-gguf"
QUANTS = (("Q4_K_M", 15), ("Q2_K", 10), ("Q3_K_M", 12), ("Q5_K_M", 17), ("Q6_K", 18),
          ("Q8_0", 7), ("Q4_0", 2), ("Q5_0", 8), ("IQ4_XS", 30), ("F16", 1))  # fmt: skip


def _headers(quants: int, vocab: int, folder: Path) -> tuple[dict[str, bytes], bytes]:
    """Each quant's file (eot set), and the Q2_K of an older conversion (no eot)."""
    from tests.support import ggufs

    normal = [f"tok{i}" for i in range(vocab)]
    ids = {"bos": "<BOS_TOKEN>", "eos": "<EOS_TOKEN>"}

    def write(label: str, ftype: int, with_eot: bool) -> bytes:
        path = ggufs.write_gguf(
            folder / f"Model-{label}.gguf", ggufs.COMMAND_R_SPECIALS, template=ggufs.COMMAND_R,
            ids={**ids, "eot": "<|END_OF_TURN_TOKEN|>"} if with_eot else ids, normal=normal,
            kv={"general.file_type": ftype}, tensor=bytes(64),
        )  # fmt: skip
        data = path.read_bytes()
        path.unlink()
        return data

    files = {label: write(label, ftype, True) for label, ftype in QUANTS[:quants]}
    return files, write("Q2_K", 10, False)


def serve(repos: int, quants: int, vocab: int, latency: float, size: int) -> None:
    """Run a FakeHub holding the publisher until stdin closes; answer 'stats' and 'reset'."""
    from paired import answer_hub

    from tests.support.hubserver import FakeHub, gguf_summary

    hub = FakeHub()
    hub.cdn = True
    with tempfile.TemporaryDirectory() as tmp:
        files, older = _headers(quants, vocab, Path(tmp))
    summary = gguf_summary(next(iter(files.values())))  # once: every repo's is alike
    for n in range(repos):
        name = f"Model-{n:04d}"
        held = {f"{name}-{label}.gguf": data for label, data in files.items()}
        if n % 10 == 9 and "Q2_K" in files:
            held[f"{name}-Q2_K.gguf"] = older
        repo_id = f"{ORG}/{name}-GGUF"
        repo = hub.add_repo(repo_id, {"README.md": f"# {name}\n", **held})
        repo.gguf = summary
        for path in held:
            hub.declared_sizes[(repo_id, path)] = size
    hub.latency = latency
    answer_hub(hub)


def run(args: argparse.Namespace) -> dict[str, Any]:
    server = ServedHub(__file__, args.repos, args.quants, args.vocab, args.latency, args.size)
    url, ask = server.url, server.ask

    times: list[float] = []
    rows: list[dict[str, str]] = []
    requests = 0
    try:
        for _ in range(args.runs):
            ask("reset")
            with tempfile.TemporaryDirectory() as home:
                env = {**os.environ, "HF_ENDPOINT": url, "HF_HOME": home,
                       "HF_HUB_DISABLE_TELEMETRY": "1", "EOSFIX_CACHE": home}  # fmt: skip
                t0 = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "eosfix", "hub", "--author", ORG, "--format", "csv"],
                    env=env, capture_output=True, text=True, cwd=home, check=False,
                )  # fmt: skip
                times.append(time.perf_counter() - t0)
            if proc.returncode not in (0, 1):
                raise SystemExit(f"eosfix hub failed ({proc.returncode}): {proc.stderr}")
            rows = list(csv.DictReader(io.StringIO(proc.stdout)))
            requests = ask("stats")["requests"]
    finally:
        server.close()
    return {"times": times, "rows": rows, "requests": requests, "stderr": proc.stderr}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--quants", type=int, default=6, choices=range(1, len(QUANTS) + 1))
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--size", type=int, default=4_920_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        repos, quants, vocab, latency, size = args.serve
        serve(int(repos), int(quants), int(vocab), float(latency), int(size))
        return
    from paired import compile_bytecode, machine

    compile_bytecode()  # the command's imports from bytecode, as an installed eosfix's are
    got = run(args)
    rows = got["rows"]
    assert len(rows) == args.repos, (len(rows), got["stderr"][-2000:])
    verdicts: dict[str, int] = {}
    for row in rows:
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    differing = args.repos // 10 if args.quants >= 2 else 0
    assert verdicts.get("fixable", 0) == differing, verdicts  # each older Q2_K named
    wall = statistics.median(got["times"])
    files = args.repos * args.quants
    print(f"{ORG}: {args.repos} GGUF repos x {args.quants} quants ({args.vocab:,}-token "
          f"vocabulary), {args.latency * 1000:.0f} ms a request, {len(got['times'])} runs; "
          f"{machine()}")  # fmt: skip
    print(f"verdicts: {json.dumps(verdicts, sort_keys=True)}")
    print(
        f"requests received by the stand-in (listing, info, resolve, CDN): {got['requests']:,}"
        f" = {got['requests'] / args.repos:.2f} a repo, {got['requests'] / files:.2f} a file"
    )
    print(f"baseline (every file whole): {files * args.size / 1e12:.1f} TB to move; not timed")
    print(
        f"wall: median {wall:.1f} s ({', '.join(f'{t:.1f}' for t in got['times'])}); "
        f"{args.repos / wall:.1f} repos a second"
    )
    scaled = wall * 1000 / args.repos
    print(
        f"target: 1,000 repos <= 60 s: {scaled:.1f} s{' (scaled)' * (args.repos != 1000)} "
        f"{'met' if scaled <= 60 else 'MISSED'}"
    )
    print(got["stderr"].strip().splitlines()[-1] if got["stderr"].strip() else "")


if __name__ == "__main__":
    main()
