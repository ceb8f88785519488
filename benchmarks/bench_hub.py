"""Benchmark `eosfix hub --author`: an organisation audit against the stand-in Hub, side by side
with today's code path.

The stand-in Hub (tests/support/hubserver.py) runs in its own process, answers every request after
LATENCY seconds (default 50 ms, as a far-away Hub), pages /api/models with Link headers, and
holds N ChatML repos (4 small stop-relevant files each, a README and weights; two in three
need a fix). Each audit is the real command in a fresh process, output to a file:

- ``today``: the code of ``--baseline-ref`` (default: the commit this work started from),
  unpacked with ``git archive``; its HF cache starts empty;
- ``first``: this tree, with eosfix's store empty;
- ``second``: this tree again, same store: the organisation did not change.

For each: wall time, requests the Hub received (by kind), peak memory of the audit's whole
process tree (the sum of VmRSS over the client and its worker processes, sampled every
20 ms), and a check that every repo got the same verdict as today's.

    python benchmarks/bench_hub.py                  # N = 100, 1000, 5000; today's up to 1000
    python benchmarks/bench_hub.py 1000 --baseline-max 0    # no baseline
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from paired import ServedHub, answer_hub, audit_env

BASE_REF = "79c4a19"  # main when issue 13 started: `eosfix hub --author` before the batch engine


# --- the stand-in Hub, in its own process ----------------------------------------------------


def serve(n: int, latency: float, page_size: int) -> None:
    """Serve a FakeHub holding org/m00000... (``ServedHub``); 'stats' counts its requests by
    kind."""
    from tests.support.cachebuilder import chatml_files
    from tests.support.hubserver import FakeHub

    hub = FakeHub()
    hub.page_size = page_size
    for i in range(n):
        hub.add_repo(f"org/m{i:05d}", chatml_files(100_000 + 10 * i, healthy=i % 3 == 0))
    hub.latency = latency
    answer_hub(hub, {"stats": lambda _: _stats(hub)})


def _stats(hub: Any) -> dict[str, int]:
    kinds = {"HEAD": 0, "listing": 0, "info": 0, "file": 0, "other": 0}
    for r in hub.request_log:
        if r.method == "HEAD":
            kinds["HEAD"] += 1
        elif r.path == "/api/models":
            kinds["listing"] += 1
        elif r.path.startswith("/api/models/"):
            kinds["info"] += 1
        elif "/resolve/" in r.path:
            kinds["file"] += 1
        else:
            kinds["other"] += 1
    return {"requests": len(hub.request_log), **kinds}


# --- one audit, measured ---------------------------------------------------------------------


def _tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and all its descendants, in kB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(x.split()[1]) for x in f if x.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


def audit(code: Path, hub: ServedHub, home: Path, out: Path) -> dict[str, Any]:
    """`eosfix hub --author org --format json` with ``code`` on PYTHONPATH."""
    env = audit_env(code, hub.url, home)
    hub.ask("reset")
    cmd = [sys.executable, "-m", "eosfix", "hub", "--author", "org", "--format", "json"]
    peak = [0]
    t = time.perf_counter()
    with out.open("w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.PIPE, text=True)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], _tree_rss_kb(proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        _, err = proc.communicate()
        done.set()
        sampler.join()
    seconds = time.perf_counter() - t
    payload = json.loads(out.read_text())
    verdicts = {e["name"]: e.get("verdict") or e["status"] for e in payload["repos"]}
    return {
        "s": seconds,
        "exit": proc.returncode,
        "stderr": err[-500:],
        "peak_mb": peak[0] / 1024,
        "verdicts": verdicts,
        **hub.ask("stats"),
    }


def baseline_tree(ref: str, dest: Path) -> Path:
    """Today's code, as it was at ``ref``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "eosfix"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def bench(n: int, args: argparse.Namespace, base: Path | None) -> list[dict[str, Any]]:
    hub = ServedHub(__file__, n, "--latency", args.latency, "--page-size", args.page_size)
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="eosfix-bench-hub-") as tmp:
            work = Path(tmp)
            if base is not None and n <= args.baseline_max:
                rows.append({"audit": "today", **audit(base, hub, work / "today", work / "t")})
            for name in ("first", "second"):
                rows.append({"audit": name, **audit(ROOT, hub, work / "new", work / name)})
    finally:
        hub.close()
    expected = rows[0]["verdicts"]
    for r in rows:
        assert len(r["verdicts"]) == n, (r["audit"], len(r["verdicts"]), r["stderr"])
        assert r["verdicts"] == expected, f"{r['audit']}: verdicts differ from {rows[0]['audit']}"
        assert r["exit"] == 1, (r["audit"], r["exit"], r["stderr"])
        r["n"] = n
        del r["verdicts"]
    return rows


HEAD = (
    f"{'N':>6} {'audit':<7} {'time':>8} {'repos/s':>8} {'requests':>8} {'/repo':>6} "
    f"{'listing':>7} {'info':>6} {'HEAD':>6} {'files':>6} {'peak MB':>8}"
)


def line(r: dict[str, Any]) -> str:
    n = r["n"]
    return (
        f"{n:>6} {r['audit']:<7} {r['s']:>7.1f}s {n / r['s']:>8.0f} {r['requests']:>8} "
        f"{r['requests'] / n:>6.2f} {r['listing']:>7} {r['info']:>6} {r['HEAD']:>6} "
        f"{r['file']:>6} {r['peak_mb']:>8.0f}"
    )


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, each with its measured value."""
    out = []
    by = {(r["n"], r["audit"]): r for r in rows}
    for (n, audit_name), r in sorted(by.items()):
        if audit_name == "first" and n == 1000:
            today = by.get((n, "today"))
            ratio = (
                f", {today['s'] / r['s']:.1f}x faster than today's {today['s']:.0f} s"
                if today
                else ""
            )
            ok = "met" if r["s"] <= 30 else "MISSED"
            out.append(f"1,000 repos in at most 30 s: {r['s']:.1f} s{ratio} ({ok})")
        if audit_name == "first":
            ok = "met" if r["info"] == 0 and r["HEAD"] == 0 else "MISSED"
            out.append(f"N={n} first audit: {r['info']} info calls, {r['HEAD']} HEAD ({ok})")
        if audit_name == "second":
            ok = "met" if r["requests"] == r["listing"] else "MISSED"
            out.append(
                f"N={n} second audit: {r['requests']} requests, listing pages {r['listing']} ({ok})"
            )
    firsts = sorted((n, r["peak_mb"]) for (n, a), r in by.items() if a == "first")
    if len(firsts) > 1:
        (n0, m0), (n1, m1) = firsts[0], firsts[-1]
        out.append(f"peak memory, first audit: {m0:.0f} MB at N={n0}, {m1:.0f} MB at N={n1}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 5000])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--page-size", type=int, default=1000, help="listing page size")
    parser.add_argument("--baseline-ref", default=BASE_REF, help="git ref of today's code")
    parser.add_argument("--baseline-max", type=int, default=1000, help="largest N for today's")
    parser.add_argument("--json", action="store_true", help="print every result as JSON")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.latency, args.page_size)
        return
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="eosfix-base-") as tmp:
        base = baseline_tree(args.baseline_ref, Path(tmp)) if args.baseline_max > 0 else None
        print(f"stand-in Hub: {args.latency * 1000:.0f} ms per request, pages of {args.page_size}")
        print(HEAD, flush=True)
        for n in args.sizes:
            for r in bench(n, args, base):
                rows.append(r)
                print(json.dumps(r) if args.json else line(r), flush=True)
    print()
    for text in targets(rows):
        print(text)


if __name__ == "__main__":
    main()
