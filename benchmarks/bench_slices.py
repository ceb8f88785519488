"""Benchmark a Hub slice audit under a free account's quotas, side by side with today's code.

The stand-in Hub (tests/support/hubserver.py) runs in its own process with the population of
tests/support/hubpopulation.py (families of 5-30 repos made from one base model, sharing their
tokenizer and template files byte for byte, each with its config.json; one-off repos, base
models, GGUF and tokenizer-only repos), all under one organisation so today's code (which
lists by ``--author`` only) audits the same repos. It answers each request after LATENCY
seconds and enforces the free account's quotas (hub-docs rate-limits.md: 1,000 API and 5,000
Resolver requests per 5-minute fixed window) over a scaled window of WINDOW seconds, with the
Hub's ``RateLimit``/``RateLimit-Policy`` headers on every answer and 429 past the quota.

Each audit is the real command (``eosfix hub --author slice --format json``) in a fresh
process with an empty store, the quota windows fresh:

- ``today``: the code of ``--baseline-ref`` (default: main), unpacked with ``git archive``;
- ``new``: this tree;
- ``free``: this tree with no quota: eosfix's own speed here (the bound below needs it).

Reported per audit: wall time, requests per bucket (and per repo), 429 answers (and those
after the first window: the steady state), and whether every repo's JSON entry is byte for
byte today's. Then the bounds, in seconds:

- ``quota bound``: the least time the quotas allow the requests the audit sent: with fixed
  windows, a bucket needing N requests of a quota q per window w cannot send its last before
  ``(ceil(N/q) - 1) * w``; what is left after that runs at eosfix's own speed (``free``'s
  share of it). The target is a duration within 15% of it.
- ``best split``: the fewest windows any client can need on this population with what the
  Hub's API gives (file names in the listing; a content's id only by downloading it or by one
  paths-info request per repo): each repo either downloads its files (as many Resolver
  requests as today sends for it) or spends one API request and downloads only contents no
  earlier repo had; the best mix of the two (a linear program, solved exactly: repos by how
  many downloads an API request saves them).

    python benchmarks/bench_slices.py                    # 10,000 repos, 30 s windows
    python benchmarks/bench_slices.py --repos 2000 --window 10
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from paired import ServedHub, answer_hub, audit_env

ORG = "slice"


# --- the stand-in Hub, in its own process ----------------------------------------------------


def serve(n: int, latency: float, page_size: int) -> None:
    """Serve a FakeHub holding the population (``ServedHub``), with the commands
    ``quota API RES WINDOW`` (fresh windows; 0 0 0: none), ``stats`` (requests by bucket, the
    429s) and ``costs`` (each repo's relevant files' content ids, in listing order)."""
    from tests.support.hubpopulation import populate
    from tests.support.hubserver import FakeHub

    hub = FakeHub()
    hub.page_size = page_size
    populate(hub, n, authors=(ORG,))
    hub.latency = latency
    answer_hub(hub, {
        "quota": lambda words: _quota(hub, int(words[0]), int(words[1]), float(words[2])),
        "stats": lambda _: _stats(hub),
        "costs": lambda _: _contents(hub),
    })  # fmt: skip


def _quota(hub: Any, api: int, res: int, window: float) -> dict[str, Any]:
    hub.clear_rate_limits()
    if api:
        hub.rate_limit(api, window, bucket="api")
        hub.rate_limit(res, window, bucket="resolvers")
    return {}


def _bucket(path: str) -> str:
    if "/resolve/" in path:
        return "resolvers"
    return "api" if path.startswith("/api/") else "cdn"


def _stats(hub: Any) -> dict[str, Any]:
    log = list(hub.request_log)
    start = log[0].time if log else 0.0
    counts = collections.Counter(_bucket(r.path) for r in log)
    limited = [(r.time - start, _bucket(r.path)) for r in log if r.status == 429]
    per_repo = collections.Counter(r.repo_id for r in log if _bucket(r.path) == "resolvers")
    return {
        "api": counts["api"],
        "resolvers": counts["resolvers"],
        "cdn": counts["cdn"],
        "listing": sum(1 for r in log if r.path == "/api/models"),
        "paths_info": sum(1 for r in log if "/paths-info/" in r.path),
        "limited": limited,
        "per_repo": dict(per_repo),
    }


def _contents(hub: Any) -> dict[str, list[str]]:
    """repo id -> the content ids of its files today's code downloads, listing order."""
    from eosfix.core.repo import TOKENIZER_JSON, is_relevant_file
    from tests.support.hubserver import file_entry

    out = {}
    for repo in sorted(hub.repos.values(), key=lambda r: r.repo_id):
        ids = []
        for path, data in sorted(repo.files.items()):
            if is_relevant_file(path) or path == TOKENIZER_JSON:
                entry = file_entry(repo, path, data)
                ids.append(f"{path}:" + (entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]))
        out[repo.repo_id] = ids
    return out


# --- one audit -------------------------------------------------------------------------------


def audit(code: Path, hub: ServedHub, home: Path, quota: tuple[int, int, float]) -> dict[str, Any]:
    env = audit_env(code, hub.url, home)
    home.mkdir(parents=True)
    hub.ask("quota {} {} {:g}".format(*quota))
    hub.ask("reset")
    cmd = [sys.executable, "-m", "eosfix", "hub", "--author", ORG, "--format", "json"]
    out = home / "out.json"
    t = time.perf_counter()
    with out.open("w") as f:  # cwd: the code under test, not this checkout, is imported
        proc = subprocess.run(
            cmd, check=False, env=env, stdout=f, stderr=subprocess.PIPE, text=True, cwd=home
        )
    seconds = time.perf_counter() - t
    payload = json.loads(out.read_text())
    entries = {e["repo_id"]: json.dumps(e, sort_keys=False) for e in payload["repos"]}
    return {"s": seconds, "exit": proc.returncode, "stderr": proc.stderr[-500:],
            "entries": entries, **hub.ask("stats")}  # fmt: skip


def baseline_tree(ref: str, dest: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "eosfix"], check=True, capture_output=True
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


# --- bounds ----------------------------------------------------------------------------------


def quota_bound(run: dict[str, Any], quota: tuple[int, int, float], free_s: float) -> float:
    """The least time the quotas allow the requests ``run`` sent (see the module)."""
    q_api, q_res, window = quota
    worst = free_s
    for n, q in ((run["api"], q_api), (run["resolvers"], q_res)):
        if n == 0:
            continue
        full = math.ceil(n / q) - 1
        tail = (n - full * q) / n
        worst = max(worst, full * window + free_s * tail)
    return worst


def best_split(
    contents: dict[str, list[str]], today: dict[str, Any], pages: int, quota: tuple[int, int, float]
) -> dict[str, float]:
    """The fewest windows any client needs (see the module): each repo downloads its files
    (k: today's Resolver requests for it) or spends one API request and downloads only the
    contents no earlier repo had (u). Minimise max(A / q_api, R / q_res) over the fraction
    of each repo identified: take repos by savings k - u, most first, while it helps."""
    q_api, q_res, _ = quota
    seen: set[str] = set()
    repos = []
    for repo_id, ids in contents.items():
        k = today["per_repo"].get(repo_id, 0)
        content = {i.split(":", 1)[1] for i in ids}
        u = min(k, len(content - seen))
        seen |= content
        repos.append((k, u))
    api, res = float(pages), float(sum(k for k, _ in repos))
    for k, u in sorted(repos, key=lambda r: r[0] - r[1], reverse=True):
        saves = k - u
        if saves <= 0:
            break
        # identify a fraction x of this repo: the API side grows by x, the other shrinks
        x = min(1.0, max(0.0, (res / q_res - api / q_api) / (1 / q_api + saves / q_res)))
        api, res = api + x, res - x * saves
        if x < 1.0:
            break
    return {"api": api, "resolvers": res, "windows": max(api / q_api, res / q_res),
            "floor_resolvers": float(len(seen))}  # fmt: skip


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--window", type=float, default=30.0, help="seconds for 5 minutes")
    parser.add_argument("--api-quota", type=int, default=1000)
    parser.add_argument("--resolver-quota", type=int, default=5000)
    parser.add_argument("--page-size", type=int, default=1000, help="listing page size")
    parser.add_argument("--baseline-ref", default="main", help="git ref of today's code")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.latency, args.page_size)
        return
    n = args.repos
    quota = (args.api_quota, args.resolver_quota, args.window)
    print(f"stand-in Hub: {n} repos, {args.latency * 1000:.0f} ms per request, listing pages of "
          f"{args.page_size}; quotas {quota[0]} API + {quota[1]} Resolver requests per "
          f"{args.window:g} s window (a free account's per 5 minutes)", flush=True)  # fmt: skip
    hub = ServedHub(__file__, n, "--latency", args.latency, "--page-size", args.page_size)
    rows: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="eosfix-bench-slices-") as tmp:
            work = Path(tmp)
            base = baseline_tree(args.baseline_ref, work / "base")
            for name, code, q in (
                ("free", ROOT, (0, 0, 0.0)),
                ("new", ROOT, quota),
                ("today", base, quota),
            ):
                rows[name] = audit(code, hub, work / name, q)
                r = rows[name]
                print(f"  {name}: {r['s']:.1f} s, exit {r['exit']}", flush=True)
            contents = hub.ask("costs")
    finally:
        hub.close()
    today = rows["today"]
    print()
    print(f"{'audit':<6} {'time':>8} {'API':>6} {'/repo':>6} {'files':>7} {'/repo':>6} "
          f"{'429':>5} {'429 after 1st window':>21} {'same entries':>13}")  # fmt: skip
    for name, r in rows.items():
        same = sum(r["entries"].get(k) == v for k, v in today["entries"].items())
        steady = sum(1 for t, _ in r["limited"] if t > args.window)
        print(f"{name:<6} {r['s']:>7.1f}s {r['api']:>6} {r['api'] / n:>6.3f} "
              f"{r['resolvers']:>7} {r['resolvers'] / n:>6.2f} {len(r['limited']):>5} "
              f"{steady:>21} {same:>7}/{len(today['entries'])}")  # fmt: skip
    new, free = rows["new"], rows["free"]
    bound_new = quota_bound(new, quota, free["s"])
    bound_today = quota_bound(today, quota, free["s"])
    split = best_split(contents, today, new["listing"], quota)
    print()
    print(f"quota bound for the requests sent: new {bound_new:.1f} s (took {new['s']:.1f} s, "
          f"{new['s'] / bound_new:.2f}x), today {bound_today:.1f} s (took {today['s']:.1f} s, "
          f"{today['s'] / bound_today:.2f}x)")  # fmt: skip
    print(f"windows of quota used: new {max(new['api'] / quota[0], new['resolvers'] / quota[1]):.2f}"
          f", today {max(today['api'] / quota[0], today['resolvers'] / quota[1]):.2f}; best "
          f"split the Hub's API allows: {split['windows']:.2f} ({split['api']:.0f} API, "
          f"{split['resolvers']:.0f} Resolver requests); every distinct content once: "
          f"{split['floor_resolvers']:.0f} downloads")  # fmt: skip
    print()
    print("targets:")
    files = new["resolvers"] / n
    api = new["api"] / n
    print(f"  file requests per repo <= 1.5: {files:.2f} (today {today['resolvers'] / n:.2f})"
          f" {'met' if files <= 1.5 else 'MISSED'}")  # fmt: skip
    print(f"  API requests <= 1 per 100 repos: {api * 100:.1f} per 100"
          f" {'met' if api <= 0.01 else 'MISSED'}")  # fmt: skip
    steady = sum(1 for t, _ in new["limited"] if t > args.window)
    print(f"  no 429 in the steady state: {steady} after the first window, "
          f"{len(new['limited'])} in all {'met' if steady == 0 else 'MISSED'}")  # fmt: skip
    ratio = new["s"] / bound_new
    print(f"  duration within 15% of the quota bound: {ratio:.2f}x "
          f"{'met' if ratio <= 1.15 else 'MISSED'}")  # fmt: skip
    same = sum(new["entries"].get(k) == v for k, v in today["entries"].items())
    ok = same == len(today["entries"]) == len(new["entries"]) == n
    print(f"  every entry byte-identical to today's: {same}/{n} {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
