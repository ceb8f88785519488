"""Benchmark `eosfix check ORG/REPO-GGUF`: a GGUF repo on the Hub checked by its files'
headers, side by side with the only way before (every file downloaded whole).

The stand-in Hub (tests/support/hubserver.py) runs in its own process, answers every request after
LATENCY seconds (default 50 ms, a far-away Hub), redirects .gguf downloads to its CDN host as
the Hub does, and holds one repo of N quantisations (default 20) of a Llama-3-class model:
llama.cpp's own ggml-vocab-llama-bpe.gguf (128,256 tokens, 280,147 merges; from the
llama-cpp-python 0.3.36 sdist, as tests/runtimes/test_llamacpp_real.py extracts it)
given the Llama 3 chat template of sample_repos/llama3-healthy, one file per quant label with
its own general.file_type, each declared SIZE bytes (default 4.9 GB, an 8B Q4_K_M; only the
header and a tensor are held, the rest reads as zeros).

The check is the real command in a fresh process (`eosfix check ORG/REPO --format json`,
an empty HF_HOME). Reported: wall time (median of RUNS), requests the Hub and its CDN
received, and per file the requests, the bytes read, the key/value section's size and the
file's size. The baseline column is what downloading every file whole (`hf download`,
`llama-server -hf`, `ollama pull`) must move: each file's size; it is not timed (4.9 GB x N).

    python benchmarks/bench_gguf_hub.py                 # 20 quants, 50 ms, 3 runs
    python benchmarks/bench_gguf_hub.py --quants 6 --latency 0.1
    python benchmarks/bench_gguf_hub.py --baseline DIR --runs 9   # paired with another checkout

``--baseline DIR`` runs this checkout's command and DIR's in turn against the same stand-in Hub
(A B, B A, ... after one warm-up pair; each run a fresh process with an empty HF_HOME) and
prints the medians of wall time, CPU time and peak memory, and the median of the pairs' ratios.

Targets (issue: GGUF repos on the Hub): 20 quants at 50 ms checked in <= 3 s, <= 3 requests
per file, bytes read per file <= its metadata section (with the slack of the last read).
"""

from __future__ import annotations

import argparse
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

QUANTS = (  # label -> llama.cpp's general.file_type (LLAMA_FTYPE_*)
    ("Q2_K", 10), ("Q3_K_S", 11), ("Q3_K_M", 12), ("Q3_K_L", 13), ("Q4_0", 2), ("Q4_1", 3),
    ("Q4_K_S", 14), ("Q4_K_M", 15), ("Q5_0", 8), ("Q5_1", 9), ("Q5_K_S", 16), ("Q5_K_M", 17),
    ("Q6_K", 18), ("Q8_0", 7), ("IQ2_XS", 20), ("IQ3_XXS", 23), ("IQ3_M", 27), ("IQ4_XS", 30),
    ("IQ4_NL", 25), ("F16", 1), ("BF16", 32), ("IQ2_M", 29),
)  # fmt: skip
REPO = "bench-org/Llama-3-8B-Instruct-GGUF"


def _files(n: int, folder: Path) -> dict[str, bytes]:
    """N quantisations' headers (gguf-py rewrites the vocabulary file with a template and
    a file type), each with a 64-byte tensor."""
    import gguf
    import numpy

    from eosfix.containers.gguf.read import read_header
    from tests.support.ggufs import field_values
    from tests.support.testcache import llama_cpp_vocab_folder, llama_cpp_vocabularies

    try:
        llama_cpp_vocabularies()  # from the test cache, or the package index once
    except LookupError as exc:
        raise SystemExit(str(exc)) from None
    src = llama_cpp_vocab_folder() / "ggml-vocab-llama-bpe.gguf"
    template = (ROOT / "sample_repos/llama3-healthy/chat_template.jinja").read_text()
    header = read_header(src)
    out = {}
    for label, ftype in QUANTS[:n]:
        dst = folder / f"Llama-3-8B-Instruct-{label}.gguf"
        w = gguf.GGUFWriter(str(dst), header.value("general.architecture"))
        for key, f in header.fields.items():
            if key in ("general.architecture", "general.file_type"):
                continue
            vtype = gguf.GGUFValueType(int(f.type))
            sub = gguf.GGUFValueType(int(f.item_type)) if f.item_type is not None else None
            w.add_key_value(key, field_values(header, key), vtype, sub_type=sub)
        w.add_file_type(ftype)
        w.add_chat_template(template)
        w.add_tensor("token_embd.weight", numpy.zeros(16, dtype="float32"))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        out[dst.name] = dst.read_bytes()
        dst.unlink()
    return out


def serve(n: int, latency: float, size: int) -> None:
    """Run a FakeHub holding the repo until stdin closes; answer 'stats' and 'reset'."""
    from paired import answer_hub

    from tests.support.hubserver import FakeHub, add_gguf_repo

    hub = FakeHub()
    hub.cdn = True
    with tempfile.TemporaryDirectory() as tmp:
        files = _files(n, Path(tmp))
    add_gguf_repo(hub, REPO, files, files={"README.md": "# bench\n"},
                  sizes=dict.fromkeys(files, size))  # fmt: skip
    hub.latency = latency
    answer_hub(hub)


def _gguf_files(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every per-file record ('requests', 'bytes_read') anywhere in a JSON entry."""
    found: list[dict[str, Any]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "bytes_read" in v and "requests" in v and "path" in v:
                found.append(v)
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(entry)
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    server = ServedHub(__file__, args.quants, args.latency, args.size)
    url, ask = server.url, server.ask

    times, files, requests = [], [], 0
    try:
        for _ in range(args.runs):
            ask("reset")
            with tempfile.TemporaryDirectory() as home:
                env = {**os.environ, "HF_ENDPOINT": url, "HF_HOME": home,
                       "HF_HUB_DISABLE_TELEMETRY": "1", "EOSFIX_CACHE": home}  # fmt: skip
                t0 = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "eosfix", "check", REPO, "--format", "json"],
                    env=env, capture_output=True, text=True, cwd=home, check=False,
                )  # fmt: skip
                times.append(time.perf_counter() - t0)
            if proc.returncode not in (0, 1):
                raise SystemExit(f"eosfix check failed ({proc.returncode}): {proc.stderr}")
            report = json.loads(proc.stdout)
            files = [f for e in report["repos"] for f in _gguf_files(e)]
            requests = ask("stats")["requests"]
    finally:
        server.close()
    return {"times": times, "files": files, "requests": requests, "stderr": proc.stderr}


def compare(args: argparse.Namespace) -> None:
    """This checkout against ``args.baseline``, in pairs (see the module)."""
    from paired import Pairs, compile_bytecode, machine, run_once, table

    sides = {"this": ROOT, "baseline": args.baseline.resolve()}
    for root in sides.values():
        compile_bytecode(root)
    server = ServedHub(__file__, args.quants, args.latency, args.size)
    runs: dict[str, list[Any]] = {"this": [], "baseline": []}
    try:
        for i in range(args.runs + 1):  # the first pair warms the stand-in and the disk cache
            for side in ("this", "baseline") if i % 2 else ("baseline", "this"):
                with tempfile.TemporaryDirectory() as home:
                    env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HOME": home,
                           "HF_HUB_DISABLE_TELEMETRY": "1", "EOSFIX_CACHE": home,
                           "PYTHONPATH": str(sides[side])}  # fmt: skip
                    cmd = [sys.executable, "-m", "eosfix", "check", REPO, "--format", "json"]
                    run = run_once(cmd, env, cwd=Path(home))
                if i:
                    runs[side].append(run)
    finally:
        server.close()
    print(f"{REPO}: {args.quants} quants, {args.latency * 1000:.0f} ms a request, "
          f"{args.runs} pairs; this {ROOT}, baseline {sides['baseline']}; {machine()}")  # fmt: skip
    print(table(Pairs(runs["this"], runs["baseline"]), "this", "baseline"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quants", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--size", type=int, default=4_920_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to run in pairs with")
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), float(args.serve[1]), int(args.serve[2]))
        return
    if args.baseline is not None:
        compare(args)
        return
    from paired import compile_bytecode, machine

    compile_bytecode()  # the command's imports from bytecode, as an installed eosfix's are
    got = run(args)
    files = sorted(got["files"], key=lambda f: f["path"])
    assert len(files) == args.quants, (len(files), got["stderr"])
    print(f"{REPO}: {args.quants} quants, {args.latency * 1000:.0f} ms a request, "
          f"{len(got['times'])} runs; {machine()}")  # fmt: skip
    print(f"{'file':<40} {'requests':>8} {'bytes read':>12} {'kv section':>12} "
          f"{'read/kv':>8} {'read/file':>10} {'baseline (whole file)':>22}")  # fmt: skip
    for f in files:
        print(f"{f['path']:<40} {f['requests']:>8} {f['bytes_read']:>12,} "
              f"{f['metadata_bytes']:>12,} {f['bytes_read'] / f['metadata_bytes']:>8.3f} "
              f"{f['bytes_read'] / f['size']:>10.5f} {f['size']:>22,}")  # fmt: skip
    read = sum(f["bytes_read"] for f in files)
    size = sum(f["size"] for f in files)
    wall = statistics.median(got["times"])
    most = max(f["requests"] for f in files)
    over = max(f["bytes_read"] / f["metadata_bytes"] for f in files)
    print(
        f"total: {read:,} bytes read of {size:,} ({read / size:.6f}); "
        f"{got['requests']} requests received by the stand-in (info, resolve, CDN)"
    )
    print(f"wall: median {wall:.2f} s ({', '.join(f'{t:.2f}' for t in got['times'])})")
    print(f"targets: <= 3 s: {wall:.2f} s {'met' if wall <= 3 else 'MISSED'}; "
          f"<= 3 requests a file: {most} {'met' if most <= 3 else 'MISSED'}; "
          f"bytes read <= kv section (+5% slack of the last read): {over:.3f} x "
          f"{'met' if over <= 1.05 else 'MISSED'}")  # fmt: skip
    print(got["stderr"].strip().splitlines()[-1] if got["stderr"].strip() else "")


if __name__ == "__main__":
    main()
