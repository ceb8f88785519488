"""A restart never rolls a pull request back: ``eosfix serve`` as a real process against the
stand-in Hub, stopped with SIGTERM and started again.

Push A is in flight when B and C arrive; B waits and is replaced by C. After draining, the PR
carries C's fix (A, whose check ended after the branch had moved on, writes nothing). After a
restart nothing is handled again, and a push of a commit older than the one whose fix the PR
carries (delivered late) never writes to it."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import eosfix_prs, payload, pr_temperature, push_broken_commit
from tests.support.service import (
    free_port,
    http,
    one_worker_env,
    post,
    serve_process,
    wait_healthy,
)

TOKEN = "hf_restart_token_4f1c9e"  # a token the bot must write nowhere


def _drained(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        health = http("GET", f"{url}/healthz").json()
        if health["queued"] == 0 and health["in_flight"] == 0:
            return
        assert time.monotonic() < deadline, health
        time.sleep(0.05)


def test_a_restart_never_rolls_the_pr_back(fake_hub, tmp_path):
    repo = fake_hub.add_repo("org/race", repo_files(BROKEN))
    a = repo.head
    fake_hub.latency = 0.2
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = one_worker_env(tmp_path / "state", TOKEN)
    log = tmp_path / "serve.log"
    proc = serve_process(env, port, log)
    try:
        wait_healthy(url, proc)
        hold = fake_hub.hold(r"^/api/models/org/race/")
        assert post(url, payload("org/race", a)).status_code == 202
        assert hold.arrived.wait(60)  # A is in flight
        b = push_broken_commit(fake_hub, "org/race", 0.2)
        late = push_broken_commit(fake_hub, "org/race", 0.25)  # its webhook comes after the restart
        c = push_broken_commit(fake_hub, "org/race", 0.3)
        assert post(url, payload("org/race", b)).status_code == 202
        assert post(url, payload("org/race", c)).status_code == 202
        hold.release()
        _drained(url)
        (pr,) = eosfix_prs(repo)
        assert pr_temperature(repo, pr.num) == 0.3  # C's fix
        # A's check ended after the branch had moved on to C: A wrote nothing, B never ran
        (opened,) = writes = list(fake_hub.commits_received)
        assert opened["create_pr"]
        assert opened["parent_commit"] == c
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0

        proc = serve_process(env, port, log)
        wait_healthy(url, proc)
        _drained(url)
        assert post(url, payload("org/race", late)).status_code == 202  # older than C
        _drained(url)
        metrics = http("GET", f"{url}/metrics").json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert eosfix_prs(repo) == [pr]
    assert pr_temperature(repo, pr.num) == 0.3  # still C's fix
    assert fake_hub.commits_received == writes  # nothing written after the restart
    assert metrics.get("outcome_superseded") == 1  # the late push: main had moved on
    lines = log.read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # the log is JSON, one event a line
    for path in [log, *(tmp_path / "state").rglob("*")]:  # the token is in no log or journal
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path


def test_a_fully_drained_run_leaves_nothing_pending(fake_hub, tmp_path):
    """Many pushes over few repos, one worker, with newer pushes replacing waiting ones:
    after draining and SIGTERM, the journal holds no pending push."""
    from eosfix.serve.journal import Journal

    repos = [fake_hub.add_repo(f"org/d{i}", repo_files(BROKEN)) for i in range(4)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = one_worker_env(tmp_path / "state")
    proc = serve_process(env, port, tmp_path / "serve.log")
    try:
        wait_healthy(url, proc)
        for n in range(40):
            repo = repos[n % 4]
            sha = push_broken_commit(fake_hub, repo.repo_id, 0.01 * (n + 1))
            assert post(url, payload(repo.repo_id, sha)).status_code == 202
        _drained(url)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    journal = Journal(Path(tmp_path / "state"))
    assert journal.pending == {}
    journal.close()
    for i, repo in enumerate(repos):
        (pr,) = eosfix_prs(repo)
        assert pr_temperature(repo, pr.num) == pytest.approx(0.01 * (36 + i + 1))
