"""How fast the Hub bot acts: webhook POST to fix PR opened, and 100 pushes drained.

The stand-in Hub (tests/support/hubserver.py) answers every request after ``--latency`` seconds (a
far-away Hub, requests waiting in parallel as on the network); the bot (``eosfix serve``'s app,
uvicorn on 127.0.0.1) runs with its default settings and ``--workers``. Targets (issue 26): one
repo under 2 s at 50 ms a request; 100 pushes across 20 repos drained in under 30 s.

    python benchmarks/bench_serve.py --latency 0.05 --runs 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds a request waits")
    parser.add_argument("--runs", type=int, default=7, help="single-repo runs (median)")
    parser.add_argument("--workers", type=int, default=4, help="repos the bot checks at once")
    args = parser.parse_args()

    import pytest

    from eosfix.serve.config import ServeConfig
    from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
    from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
    from tests.support.hubrepos import repo_files
    from tests.support.hubserver import FakeHub, patch_huggingface_hub
    from tests.support.serve import eosfix_prs, payload
    from tests.support.service import Service

    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        mp = pytest.MonkeyPatch()
        patch_huggingface_hub(mp, hub.url, Path(tmp) / "hf_home")
        hub.latency = args.latency
        config = ServeConfig(
            secret="s", token="hf_bench", policy="pr", workers=args.workers,
            state_dir=Path(tmp) / "state",
        )  # fmt: skip
        with Service(config) as service:
            broken = repo_files(BROKEN)
            times = []
            for run in range(args.runs):
                repo = hub.add_repo(f"bench/one{run}", broken)
                start = time.perf_counter()
                service.post({**payload(repo.repo_id, repo.head)}, secret="s")
                while not eosfix_prs(repo):
                    time.sleep(0.005)
                times.append(time.perf_counter() - start)
            one = statistics.median(times)

            repos = [
                hub.add_repo(f"bench/m{i}", broken if i % 2 == 0 else repo_files(HEALTHY))
                for i in range(20)
            ]
            start = time.perf_counter()
            for n in range(100):
                repo = repos[n % 20]
                sha = hub.push(repo.repo_id, {"README.md": f"push {n}"}) if n >= 20 else repo.head
                service.post(payload(repo.repo_id, sha), secret="s")
            metrics = service.drained(timeout=600)
            drained = time.perf_counter() - start
        mp.undo()
    print(f"stand-in Hub latency {args.latency * 1000:.0f} ms/request, {args.workers} workers")
    print(
        f"one repo, POST -> PR opened: median {one:.2f} s over {args.runs} runs "
        f"(min {min(times):.2f}, max {max(times):.2f}); target < 2 s"
    )
    print(f"100 pushes across 20 repos drained: {drained:.2f} s; target < 30 s")
    print(json.dumps({k: v for k, v in metrics.items() if k.startswith("outcome_")}))
    return 0 if one < 2 and drained < 30 else 1


if __name__ == "__main__":
    raise SystemExit(main())
