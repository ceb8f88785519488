"""What ``/healthz`` and ``/metrics`` say is true: every push not yet handled is queued (the
ones waiting for a worker too), a redelivered push counts once, and a push replaced by a
newer one while it waited is counted and recorded as superseded."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import eosfix_prs, payload
from tests.support.service import Service, http


def _health(s: Service) -> dict:
    return http("GET", f"{s.url}/healthz").json()


def test_pushes_waiting_for_a_worker_are_queued(fake_hub, one_worker):
    repos = [fake_hub.add_repo(f"org/r{i}", repo_files(BROKEN)) for i in range(5)]
    hold = fake_hub.hold(r"^/api/models/org/r0/")
    try:
        for repo in repos:
            assert one_worker.post(payload(repo.repo_id, repo.head)).status_code == 202
        assert hold.arrived.wait(60)
        assert _health(one_worker) == {"ok": True, "queued": 4, "in_flight": 1}
    finally:
        hold.release()
    metrics = one_worker.drained()
    assert _health(one_worker) == {"ok": True, "queued": 0, "in_flight": 0}
    assert metrics["outcome_pr_opened"] == 5


def test_a_redelivered_push_counts_once(fake_hub, one_worker):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    other = fake_hub.add_repo("org/other", repo_files(BROKEN))
    hold = fake_hub.hold(r"^/api/models/org/other/")
    try:
        one_worker.post(payload("org/other", other.head))  # keeps the one worker busy
        assert hold.arrived.wait(60)
        for _ in range(3):  # the Hub delivers the same push three times while it waits
            assert one_worker.post(payload("org/broken", repo.head)).status_code == 202
    finally:
        hold.release()
    metrics = one_worker.drained()
    assert metrics["outcome_pr_opened"] == 2
    assert metrics["redelivered"] == 2  # the two copies of the push already queued
    assert metrics.get("outcome_superseded", 0) == 0
    assert metrics["checks"] == 2
    again = one_worker.post(payload("org/broken", repo.head))  # once more, after it was handled
    assert again.status_code == 200
    assert again.json() == {
        "status": "ignored",
        "reason": f"org/broken at {repo.head} was handled already (pr_opened)",
    }
    metrics = one_worker.drained()
    assert metrics["outcome_pr_opened"] == 2  # not counted again
    assert metrics["redelivered"] == 3
    assert metrics["checks"] == 2
    assert len(eosfix_prs(repo)) == 1
    assert not one_worker.bot.journal.pending


def test_a_superseded_push_is_recorded_done(fake_hub, one_worker):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    other = fake_hub.add_repo("org/other", repo_files(BROKEN))
    hold = fake_hub.hold(r"^/api/models/org/other/")
    try:
        one_worker.post(payload("org/other", other.head))
        assert hold.arrived.wait(60)
        sha1 = repo.head
        one_worker.post(payload("org/broken", sha1))
        sha2 = fake_hub.push("org/broken", {"README.md": "two"})
        one_worker.post(payload("org/broken", sha2))
    finally:
        hold.release()
    metrics = one_worker.drained()
    journal = one_worker.bot.journal
    assert journal.last_outcome("org/broken", sha1).outcome == "superseded"
    assert metrics["outcome_superseded"] == 1
    assert journal.last_outcome("org/broken", sha2).outcome == "pr_opened"
