"""Load on the page: concurrent checks by repo id against the stand-in Hub.

``eosfix serve`` runs as its own process (the page's defaults: 4 checks at once; the
per-client rate lifted with ``EOSFIX_PAGE_RATE``, since every request here comes from one
address) against the stand-in Hub (tests/support/hubserver.py, every request answered after
``--latency`` seconds, 50 ms by default). ``--repos`` repos, every other one broken (missing
``<|im_end|>``).

1. **One check**: ``GET /check?repo=...`` of each of ``--single`` repos in turn, against the
   baseline of the same check in-process (``HubSession.check``, what the page calls), each
   repo checked cold by both (a fresh store each): median seconds of each and their ratio.
   Target: a check renders in at most 1 s.
2. **Concurrent checks**: ``--rounds`` rounds of ``--concurrent`` checks sent at once (100
   threads), each a different repo; every answer must be a 200 with the verdict of its repo.
   The server's resident memory after start and after each round: flat means the rounds
   after the first stay within a few MB of it. Latency median, p99 and max per round.
3. **Page weight**: the bytes of ``/`` and what it loads (the CSS and the script), before a
   result. Target: at most 150 KB.

Exit 1 when a target or a guarantee does not hold (an answer that is not 200, a wrong verdict,
a check over 1 s, a page over 150 KB).

    python benchmarks/bench_page.py                       # 100 concurrent, 3 rounds
    python benchmarks/bench_page.py --concurrent 20 --rounds 1 --single 3   # quick

Bounded: each round waits at most ``--timeout`` seconds per answer; the server is stopped
(killed after 30 s) whatever happens.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.paired import memory_mb, start_serve
from tests.support.serve import stop_server


def main() -> int:  # one run, told top to bottom
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--single", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="stand-in Hub, s/request")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    import pytest

    from eosfix.sources.hub.store import Store
    from eosfix.targets.session import HubSession
    from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
    from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
    from tests.support.hubrepos import repo_files
    from tests.support.hubserver import FakeHub, patch_huggingface_hub
    from tests.support.service import free_port, http

    repos = args.concurrent * args.rounds + 2 * args.single
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        mp = pytest.MonkeyPatch()
        patch_huggingface_hub(mp, hub.url, Path(tmp) / "hf_home")
        hub.latency = args.latency
        broken, healthy = repo_files(BROKEN), repo_files(HEALTHY)
        ids = [f"load/m{i:04d}" for i in range(repos)]
        for i, repo_id in enumerate(ids):
            files = {**(broken if i % 2 == 0 else healthy), "README.md": repo_id.encode()}
            hub.add_repo(repo_id, files)  # a commit of its own: nothing shared in the store
        verdict = {r: "fixable" if i % 2 == 0 else "ok" for i, r in enumerate(ids)}
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "EOSFIX_WEBHOOK_SECRET": "bench",
            "EOSFIX_STATE_DIR": str(Path(tmp) / "state"),
            "EOSFIX_CACHE": str(Path(tmp) / "page-store"),
            "EOSFIX_PAGE_RATE": "100000",
        }
        env.pop("HF_TOKEN", None)
        log_path = Path(tmp) / "serve.log"
        proc = start_serve(env, port, Path(tmp), log_path)
        try:
            rss = [memory_mb(proc.pid)["VmRSS"]]

            def check(repo_id: str) -> tuple[str, int, float, str]:
                start = time.perf_counter()
                query = urllib.parse.urlencode({"repo": repo_id})
                try:
                    reply = http("GET", f"{url}/check?{query}")
                    status, body = reply.status_code, reply.body.decode("utf-8", "replace")
                except OSError as exc:
                    status, body = 0, str(exc)
                found = re.search(r'id="verdict">([^<]*)<', body)
                return repo_id, status, time.perf_counter() - start, found.group(1) if found else ""

            # 1. one check, page against in-process
            single = ids[-2 * args.single :]
            page_times, direct_times = [], []
            for repo_id in single[: args.single]:
                got = check(repo_id)
                page_times.append(got[2])
                if got[1] != 200 or got[3] != verdict[repo_id]:
                    failures.append(f"single {repo_id}: {got[1]} {got[3]!r}")
            for repo_id in single[args.single :]:
                session = HubSession(store=Store(Path(tmp) / f"direct-{repo_id[-4:]}"))
                start = time.perf_counter()
                session.check(repo_id)
                direct_times.append(time.perf_counter() - start)
            page_median = statistics.median(page_times)
            direct_median = statistics.median(direct_times)
            print(
                f"one check: page {page_median:.3f} s, in-process HubSession.check "
                f"{direct_median:.3f} s (median of {args.single}; ratio "
                f"{page_median / direct_median:.2f}); {args.latency * 1000:.0f} ms per Hub request"
            )
            if max(page_times) > 1.0:
                failures.append(f"a check took {max(page_times):.2f} s (target 1 s)")

            # 2. concurrent rounds
            for n in range(args.rounds):
                batch = ids[n * args.concurrent : (n + 1) * args.concurrent]
                start = time.perf_counter()
                with ThreadPoolExecutor(args.concurrent) as pool:
                    done = list(pool.map(check, batch))
                took = time.perf_counter() - start
                rss.append(memory_mb(proc.pid)["VmRSS"])
                bad = [d for d in done if d[1] != 200 or d[3] != verdict[d[0]]]
                failures += [f"round {n + 1} {r}: status {s}, verdict {v!r}" for r, s, _, v in bad]
                times = sorted(d[2] for d in done)
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(
                    f"round {n + 1}: {len(done)} concurrent checks in {took:.1f} s, "
                    f"{len(done) - len(bad)} ok; latency median {statistics.median(times):.2f} s, "
                    f"p99 {p99:.2f} s, max {times[-1]:.2f} s; server RSS {rss[-1]} MB"
                )
            print(f"server RSS after start {rss[0]} MB, after each round {rss[1:]} MB")

            # 3. page weight
            weight = 0
            for path in ("/", "/static/page.css", "/static/page.js"):
                weight += len(http("GET", url + path).body)
            print(f"page weight before a result: {weight} bytes ({weight / 1024:.1f} KB)")
            if weight > 150 * 1024:
                failures.append(f"page weight {weight} bytes (target 150 KB)")
        finally:
            stop_server(proc)
        mp.undo()
    for failure in failures[:20]:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
