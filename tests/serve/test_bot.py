"""The Hub bot, end to end on 127.0.0.1: the stand-in Hub serves repos, the bot runs as a real
web service (uvicorn), and the test POSTs webhook payloads shaped as the Hub sends them
(https://huggingface.co/docs/hub/webhooks; huggingface_hub's ``WebhookPayload``).

Every wait is for an event (the bot's queue drained, a line printed), bounded by a generous
timeout, never a fixed window."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from eosfix.serve.config import ServeConfig, ServeConfigError, load_config
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
from tests.support.hubrepos import repo_files
from tests.support.serve import SECRET, eosfix_prs, payload
from tests.support.service import (
    Service,
    bot_config,
    free_port,
    http,
    one_worker_env,
    post,
    serve_process,
    wait_healthy,
)


@pytest.fixture
def config(tmp_path: Path) -> ServeConfig:
    return bot_config(tmp_path)


@pytest.fixture
def service(fake_hub, config) -> Iterator[Service]:
    with Service(config) as s:
        yield s


def test_a_broken_push_gets_one_pr_with_the_fix_at_the_pushed_revision(fake_hub, service):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    sha = repo.head
    response = service.post(payload("org/broken", sha))
    assert response.status_code == 202
    assert response.json() == {"status": "queued", "repo": "org/broken", "sha": sha}
    metrics = service.drained()
    (pr,) = eosfix_prs(repo)
    fixed = json.loads(repo.pr_files(pr.num)["generation_config.json"])
    assert fixed["eos_token_id"] == [248044, 248046]
    (commit,) = [c for c in fake_hub.commits_received if c["repo_id"] == "org/broken"]
    assert commit["parent_commit"] == sha  # planned on the pushed commit
    assert metrics["outcome_pr_opened"] == 1
    assert metrics["checks"] == 1


def test_a_pushed_gguf_repo_is_checked_by_its_headers(gguf_org, service):
    """A push to a repo of GGUF files is checked as `eosfix check` checks it, by the files'
    headers (a range request each, no tokenizer file: the repo has none): its stop list cuts
    replies at <|think_end|> and misses <|turn_end|>, and the pull request is the one
    `eosfix hub --pr` opens, its params file."""
    from tests.support.hubserver import GGUF_ORG

    repo_id = f"{GGUF_ORG}/Reasoner-GGUF"
    repo = gguf_org.repos[repo_id]
    assert service.post(payload(repo_id, repo.head)).status_code == 202
    metrics = service.drained()
    assert metrics["outcome_pr_opened"] == 1
    (pr,) = eosfix_prs(repo)
    assert json.loads(repo.pr_files(pr.num)["params"])["stop"] == ["<|turn_end|>"]
    headers = [r for r in gguf_org.cdn_requests if "range" in r.headers]
    assert {r.path.rpartition("/")[2] for r in headers} >= {"Reasoner-Q4_K_M.gguf"}


def test_a_healthy_push_gets_none(fake_hub, service):
    repo = fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    assert service.post(payload("org/healthy", repo.head)).status_code == 202
    metrics = service.drained()
    assert not repo.discussions
    assert metrics["outcome_checked"] == 1


def test_a_second_push_updates_the_open_pr(fake_hub, service):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    service.post(payload("org/broken", repo.head))
    service.drained()
    gen = json.loads(repo_files(BROKEN)["generation_config.json"])
    assert gen["temperature"] != 0.55
    gen["temperature"] = 0.55  # an unrelated edit upstream, still missing <|im_end|>
    sha2 = fake_hub.push("org/broken", {"generation_config.json": json.dumps(gen, indent=2) + "\n"})
    service.post(payload("org/broken", sha2))
    metrics = service.drained()
    (pr,) = eosfix_prs(repo)  # never a second PR
    fixed = json.loads(repo.pr_files(pr.num)["generation_config.json"])
    assert fixed["eos_token_id"] == [248044, 248046]
    assert fixed["temperature"] == 0.55  # brought up to date with the new commit
    assert metrics["outcome_pr_opened"] == 1
    assert metrics["outcome_pr_updated"] == 1


@pytest.mark.parametrize("fake_hub", [{"token": "hf_test"}], indirect=True)
def test_someone_elses_open_eosfix_pr_is_left_not_pushed_onto(fake_hub, service):
    """The token's user did not open the eosfix PR: the bot leaves it (``pr_left``, the reason
    in the log) and never opens a second one."""
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    service.post(payload("org/broken", repo.head))
    service.drained()
    (pr,) = eosfix_prs(repo)
    pr.author = "someone-else"
    sha2 = fake_hub.push("org/broken", {"generation_config.json": b'{"eos_token_id": 3}\n'})
    service.post(payload("org/broken", sha2))
    metrics = service.drained()
    assert eosfix_prs(repo) == [pr]
    assert len(fake_hub.commits_received) == 1  # the opening commit only
    assert metrics["outcome_pr_left"] == 1
    outcome = service.bot.journal.handled("org/broken", sha2)
    assert outcome is not None
    assert outcome.outcome == "pr_left"


def test_eosfix_own_pr_branch_push_triggers_nothing(fake_hub, service):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    response = service.post(payload("org/broken", "a" * 40, ref="refs/pr/1"))
    assert response.status_code == 200
    assert response.json()["status"] == "ignored"
    assert "refs/pr/1" in response.json()["reason"]
    metrics = service.drained()
    assert metrics.get("checks", 0) == 0
    assert not repo.discussions


@pytest.mark.parametrize("secret", [None, "", "wrong", SECRET + "x"])
def test_a_bad_secret_is_401_and_no_work(fake_hub, service, secret):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    response = service.post(payload("org/broken", repo.head), secret=secret)
    assert response.status_code == 401
    assert response.json() == {"error": "missing or wrong X-Webhook-Secret"}
    metrics = service.drained()
    assert metrics.get("accepted", 0) == 0
    assert not (service.bot.journal.path.read_text().strip())  # nothing queued, nothing kept


@pytest.mark.parametrize(
    ("body", "where"),
    [(b"not json", "body"), (json.dumps({"event": {}}).encode(), "event.action")],
)
def test_a_bad_payload_is_400_with_one_line(service, body, where):
    response = service.post(body)
    assert response.status_code == 400
    message = response.json()["error"]
    assert message.startswith("not a Hub webhook payload")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"scope": "discussion", "action": "create"}, "not a push"),
        ({"type": "dataset"}, "not a model"),
    ],
)
def test_other_events_are_acknowledged_and_ignored(fake_hub, service, event, why):
    response = service.post(payload("org/x", "b" * 40, **event))
    assert response.status_code == 200
    assert why in response.json()["reason"]


def test_unwatched_repos_are_ignored(fake_hub, tmp_path):
    config = ServeConfig(secret=SECRET, authors=frozenset({"team"}), state_dir=tmp_path / "s")
    with Service(config) as s:
        assert s.post(payload("org/x", "c" * 40)).json()["reason"] == "org/x is not watched"
        assert s.post(payload("team/x", "c" * 40)).status_code == 202


def test_report_policy_comments_once_per_repo(fake_hub, tmp_path):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    config = ServeConfig(
        secret=SECRET, token="hf_test", policy="report", comment=True, state_dir=tmp_path / "s"
    )
    with Service(config) as s:
        s.post(payload("org/broken", repo.head))
        s.drained()
        sha2 = fake_hub.push("org/broken", {"README.md": "hi"})
        s.post(payload("org/broken", sha2))
        metrics = s.drained()
    (discussion,) = repo.discussions
    assert not discussion.is_pull_request
    assert metrics["comments"] == 2  # one discussion, commented on again
    assert metrics["outcome_reported"] == 2


def test_dry_run_writes_nothing(fake_hub, tmp_path):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    config = ServeConfig(secret=SECRET, policy="pr", dry_run=True, state_dir=tmp_path / "s")
    with Service(config) as s:
        s.post(payload("org/broken", repo.head))
        metrics = s.drained()
    assert metrics["outcome_would_open_pr"] == 1
    assert not repo.discussions
    assert not fake_hub.commits_received


def test_health_and_metrics(service):
    health = http("GET", f"{service.url}/healthz").json()
    assert health == {"ok": True, "queued": 0, "in_flight": 0}
    service.post(payload("org/x", "d" * 40, type="space"))
    metrics = http("GET", f"{service.url}/metrics").json()
    assert metrics["events"] == 1
    assert metrics["ignored"] == 1
    assert metrics["policy"] == "pr"


def test_100_pushes_across_20_repos_through_429s_and_500s(fake_hub, config):
    """Every repo ends in the right state (a PR for the broken ones, none for the healthy
    ones), and no repo gets a second PR, while the stand-in Hub fails at random: 40 failures
    over the 20 repos, fewer for any one repo than a push's attempts (which request meets
    which failure is up to the workers' timing; spread over every repo, as before, a push
    could meet all five of its attempts' failures on a loaded machine)."""
    rng = random.Random(7)
    repos = {}
    for i in range(20):
        sample = BROKEN if i % 2 == 0 else HEALTHY
        repos[f"org/m{i}"] = (sample, fake_hub.add_repo(f"org/m{i}", repo_files(sample)))
    failures: Counter[str] = Counter()
    for i, status in enumerate(rng.choice([429, 500, 502, 503]) for _ in range(40)):
        repo_id = rng.choice([r for r in repos if failures[r] < config.attempts - 1])
        failures[repo_id] += 1
        headers = {"Retry-After": "0"} if status == 429 else None
        route = ("/resolve/", "/api/")[i % 2]
        fake_hub.fail(repo_id, status, times=1, match=route, headers=headers)
    with Service(config) as s:
        for n in range(100):
            repo_id = f"org/m{rng.randrange(20)}"
            repo = repos[repo_id][1]
            sha = fake_hub.push(repo_id, {"README.md": f"push {n}"}) if n % 3 else repo.head
            assert s.post(payload(repo_id, sha)).status_code in (200, 202)  # 200: handled already
        metrics = s.drained(timeout=300)
    assert metrics.get("outcome_error", 0) == 0, metrics
    failed = {r.repo_id for r in fake_hub.request_log if r.status in (429, 500, 502, 503)}
    assert failed <= set(failures)  # only the failures injected, each for its repo
    assert len(failed) >= len(failures) // 2, failed  # and met: the bot got through them
    for repo_id, (sample, repo) in repos.items():
        prs = eosfix_prs(repo)
        pushed = any(r.path.startswith(f"/api/models/{repo_id}") for r in fake_hub.request_log)
        if sample == BROKEN and pushed:
            assert len(prs) == 1, repo_id
        else:
            assert not prs, repo_id


def test_kill_9_mid_queue_loses_nothing(fake_hub, tmp_path):
    """Pushes accepted (202) survive a ``kill -9`` of the service: after a restart every
    broken repo has its one PR."""
    fake_hub.latency = 0.2  # a far-away Hub: the queue is still full when the kill comes
    names = [f"org/k{i}" for i in range(3)]
    repos = {n: fake_hub.add_repo(n, repo_files(BROKEN)) for n in names}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = one_worker_env(tmp_path / "state")
    log = tmp_path / "serve.log"
    proc = serve_process(env, port, log)
    try:
        wait_healthy(url, proc)
        for name in names:
            assert post(url, payload(name, repos[name].head)).status_code == 202
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert sum(len(eosfix_prs(r)) for r in repos.values()) < len(names)  # work was left
        proc = serve_process(env, port, log)
        wait_healthy(url, proc)
        deadline = time.monotonic() + 240
        while not all(eosfix_prs(r) for r in repos.values()):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert all(len(eosfix_prs(r)) == 1 for r in repos.values())
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("outcome") == "pr_opened" for line in lines)  # JSON logs


def test_sigterm_finishes_or_keeps_the_work_in_flight(fake_hub, tmp_path):
    """SIGTERM: the service exits 0 within its grace, and what it had not handled is still in
    the journal for the next start."""
    fake_hub.latency = 0.2
    names = [f"org/t{i}" for i in range(4)]
    repos = {n: fake_hub.add_repo(n, repo_files(BROKEN)) for n in names}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    state = tmp_path / "state"
    env = one_worker_env(state, EOSFIX_GRACE="30")
    proc = serve_process(env, port, tmp_path / "serve.log")
    wait_healthy(url, proc)
    for name in names:
        assert post(url, payload(name, repos[name].head)).status_code == 202
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(90) == 0
    from eosfix.serve.journal import Journal

    journal = Journal(state)
    handled = {n for n in names if eosfix_prs(repos[n])}
    assert set(journal.pending) == set(names) - handled  # the rest waits for the next start
    journal.close()


def test_config_from_file_and_environment(tmp_path):
    path = tmp_path / "serve.toml"
    path.write_text('[eosfix.serve]\nsecret = "file"\npolicy = "report"\nauthors = ["a", "b"]\n')
    config = load_config(path, env={"EOSFIX_POLICY": "pr", "HF_TOKEN": "t", "EOSFIX_WORKERS": "2"})
    assert config.secret == "file"
    assert config.policy == "pr"  # the environment wins
    assert config.authors == {"a", "b"}
    assert config.workers == 2
    with pytest.raises(ServeConfigError, match="no webhook secret"):
        load_config(env={})
    with pytest.raises(ServeConfigError, match="EOSFIX_POLICY: expected one of report, pr"):
        load_config(env={"EOSFIX_WEBHOOK_SECRET": "x", "EOSFIX_POLICY": "merge"})
    with pytest.raises(ServeConfigError, match="policy 'pr' needs HF_TOKEN"):
        load_config(env={"EOSFIX_WEBHOOK_SECRET": "x", "EOSFIX_POLICY": "pr"})
    path.write_text("secret = 'x'\nbogus = 1\n")
    with pytest.raises(ServeConfigError, match="unknown setting 'bogus'"):
        load_config(path, env={})
