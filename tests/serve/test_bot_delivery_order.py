"""The newest commit wins whatever order the Hub delivers webhooks in: a push is handled by
checking its branch's head at that moment, so a webhook delivered late, out of order, or naming
a commit the Hub does not know never leaves the newest commit without its pull request."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import eosfix_prs, payload, pr_temperature, push_broken_commit


def test_the_newest_commit_gets_its_pr_when_webhooks_come_out_of_order(fake_hub, one_worker):
    """c0 is being checked (its files held) when c1 and then c2 are committed, and c2's
    webhook comes before c1's: c0 cannot write (the branch moved on), and the push left waiting
    checks the head, c2, whatever commit it named."""
    repo = fake_hub.add_repo("org/order", repo_files(BROKEN))
    c0 = repo.head
    hold = fake_hub.hold(r"^/org/order/resolve/")
    try:
        assert one_worker.post(payload("org/order", c0)).status_code == 202
        assert hold.arrived.wait(60)  # c0's check is reading c0's files
        c1 = push_broken_commit(fake_hub, "org/order", 0.1)
        c2 = push_broken_commit(fake_hub, "org/order", 0.2)
        assert one_worker.post(payload("org/order", c2)).status_code == 202
        assert one_worker.post(payload("org/order", c1)).status_code == 202
    finally:
        hold.release()
    metrics = one_worker.drained()
    (pr,) = eosfix_prs(repo)
    assert pr_temperature(repo, pr.num) == 0.2  # c2's fix
    (opened,) = fake_hub.commits_received
    assert opened["parent_commit"] == c2
    journal = one_worker.bot.journal
    assert journal.last_outcome("org/order", c0).outcome == "superseded"
    assert journal.last_outcome("org/order", c2).outcome == "pr_opened"
    assert metrics["outcome_pr_opened"] == 1
    late = one_worker.post(payload("org/order", c2))  # c2's webhook once more: handled
    assert late.status_code == 200
    assert "handled already (pr_opened)" in late.json()["reason"]


def test_pushes_naming_unknown_commits_do_not_displace_the_real_one(fake_hub, one_worker):
    """31 pushes to one repo: 30 name commits the Hub does not know, one the real head. The
    first is in flight when the real one and 29 more arrive at once; the one PR is the real
    head's, and no push fails for naming an unknown commit."""
    repo = fake_hub.add_repo("org/many", repo_files(BROKEN))
    unknown = [hashlib.sha1(f"unknown {i}".encode()).hexdigest() for i in range(30)]
    hold = fake_hub.hold(r"^/api/models/org/many/")
    try:
        assert one_worker.post(payload("org/many", unknown[0])).status_code == 202
        assert hold.arrived.wait(60)  # the first push is being handled
        assert one_worker.post(payload("org/many", repo.head)).status_code == 202
        with ThreadPoolExecutor(8) as pool:
            sent = pool.map(lambda sha: one_worker.post(payload("org/many", sha)), unknown[1:])
            assert [r.status_code for r in sent] == [202] * 29
    finally:
        hold.release()
    metrics = one_worker.drained()
    (pr,) = eosfix_prs(repo)
    fixed = json.loads(repo.pr_files(pr.num)["generation_config.json"])
    assert fixed["eos_token_id"] == [248044, 248046]
    (opened,) = fake_hub.commits_received
    assert opened["parent_commit"] == repo.head
    assert metrics.get("outcome_error", 0) == 0, metrics
    assert metrics["outcome_pr_opened"] == 1
    assert metrics["outcome_superseded"] == 30
    assert not one_worker.bot.journal.pending
