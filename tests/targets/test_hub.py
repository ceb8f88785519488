"""The one check of a Hub repo: ``eosfix check``, ``eosfix hub``, the ``serve`` bot and
``render`` say the same of the same repo (against the stand-in Hub)."""

from __future__ import annotations

import json

import pytest

from eosfix.cli import main
from eosfix.serve.bot import Bot
from eosfix.serve.config import ServeConfig
from eosfix.serve.journal import Journal, Push
from eosfix.targets.hub import check_hub_repo
from eosfix.targets.session import HubSession
from tests.support.cachebuilder import chatml_files

TOKENIZER_ONLY = "org/tokenizer"
NO_GEN = "org/nogen"
BAD_JSON = "org/badjson"
GATED = "org/gated"
MISSING = "org/missing"


@pytest.fixture
def hub(fake_hub, tmp_path, monkeypatch):
    files = chatml_files(1000)
    fake_hub.add_repo(
        TOKENIZER_ONLY,
        {k: v for k, v in files.items() if k in ("tokenizer_config.json", "chat_template.jinja")},
    )
    fake_hub.add_repo(NO_GEN, {k: v for k, v in files.items() if k != "generation_config.json"})
    # a tokenizer_config.json cut short: every runtime refuses it (a generation_config.json
    # cut short is read past, as runtimes do)
    fake_hub.add_repo(BAD_JSON, {**files, "tokenizer_config.json": '{"added_tokens_decoder": {\n'})
    fake_hub.heads = {GATED: fake_hub.add_repo(GATED, files, gated=True).head}
    monkeypatch.chdir(tmp_path)  # no local folder named like the repos
    return fake_hub


def _check(run_eosfix, repo_id: str) -> dict:
    result = run_eosfix("check", "--format", "json", repo_id)
    (entry,) = json.loads(result.stdout)["repos"]
    return entry


def _hub(run_eosfix, repo_id: str) -> dict:
    result = run_eosfix("hub", "--format", "json", repo_id)
    (entry,) = json.loads(result.stdout)["repos"]
    return entry


def _serve(tmp_path, repo_id: str, sha: str | None):
    config = ServeConfig(secret="s", policy="pr", dry_run=True, state_dir=tmp_path / "state")
    journal = Journal(tmp_path / "state")
    try:
        bot = Bot(config, journal, session=HubSession(), sleep=lambda s: None)
        return bot.handle(Push("1", repo_id, sha or "0" * 40))
    finally:
        journal.close()


def test_a_tokenizer_only_repo_is_not_a_model_for_check_hub_and_serve(hub, run_eosfix, tmp_path):
    checked, audited = _check(run_eosfix, TOKENIZER_ONLY), _hub(run_eosfix, TOKENIZER_ONLY)
    assert checked["verdict"] == audited["verdict"] == "not_a_model"
    assert checked["proposed_eos_token_id"] is audited["proposed_eos_token_id"] is None
    assert checked["findings"] == audited["findings"] == []
    assert not any(r["applicable"] for r in checked["runtimes"])
    text = run_eosfix("check", TOKENIZER_ONLY)
    assert text.exit_code == 0
    assert "not a model repo" in text.stdout
    assert "--pr" not in text.stdout  # no pull request advised
    assert _serve(tmp_path, TOKENIZER_ONLY, checked["sha"]).outcome == "checked"
    assert not hub.commits_received


def test_a_repo_without_generation_config_is_fixable_everywhere(hub, run_eosfix, tmp_path):
    checked, audited = _check(run_eosfix, NO_GEN), _hub(run_eosfix, NO_GEN)
    assert checked["verdict"] == audited["verdict"] == "fixable"
    assert checked["proposed_eos_token_id"] == audited["proposed_eos_token_id"]
    assert [f["code"] for f in checked["findings"]] == [f["code"] for f in audited["findings"]]
    assert _serve(tmp_path, NO_GEN, checked["sha"]).outcome == "would_open_pr"


def test_an_invalid_file_is_named_by_repo_id_and_file_everywhere(hub, run_eosfix, tmp_path, capsys):
    checked, audited = _check(run_eosfix, BAD_JSON), _hub(run_eosfix, BAD_JSON)
    assert checked["error"] == audited["error"]
    assert checked["error"].startswith(f"{BAD_JSON}/tokenizer_config.json: ")
    assert "eosfix" not in checked["error"].split(":")[0]  # never eosfix's store
    assert (checked["repo_id"], checked["revision"]) == (BAD_JSON, "main")
    assert checked["sha"] == audited["sha"]
    assert len(checked["sha"]) == 40
    served = _serve(tmp_path, BAD_JSON, checked["sha"])
    assert (served.outcome, served.error) == ("error", checked["error"])
    text = run_eosfix("check", BAD_JSON)
    assert text.stderr == f"error: {checked['error']}\n"
    capsys.readouterr()
    for args in (["render"], ["goldens"], ["diagnose", "--ids", "1"]):  # the port kit too
        assert main([*args, BAD_JSON]) == 2
        assert capsys.readouterr().err == f"error: {checked['error']}\n", args


@pytest.mark.parametrize("repo_id", [GATED, MISSING])
def test_a_repo_the_hub_refuses_is_one_error_everywhere(hub, run_eosfix, tmp_path, repo_id):
    checked, audited = _check(run_eosfix, f"hf://{repo_id}"), _hub(run_eosfix, repo_id)
    # org/name where a path goes, naming no local path either: a mistyped path looks the
    # same, so check says that too
    plain = _check(run_eosfix, repo_id)["error"]
    said = audited["error"]  # what the Hub said; each command names the repo as it was typed
    assert plain == f"{repo_id}: {said}; no local folder or file {repo_id} exists either"
    assert checked["verdict"] == audited["verdict"] == "error"
    assert checked["error"] == f"hf://{repo_id}: {said}"
    assert (checked["repo_id"], checked["revision"], checked["sha"]) == (repo_id, "main", None)
    served = _serve(tmp_path, repo_id, hub.heads.get(repo_id))  # the pushed commit
    assert (served.outcome, served.error) == ("error", said)
    direct = check_hub_repo(repo_id)
    assert str(direct.error) == f"{repo_id}: {said}"
