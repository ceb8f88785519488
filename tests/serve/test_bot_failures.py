"""Pushes the bot cannot handle: what is tried again (5xx, 429, no answer) and what is not (a
repo that does not exist, a file eosfix cannot read, a bug), and how each failure is counted,
recorded and logged."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from eosfix.serve.config import ServeConfig
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.longints import long_member
from tests.support.serve import eosfix_prs, payload
from tests.support.service import Service, bot_config


@pytest.fixture
def config(tmp_path) -> ServeConfig:
    return bot_config(tmp_path, attempts=5)


def _outcome_lines(caplog, repo: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "eosfix.serve" and getattr(r, "fields", {}).get("repo") == repo
    ]


@pytest.mark.parametrize("where", ["check", "pull request"])
def test_a_repo_that_does_not_exist_is_not_tried_again(fake_hub, config, caplog, where):
    """A 404, when the repo is read or when its pull request is opened (the repo went away
    in between): one try, one failed outcome, logged as a warning."""
    caplog.set_level(logging.INFO, logger="eosfix.serve")
    sha = "a" * 40
    if where == "pull request":
        sha = fake_hub.add_repo("org/missing", repo_files(BROKEN)).head
        fake_hub.fail("org/missing", 404, match="/commit/")
    with Service(config) as s:
        assert s.post(payload("org/missing", sha)).status_code == 202
        metrics = s.drained()
    assert metrics.get("retries", 0) == 0
    assert metrics["outcome_error"] == 1
    match = "/revision/" if where == "check" else "/commit/"
    asked = [r for r in fake_hub.request_log if r.repo_id == "org/missing" and match in r.path]
    assert len(asked) == 1, [r.path for r in asked]
    (line,) = _outcome_lines(caplog, "org/missing")
    assert line.levelno == logging.WARNING  # a failed outcome is above info
    assert "not found" in line.fields["error"]
    outcome = s.bot.journal.last_outcome("org/missing", sha)
    assert outcome is not None
    assert outcome.outcome == "error"


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_hub_is_tried_again(fake_hub, config, status):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    headers = {"Retry-After": "0"} if status == 429 else None
    fake_hub.fail("org/broken", status, times=2, match="/revision/", headers=headers)
    with Service(config) as s:
        s.post(payload("org/broken", repo.head))
        metrics = s.drained()
    assert metrics.get("outcome_pr_opened") == 1
    assert metrics.get("outcome_error", 0) == 0
    assert len(eosfix_prs(repo)) == 1


def test_a_file_python_cannot_read_fails_that_push_and_the_bot_goes_on(fake_hub, config, caplog):
    """A JSON number of 5,000 digits: that push is one failed outcome, counted, recorded in
    the journal and logged as a warning; the next push of the same repo and other repos are
    handled by the same worker."""
    caplog.set_level(logging.INFO, logger="eosfix.serve")
    bad = repo_files(BROKEN)
    bad["config.json"] = long_member(bad["config.json"])
    repo = fake_hub.add_repo("org/long", bad)
    other = fake_hub.add_repo("org/other", repo_files(BROKEN))
    config = ServeConfig(**{**config.__dict__, "workers": 1})
    with Service(config) as s:
        s.post(payload("org/long", repo.head))
        s.post(payload("org/other", other.head))
        metrics = s.drained()
        assert metrics["outcome_error"] == 1
        assert metrics["errors"] == 1
        assert metrics["outcome_pr_opened"] == 1
        (line,) = _outcome_lines(caplog, "org/long")
        assert line.levelno == logging.WARNING
        assert "5000 digits" in line.fields["error"]
        assert s.bot.journal.last_outcome("org/long", repo.head).outcome == "error"
        assert not s.bot.journal.pending
        fixed = fake_hub.push("org/long", {"config.json": repo_files(BROKEN)["config.json"]})
        s.post(payload("org/long", fixed))
        metrics = s.drained()
    assert metrics["outcome_pr_opened"] == 2  # the worker lives on
    assert len(eosfix_prs(repo)) == 1


def test_a_crash_is_counted_recorded_and_logged_on_one_line(fake_hub, config, caplog):
    """A bug in handling one push (here: the check raises): that push is a failed outcome,
    ``crashed`` counts it, its traceback is inside one log record, and the bot goes on."""
    caplog.set_level(logging.INFO, logger="eosfix.serve")
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    with Service(config) as s:
        real = s.bot.session.check
        calls = []

        def check(repo_id, revision=None):
            calls.append(repo_id)
            if len(calls) == 1:
                raise RuntimeError("a bug\nover two lines")
            return real(repo_id, revision=revision)

        s.bot.session.check = check
        s.post(payload("org/broken", repo.head))
        metrics = s.drained()
        assert metrics["crashed"] == 1
        assert metrics["outcome_error"] == 1
        assert s.bot.journal.last_outcome("org/broken", repo.head).outcome == "error"
        sha2 = fake_hub.push("org/broken", {"README.md": "again"})
        s.post(payload("org/broken", sha2))
        metrics = s.drained()
    assert metrics["outcome_pr_opened"] == 1
    (crash,) = [r for r in caplog.records if r.exc_info and r.name == "eosfix.serve"]
    assert crash.levelno == logging.ERROR
    from eosfix.serve.logs import JsonFormatter

    line = JsonFormatter().format(crash)
    assert "\n" not in line
    assert "RuntimeError: a bug" in json.loads(line)["exception"]
