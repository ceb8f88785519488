"""Load on the Hub bot: webhooks at a steady rate over many repos, against the stand-in Hub.

``eosfix serve`` runs as its own process (4 workers, policy ``pr``) against the stand-in Hub
(tests/support/hubserver.py, each request answered after ``--latency`` seconds). ``--webhooks``
POSTs are spread evenly over ``--seconds`` by 32 sender threads, over ``--repos`` repos (every
other one broken, missing ``<|im_end|>``), in the mix of the reliability pass (issue 36):

- 76 % valid pushes, each of a new commit (the first of a repo: its first commit): 202;
- 8 % with a wrong secret: 401; 10 % malformed (not JSON, not a payload, a repo id with
  ``..``, a commit id that is not 40 hex): 400;
- 5 % other events (a discussion, a dataset repo, a push to ``refs/pr/1``): 200;
- 1 % bodies over the bound (2 MB with the right secret): 413.

With ``--slow N``, N slow clients connect as the run starts (half send a request head that
never ends, half a head and a body that never ends, then a byte a second); with
``--reconnect`` each connects again whenever the bot closes it, all through the run (a flood
that keeps every connection slot busy). The figures then say how many connections they
opened, how many the bot closed, and how many were still open when the sending ended.

Then it waits for the queue to drain, stops the bot with SIGTERM and reopens its journal.
Figures: answers by kind and status, webhook latency (median, p99, max), the bot's memory
(resident, after start and after the drain, and its peak), how long the drain took, PRs per
broken repo and on healthy ones, the journal's lines and what it still holds pending. Exit
1 when a guarantee does not hold (a 5xx, an unexpected status, a broken repo without exactly
one PR, a PR on a healthy one, a push pending after the drain).

    python benchmarks/bench_serve_load.py                 # 2,000 webhooks, 60 s, 200 repos
    python benchmarks/bench_serve_load.py --webhooks 300 --seconds 10 --repos 30   # quick
    python benchmarks/bench_serve_load.py --rev 1169a9c   # the bot of another commit (baseline)

``--rev``: the bot runs from that commit's ``eosfix`` package (``git archive``), the stand-in
Hub and the senders from this tree, so two runs compare side by side.

Bounded: the sending takes ``--seconds``, the drain at most ``--drain-timeout``; the bot is
stopped (killed after 60 s) whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.paired import memory_mb, start_serve

SECRET = "bench-secret"
MIX = [("valid", 76), ("bad_secret", 8), ("malformed", 10), ("ignored", 5), ("too_large", 1)]
EXPECTED = {"valid": 202, "bad_secret": 401, "malformed": 400, "ignored": 200, "too_large": 413}


def _too_large(url: str) -> int:
    """POST a 2 MB body the way a streaming client does (the head and its first 64 kB, then
    the answer is read): the status of the answer, 0 for none."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST /webhook HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"X-Webhook-Secret: {SECRET}\r\nContent-Length: {2 * 1024 * 1024}\r\n\r\n"
    )
    try:
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(head.encode() + b"x" * 65536)
            answer = sock.recv(4096)
    except OSError:
        return 0
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _slow_clients(
    url: str, n: int, reconnect: bool, stop: threading.Event, counts: Counter[str]
) -> None:
    """``n`` slow clients (see the module) until ``stop``; ``counts``: opened, closed (by the
    bot), open (at the end)."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    heads = [
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ",
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Webhook-Secret: "
        + SECRET.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
    ]

    def connect(i: int) -> socket.socket | None:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(heads[i % 2])
            sock.setblocking(False)
        except OSError:
            return None
        counts["opened"] += 1
        return sock

    socks = [connect(i) for i in range(n)]
    while not stop.wait(1.0):
        for i, sock in enumerate(socks):
            alive = sock is not None
            if sock is not None:
                try:
                    alive = sock.recv(4096) != b""  # an answer (a 408?) is read, then EOF
                except BlockingIOError:
                    with contextlib.suppress(OSError):
                        sock.send(b"a")  # a byte a second
                except OSError:
                    alive = False
            if not alive:
                if sock is not None:
                    counts["closed"] += 1
                    sock.close()
                socks[i] = connect(i) if reconnect else None
    for sock in socks:
        if sock is None:
            continue
        try:
            counts["open"] += sock.recv(1) != b""
        except BlockingIOError:
            counts["open"] += 1
        except OSError:
            pass
        sock.close()


def _malformed(kind: int, payload: Any, repo_id: str) -> bytes:
    body = payload(repo_id, "c" * 40)
    if kind == 0:
        return b"not json {"
    if kind == 1:
        return json.dumps({"event": {}}).encode()
    if kind == 2:
        body["repo"]["name"] = f"{repo_id}/../../evil/x"
        return json.dumps(body).encode()
    body["repo"]["headSha"] = "HEAD"
    return json.dumps(body).encode()


def _ignored(kind: int, payload: Any, repo_id: str) -> bytes:
    if kind == 0:
        return json.dumps(payload(repo_id, "d" * 40, scope="discussion", action="create")).encode()
    if kind == 1:
        return json.dumps(payload(repo_id, "d" * 40, type="dataset")).encode()
    return json.dumps(payload(repo_id, "d" * 40, ref="refs/pr/1")).encode()


def main() -> int:  # one run, told top to bottom
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--webhooks", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repos", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05, help="stand-in Hub, s/request")
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--rev", help="run the bot of this git commit (default: this tree)")
    parser.add_argument("--slow", type=int, default=0, help="slow clients hanging on the bot")
    parser.add_argument("--reconnect", action="store_true", help="slow clients come back")
    args = parser.parse_args()

    import pytest

    from eosfix.serve.journal import JOURNAL, Journal
    from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
    from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
    from tests.support.hubrepos import repo_files
    from tests.support.hubserver import FakeHub, patch_huggingface_hub
    from tests.support.serve import eosfix_prs, payload
    from tests.support.service import free_port, http

    rng = random.Random(args.seed)
    kinds = [k for k, share in MIX for _ in range(round(args.webhooks * share / 100))]
    kinds = (kinds + ["valid"] * args.webhooks)[: args.webhooks]
    rng.shuffle(kinds)
    # (kind, repo, variant), drawn here: the senders run in threads
    plan = [(k, rng.randrange(args.repos), rng.randrange(4)) for k in kinds]
    results: list[tuple[str, int, float]] = []
    lock = threading.Lock()

    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        mp = pytest.MonkeyPatch()
        patch_huggingface_hub(mp, hub.url, Path(tmp) / "hf_home")
        hub.latency = args.latency
        broken, healthy = repo_files(BROKEN), repo_files(HEALTHY)
        repos = [
            hub.add_repo(f"load/m{i:03d}", broken if i % 2 == 0 else healthy)
            for i in range(args.repos)
        ]
        first_push = {r.repo_id: True for r in repos}
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        state = Path(tmp) / "state"
        code_root = ROOT
        if args.rev:
            code_root = Path(tmp) / "rev"
            code_root.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.rev, "eosfix"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(code_root)], input=archive, check=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(code_root),  # run from tmp: the working folder is not on the path
            "PYTHONDONTWRITEBYTECODE": "1",
            "EOSFIX_WEBHOOK_SECRET": SECRET,
            "HF_TOKEN": "hf_bench",
            "EOSFIX_POLICY": "pr",
            "EOSFIX_STATE_DIR": str(state),
        }
        log_path = Path(tmp) / "serve.log"
        proc = start_serve(env, port, Path(tmp), log_path)
        try:
            memory_start = memory_mb(proc.pid)

            def send(kind: str, index: int, variant: int) -> None:
                repo = repos[index]
                headers = {"Content-Type": "application/json", "X-Webhook-Secret": SECRET}
                if kind == "valid":
                    with lock:
                        first, first_push[repo.repo_id] = first_push[repo.repo_id], False
                    sha = (
                        repo.head
                        if first
                        else hub.push(repo.repo_id, {"README.md": kind + str(time.time())})
                    )
                    body = json.dumps(payload(repo.repo_id, sha)).encode()
                elif kind == "bad_secret":
                    headers["X-Webhook-Secret"] = "wrong"
                    body = json.dumps(payload(repo.repo_id, repo.head)).encode()
                elif kind == "malformed":
                    body = _malformed(variant, payload, repo.repo_id)
                elif kind == "ignored":
                    body = _ignored(variant % 3, payload, repo.repo_id)
                start = time.perf_counter()
                if kind == "too_large":
                    status = _too_large(url)
                else:
                    try:
                        status = http("POST", f"{url}/webhook", body, headers).status_code
                    except OSError:
                        status = 0  # no answer
                with lock:
                    results.append((kind, status, time.perf_counter() - start))

            slow_counts: Counter[str] = Counter()
            stop_slow = threading.Event()
            slow = threading.Thread(
                target=_slow_clients,
                args=(url, args.slow, args.reconnect, stop_slow, slow_counts),
                daemon=True,
            )
            if args.slow:
                slow.start()
            started = time.monotonic()
            with ThreadPoolExecutor(32) as pool:
                for i, (kind, index, variant) in enumerate(plan):
                    wait = started + i * args.seconds / len(plan) - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    pool.submit(send, kind, index, variant)
            sent = time.monotonic() - started
            stop_slow.set()
            if args.slow:
                slow.join(60)
            deadline = time.monotonic() + args.drain_timeout
            while True:
                health = http("GET", f"{url}/healthz").json()
                if health["queued"] == 0 and health["in_flight"] == 0:
                    break
                if time.monotonic() > deadline:
                    print(f"not drained after {args.drain_timeout:.0f} s: {health}")
                    break
                time.sleep(0.1)
            drained = time.monotonic() - started
            memory_end = memory_mb(proc.pid)
            metrics = http("GET", f"{url}/metrics").json()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        journal_lines = len((state / JOURNAL).read_text().splitlines())
        journal = Journal(state)
        pending = len(journal.pending)
        journal.close()
        prs = {r.repo_id: len(eosfix_prs(r)) for r in repos}
        log_lines = log_path.read_text().splitlines()
        json_lines = 0
        for line in log_lines:
            with contextlib.suppress(ValueError):
                json_lines += isinstance(json.loads(line), dict)
        mp.undo()

    statuses = Counter((kind, status) for kind, status, _ in results)

    def p99(times: list[float]) -> float:
        return sorted(times)[min(len(times) - 1, int(0.99 * len(times)))]

    latencies = sorted(t for _, _, t in results)
    valid = [t for kind, _, t in results if kind == "valid"]
    broken_prs = Counter(prs[r.repo_id] for i, r in enumerate(repos) if i % 2 == 0)
    healthy_prs = sum(prs[r.repo_id] for i, r in enumerate(repos) if i % 2 == 1)
    print(
        f"eosfix serve of {args.rev or 'this tree'}: {len(results)} webhooks in {sent:.1f} s over"
        f" {args.repos} repos (stand-in Hub {args.latency * 1000:.0f} ms/request, 4 workers)"
    )
    for (kind, status), n in sorted(statuses.items()):
        print(f"  {kind:<10} -> {status}: {n}")
    print(
        f"latency: median {statistics.median(latencies) * 1000:.0f} ms, p99 "
        f"{p99(latencies) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; valid pushes: p99 "
        f"{p99(valid) * 1000:.0f} ms"
    )
    print(
        f"bot memory: {memory_start['VmRSS']} MB after start, {memory_end['VmRSS']} MB after the"
        f" drain, peak {memory_end['VmHWM']} MB"
    )
    print(f"drained {drained:.1f} s after the first webhook; SIGTERM exit {code}")
    print(
        "PRs per broken repo: "
        + ", ".join(f"{n} PR: {count} repos" for n, count in sorted(broken_prs.items()))
        + f"; PRs on healthy repos: {healthy_prs}"
    )
    if args.slow:
        print(
            f"slow clients: {args.slow}{' reconnecting' if args.reconnect else ''},"
            f" {slow_counts['opened']} connections opened,"
            f" {slow_counts['closed']} closed by the bot, {slow_counts['open']} still open at"
            " the end of the sending"
        )
    print(f"journal: {journal_lines} lines, {pending} pending after reopening")
    print(f"log: {len(log_lines)} lines, {json_lines} of them JSON objects")
    outcomes = {k: v for k, v in metrics.items() if k.startswith("outcome_")}
    counts = ("redelivered", "retries", "crashed", "too_large", "timed_out", "connections_closed")
    print(json.dumps({**outcomes, **{k: metrics.get(k, 0) for k in counts}}))
    wrong = [(k, s, n) for (k, s), n in statuses.items() if s != EXPECTED[k]]
    ok = (
        not wrong
        and set(broken_prs) == {1}
        and healthy_prs == 0
        and pending == 0
        and code == 0
        and json_lines == len(log_lines)
    )
    if wrong:
        print(f"unexpected answers: {wrong}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
