"""`eosfix hub`: check Hub repos by id, open fix PRs, scan an organisation (against FakeHub)."""

from __future__ import annotations

import json
import logging
import re

import pytest

from eosfix.render.pr import pr_description
from eosfix.sources.hub.read import is_relevant
from eosfix.sources.hub.write import PR_TITLE_PREFIX, PrOutcome
from eosfix.targets.session import HubSession
from tests.conftest import SAMPLES
from tests.support.hubrepos import (
    BROKEN_REPO as BROKEN,
)
from tests.support.hubrepos import (
    CHATML_TOKENS,
    fixed_gen,
    sample_files,
    tokenizer_json,
)
from tests.support.hubrepos import (
    HEALTHY_REPO as HEALTHY,
)

FIXABLE_SAMPLES = [
    "chatml-missing-im-end", "foreign-stop-ids", "ordinary-stop-id", "stop-inside-turn",
    "vlm-text-config-eos", "glm-next-turn-opener", "reasoning-channel",
]  # fmt: skip
TOKEN = "hf_fake_secret_token_1234567890"


def test_relevant_files_exclude_weights_and_tokenizer_json():
    assert is_relevant("generation_config.json")
    assert is_relevant("additional_chat_templates/tool_use.jinja")
    assert not is_relevant("model.safetensors")
    assert not is_relevant("tokenizer.json")
    assert not is_relevant("sub/config.json")


def test_check_by_id_reports_like_check_and_downloads_no_weights(hub_repos, run_eosfix):
    hub_repos.repos[BROKEN].files["tokenizer.json"] = tokenizer_json(CHATML_TOKENS)
    result = run_eosfix("hub", BROKEN)
    assert result.exit_code == 1, result.output
    assert "<|im_end|>  id 248046" in result.stdout
    assert f"{BROKEN}/generation_config.json: EOS001 eos_token_id 248044" in result.stdout
    assert "eos_token_id -> [248044, 248046]" in result.stdout
    downloads = hub_repos.downloads(BROKEN)
    assert "model.safetensors" not in downloads
    # the tokenizer_config.json lists every id: tokenizer.json is not needed
    assert "tokenizer.json" not in downloads
    assert set(downloads) == {
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
    }
    assert not hub_repos.commits_received


def test_several_ids_print_each_report_once(hub_repos, run_eosfix):
    """Repo ids give each repo's block, once: no table repeating them."""
    out = run_eosfix("hub", BROKEN, HEALTHY).stdout
    assert out.count(BROKEN) == out.count(f"{BROKEN}/generation_config.json") + 1
    assert out.count(HEALTHY) == 1
    assert "┃" not in out


def test_pr_urls_are_printed_once_and_whole(hub_repos, run_eosfix):
    hub_repos.add_repo("org/second-broken", sample_files("chatml-missing-im-end"))
    out = run_eosfix("hub", "--author", "org", "--pr").stdout
    for repo_id in (BROKEN, "org/second-broken"):
        url = f"{hub_repos.url}/{repo_id}/discussions/1"
        assert out.count(url) == 1, out
        assert f"{repo_id}: pull request opened: {url}\n" in out
        (row,) = [ln for ln in out.splitlines() if ln.startswith(f" {repo_id} ")]
        assert row.rstrip().endswith("│ opened (#1)")


def test_healthy_repo_exits_zero(hub_repos, run_eosfix):
    result = run_eosfix("hub", HEALTHY)
    assert result.exit_code == 0, result.output
    assert "1 repo stops correctly" in result.stdout


def test_tokenizer_json_downloaded_when_ids_live_only_there(fake_hub, run_eosfix):
    """transformers 5 layout: no added_tokens_decoder, the ids are only in tokenizer.json."""
    files = sample_files("chatml-missing-im-end")
    tok = json.loads(files["tokenizer_config.json"])
    del tok["added_tokens_decoder"]
    files["tokenizer_config.json"] = json.dumps(tok, indent=2).encode()
    files["tokenizer.json"] = tokenizer_json(CHATML_TOKENS)
    fake_hub.add_repo("org/tf5", files)
    result = run_eosfix("hub", "org/tf5", "--format", "json")
    assert result.exit_code == 1, result.output
    repo = json.loads(result.stdout)["repos"][0]
    assert repo["name"] == "org/tf5"
    assert repo["proposed_eos_token_id"] == [248044, 248046]
    assert repo["sha"] == fake_hub.repos["org/tf5"].head
    downloads = fake_hub.downloads("org/tf5")
    assert downloads.count("tokenizer.json") == 1
    assert "model.safetensors" not in downloads


def test_revision_is_analysed_at_its_commit(hub_repos, run_eosfix):
    old = hub_repos.repos[BROKEN].head
    hub_repos.push(BROKEN, {"generation_config.json": fixed_gen()})
    assert run_eosfix("hub", BROKEN).exit_code == 0
    result = run_eosfix("hub", BROKEN, "--revision", old)
    assert result.exit_code == 1, result.output


def test_locally_edited_cache_snapshot_is_not_mistaken_for_the_hub(hub_repos, run_eosfix):
    """`eosfix cache --fix` replaces snapshot links; `hub` must still see the Hub's bytes."""
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(BROKEN, "generation_config.json", revision=hub_repos.repos[BROKEN].head)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(fixed_gen())
    import os

    os.replace(tmp, path)
    result = run_eosfix("hub", BROKEN)
    assert result.exit_code == 1, result.output
    assert "EOS001" in result.stdout


def test_pr_sends_one_commit_with_the_fixed_bytes(hub_repos, run_eosfix):
    repo = hub_repos.repos[BROKEN]
    analysed = repo.head
    result = run_eosfix("hub", BROKEN, "--pr")
    assert result.exit_code == 1, result.output
    assert len(hub_repos.commits_received) == 1
    commit = hub_repos.commits_received[0]
    assert commit["repo_id"] == BROKEN
    assert commit["create_pr"] is True
    assert commit["files"] == {"generation_config.json": fixed_gen()}
    assert commit["deleted"] == []
    assert commit["parent_commit"] == analysed
    assert commit["summary"].startswith(PR_TITLE_PREFIX)
    desc = commit["description"]
    assert "<|im_end|>" in desc
    assert "248046" in desc
    assert "Today this prints `<|endoftext|>`" in desc  # print() of eos_token_id 248044's token
    assert (
        '-  "eos_token_id": 248044,\n+  "eos_token_id": [\n+    248044,\n+    248046\n+  ],' in desc
    )
    assert "transformers" in desc  # which runtimes it affects
    url = f"{hub_repos.url}/{BROKEN}/discussions/1"
    assert f"{BROKEN}: pull request opened: {url}" in result.stdout
    assert repo.pr_files(1)["generation_config.json"] == fixed_gen()
    assert repo.head == analysed  # main untouched


def _table_cells(line: str) -> list[str]:
    """A Markdown table row's cells, split on the pipes GFM splits on (not ``\\|``)."""
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


@pytest.mark.parametrize("name", FIXABLE_SAMPLES)
def test_pr_description_is_written_for_the_repos_owner(name):
    """What was wrong in one sentence, the diff, the evidence from their own template, three
    lines of transformers, the runtimes folded; no probe sentinel, no eosfix command or code,
    no raw HTML or stray cell break in a table."""
    from eosfix import pipeline

    result = pipeline.check(SAMPLES / name, label=f"org/{name}")
    desc = pr_description(result)
    first, rest = desc.split("\n\n", 1)
    assert first.endswith(".")
    assert ". " not in first.replace("e.g. ", "")  # one sentence
    assert re.search(r"(?i)eosfix[a-z0-9_]", desc) is None  # Eosfixassistant1, eosfix_probe
    assert "a1b2c3d4e" not in desc
    assert re.search(r"\bEOS\d{3}\b", desc) is None
    prose = re.sub(r"```.*?```", "", desc, flags=re.DOTALL)
    assert "--" not in prose.replace("| --- ", "").replace("--- |", "")  # no CLI options
    assert "eosfix fix" not in desc
    assert "eosfix check" not in desc
    sections = [ln for ln in desc.splitlines() if ln.startswith("#")]
    assert sections == ["### What your chat template writes", "### Check it with transformers"]
    assert rest.index("```diff") < rest.index("### What your chat template writes")
    code = desc.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert len(code.splitlines()) == 3
    assert f'"org/{name}"' in code
    rows = [ln for ln in desc.splitlines() if ln.startswith("| ")]
    assert rows
    for row in rows:
        cells = _table_cells(row)
        assert len(cells) == 5, row
        outside_code = re.sub(r"`[^`]*`", "", row)
        assert "<" not in outside_code, row  # </s> would be an HTML tag


def test_repeated_pr_sends_nothing_and_prints_existing(hub_repos, run_eosfix):
    """Like `fix` run twice: the first run opens the pull request (exit 1, something was
    done), a second finds it open with the same fix and has nothing left to do (exit 0)."""
    assert run_eosfix("hub", BROKEN, "--pr").exit_code == 1
    for dry in ((), ("--dry-run",)):
        result = run_eosfix("hub", BROKEN, "--pr", *dry)
        assert result.exit_code == 0, result.output
        assert f"pull request already open: {hub_repos.url}/{BROKEN}/discussions/1" in (
            result.stdout
        )
    assert len(hub_repos.commits_received) == 1
    assert run_eosfix("hub", BROKEN).exit_code == 1  # without --pr: still something to fix


def test_an_open_eosfix_pr_proposing_something_else_is_updated_never_doubled(hub_repos, run_eosfix):
    """An open "[eosfix]" PR whose file differs from today's fix gets a commit with the new
    bytes on its own branch (no second PR is opened)."""
    from huggingface_hub import CommitOperationAdd, HfApi

    HfApi().create_commit(
        BROKEN,
        operations=[CommitOperationAdd("generation_config.json", b'{"eos_token_id": 1}')],
        commit_message=f"{PR_TITLE_PREFIX} something older",
        create_pr=True,
    )
    result = run_eosfix("hub", BROKEN, "--pr")
    assert result.exit_code == 1, result.output
    assert len(hub_repos.commits_received) == 2
    assert hub_repos.commits_received[1]["revision"] == "refs/pr/1"
    assert hub_repos.repos[BROKEN].pr_files(1)["generation_config.json"] == fixed_gen()
    assert f"{BROKEN}: pull request updated: {hub_repos.url}/{BROKEN}/discussions/1" in (
        result.stdout
    )
    assert "discussions/2" not in result.stdout
    assert "0 pull requests opened, 1 updated" in result.stdout


def test_unrelated_upstream_edit_updates_the_open_pr(hub_repos, run_eosfix):
    """After someone edits generation_config.json upstream (another key), today's fix has
    other bytes than the open PR: the PR is updated, not doubled; a third run finds it."""
    assert run_eosfix("hub", BROKEN, "--pr").exit_code == 1
    gen = hub_repos.repos[BROKEN].files["generation_config.json"]
    edited = gen.replace(b"{", b'{\n  "temperature": 0.6,', 1)
    hub_repos.push(BROKEN, {"generation_config.json": edited}, message="tune sampling")
    result = run_eosfix("hub", BROKEN, "--pr")
    assert result.exit_code == 1, result.output
    assert [c["revision"] for c in hub_repos.commits_received] == ["main", "refs/pr/1"]
    pr_file = hub_repos.repos[BROKEN].pr_files(1)["generation_config.json"]
    assert b'"temperature": 0.6' in pr_file
    assert b"248046" in pr_file
    assert "pull request updated" in result.stdout
    again = run_eosfix("hub", BROKEN, "--pr")
    assert len(hub_repos.commits_received) == 2
    assert "pull request already open" in again.stdout
    assert len([d for d in hub_repos.repos[BROKEN].discussions if d.is_pull_request]) == 1


def test_a_pr_branch_that_cannot_be_read_is_never_doubled(hub_repos, run_eosfix):
    """The PR is found by its title and branch, not by reading its file: a failed read
    (another PR every run) pushes the fix onto it instead."""
    assert run_eosfix("hub", BROKEN, "--pr").exit_code == 1
    hub_repos.fail(BROKEN, 500, match=r"/resolve/refs%2Fpr%2F1/")
    result = run_eosfix("hub", BROKEN, "--pr")
    assert result.exit_code == 1, result.output
    assert [c["create_pr"] for c in hub_repos.commits_received] == [True]  # same bytes: no-op
    assert len([d for d in hub_repos.repos[BROKEN].discussions if d.is_pull_request]) == 1
    assert f"{BROKEN}: pull request updated: {hub_repos.url}/{BROKEN}/discussions/1" in (
        result.stdout
    )


@pytest.mark.parametrize("fake_hub", [{"token": TOKEN}], indirect=True)
def test_someone_elses_eosfix_pr_is_left_as_it_is(fake_hub, run_eosfix):
    fake_hub.add_repo(BROKEN, sample_files("chatml-missing-im-end"))
    assert run_eosfix("hub", BROKEN, "--pr", "--token", TOKEN).exit_code == 1
    (pr,) = fake_hub.repos[BROKEN].discussions
    pr.author = "someone-else"
    fake_hub.push(BROKEN, {"README.md": "new\n", "generation_config.json": b'{"eos_token_id": 3}'})
    result = run_eosfix("hub", BROKEN, "--pr", "--token", TOKEN)
    assert result.exit_code == 1, result.output
    assert len(fake_hub.commits_received) == 1
    assert (
        f"{BROKEN}: pull request left open: opened by someone-else, not by eosfix-user: left "
        "as it is: "
    ) in result.stdout


def test_pr_not_opened_for_healthy_repo(hub_repos, run_eosfix):
    assert run_eosfix("hub", HEALTHY, "--pr").exit_code == 0
    assert not hub_repos.commits_received


def test_pr_failure_is_one_line_and_exit_2(hub_repos, run_eosfix):
    hub_repos.fail(BROKEN, 403, match=r"/commit/", headers={"X-Error-Code": None})
    result = run_eosfix("hub", BROKEN, "--pr")
    assert result.exit_code == 2, result.output
    assert f"{BROKEN}: error: cannot open a pull request: access denied (403)" in result.stderr


def test_organisation_scan_goes_on_past_errors(hub_repos, run_eosfix):
    hub_repos.add_repo("org/gone", sample_files("llama3-healthy"))
    hub_repos.add_repo("org/gated", sample_files("llama3-healthy"), gated=True)
    hub_repos.add_repo("other/unrelated", sample_files("chatml-missing-im-end"))
    hub_repos.fail("org/gone", 404)
    result = run_eosfix("hub", "--author", "org", "--workers", "3")
    assert result.exit_code == 2, result.output
    assert "org/gone: error: repository not found (404)" in result.stderr
    assert "org/gated: error: gated repository: request access and log in (401)" in result.stderr
    assert "other/unrelated" not in result.output
    # --author shows one table row per repo (not each repo's block, as for repo ids)
    table = result.stdout.splitlines()
    assert table[0].split() == [
        "repo",
        "┃",
        "revision",
        "┃",
        "ends",
        "a",
        "turn",
        "┃",
        "stops",
        "on",
        "┃",
        "verdict",
    ]
    for repo_id, verdict in [
        (BROKEN, "runs on -> [248044, 248046]"),
        (HEALTHY, "ok"),
        ("org/gone", "error: repository not found (404)"),
        ("org/gated", "error: gated repository"),
    ]:
        assert any(repo_id in line and verdict in line for line in table), result.stdout
    assert "model.safetensors" not in hub_repos.downloads()


def test_organisation_scan_without_errors_exits_like_check(hub_repos, run_eosfix):
    result = run_eosfix("hub", "--author", "org")
    assert result.exit_code == 1
    hub_repos.push(BROKEN, {"generation_config.json": fixed_gen()})
    result = run_eosfix("hub", "--author", "org")
    assert result.exit_code == 0, result.output


def test_unknown_author_checks_nothing_and_exits_2(fake_hub, run_eosfix):
    result = run_eosfix("hub", "--author", "nobody")
    assert result.exit_code == 2  # nothing checked
    assert result.stdout.splitlines()[-1].startswith("nothing checked; ")
    assert result.stderr == "nobody: no model repos on the Hub under this author\n"


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (401, {}, "repository not found: private? log in or pass --token (401)"),
        (401, {"X-Error-Code": None}, "authentication failed: invalid or missing token (401)"),
        (403, {}, "gated repository: request access and log in (403)"),
        (403, {"X-Error-Code": None}, "access denied (403)"),
        (404, {}, "repository not found (404)"),
        (429, {}, "rate limited by the Hub: try again later (429)"),
        (500, {}, "Hub server error (500)"),
    ],
)
def test_http_errors_are_one_line(hub_repos, run_eosfix, status, headers, message):
    hub_repos.fail(BROKEN, status, headers=headers)
    result = run_eosfix("hub", BROKEN, HEALTHY)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [f"{BROKEN}: error: {message}"]
    assert "Traceback" not in result.output
    assert "1 repo stops correctly" in result.stdout


def test_rate_limit_on_downloads_is_one_line(hub_repos, run_eosfix):
    hub_repos.fail(BROKEN, 429, match=r"/resolve/")
    result = run_eosfix("hub", BROKEN)
    assert result.exit_code == 2, result.output
    assert (
        result.stderr.strip() == f"{BROKEN}: error: rate limited by the Hub: try again later (429)"
    )


def test_timeout_is_one_line(hub_repos, run_eosfix):
    hub_repos.fail(BROKEN, 200, delay=2.0)
    result = run_eosfix("hub", BROKEN, HEALTHY, "--timeout", "0.3")
    assert result.exit_code == 2, result.output
    # the address waited for, and how often (it said "the Hub")
    url = f"{hub_repos.url}/api/models/{BROKEN}/revision/main"
    assert result.stderr.strip() == (
        f"{BROKEN}: error: timed out waiting for {url} (ReadTimeout: timed out; 6 attempts)"
    )


def test_an_unreachable_endpoint_is_named_and_no_request_is_counted(run_eosfix, monkeypatch):
    """A Hub that cannot be reached (a wrong HF_ENDPOINT, a dead proxy) is named in the
    error; attempts that never connected are not counted as requests made."""
    import socket

    from huggingface_hub import constants

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "ENDPOINT", dead)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("eosfix.sources.hub.http._sleep", lambda seconds, stopping: None)
    result = run_eosfix("hub", BROKEN, "--format", "json")
    payload = json.loads(result.stdout)
    (entry,) = payload["repos"]
    assert entry["error"].startswith(f"cannot connect to {dead} (HF_ENDPOINT) (ConnectError: ")
    assert entry["error"].endswith("; 6 attempts)")
    assert payload["summary"]["requests"] == 0
    assert payload["summary"]["unreachable"] == 6
    listing = run_eosfix("hub", "--author", "org")
    assert listing.stderr.startswith(f"org: error: cannot connect to {dead} (HF_ENDPOINT)")
    assert "; 0 requests for listings and files; 6 attempts could not connect" in listing.stdout


def test_dropped_connection_is_one_line(hub_repos, run_eosfix):
    hub_repos.fail(BROKEN, 0, match=r"/resolve/")
    result = run_eosfix("hub", BROKEN)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith(f"{BROKEN}: error: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_revision(hub_repos, run_eosfix):
    result = run_eosfix("hub", BROKEN, "--revision", "nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{BROKEN}: error: revision not found (404)"


def test_usage_error_without_ids(run_eosfix):
    from eosfix.cli import main

    assert main(["hub"]) == 2


@pytest.mark.parametrize("fake_hub", [{"token": TOKEN}], indirect=True)
@pytest.mark.parametrize("how", ["env", "option", "login-file"])
def test_private_repo_token_used_and_never_printed(
    fake_hub, run_eosfix, monkeypatch, caplog, capfd, how
):
    from huggingface_hub import constants

    fake_hub.add_repo("org/private", sample_files("chatml-missing-im-end"), private=True)
    fake_hub.add_repo("org/open", sample_files("llama3-healthy"))
    fake_hub.fail("org/timeouts", 429)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="huggingface_hub")
    caplog.set_level(logging.DEBUG, logger="eosfix")
    args = ["hub", "org/private", "org/open", "org/missing", "--pr"]
    if how == "env":
        monkeypatch.setenv("HF_TOKEN", TOKEN)
    elif how == "option":
        args += ["--token", TOKEN]
    else:
        with open(constants.HF_TOKEN_PATH, "w") as f:
            f.write(TOKEN)
    result = run_eosfix(*args)
    assert result.exit_code == 2, result.output  # org/missing
    assert "org/missing: error: repository not found" in result.stderr
    assert len(fake_hub.commits_received) == 1  # the PR on the private repo went through
    sent = [r for r in fake_hub.request_log if r.repo_id == "org/private"]
    assert sent
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in sent)
    json_out = run_eosfix(
        "hub", "org/private", "--format", "json", *(["--token", TOKEN] if how == "option" else [])
    )
    captured = capfd.readouterr()
    for text in (
        result.stdout,
        result.stderr,
        json_out.stdout,
        json_out.stderr,
        caplog.text,
        captured.out,
        captured.err,
    ):
        assert TOKEN not in text
        assert TOKEN[-8:] not in text


@pytest.mark.parametrize("fake_hub", [{"token": TOKEN}], indirect=True)
def test_private_repo_without_token_is_one_line(fake_hub, run_eosfix):
    fake_hub.add_repo("org/private", sample_files("chatml-missing-im-end"), private=True)
    result = run_eosfix("hub", "org/private")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "org/private: error: repository not found: private? log in or pass --token (401)"
    )


def test_session_api_checks_and_opens_one_pr(hub_repos, tmp_path):
    session = HubSession(describe=pr_description)
    results = [session.check(repo_id) for repo_id in (HEALTHY, BROKEN, "org/none")]
    assert [r.name for r in results] == [HEALTHY, BROKEN, "org/none"]
    assert results[0].status.value == "ok"
    assert results[1].status.value == "fixable"
    assert str(results[2].error) == "org/none: repository not found (404)"
    pr = session.open_pr(results[1])
    assert pr is not None
    assert pr.created
    assert pr.num == 1
    again = session.open_pr(results[1])
    assert again is not None
    assert not again.created
    assert again.url == pr.url


@pytest.mark.parametrize("fake_hub", [{"token": TOKEN}], indirect=True)
def test_session_pr_outcome_says_opened_unchanged_updated_or_left(fake_hub):
    """The API a caller (the Hub bot) reads: ``PullRequest.outcome`` says whether the PR was
    opened, already carried the fix, was updated (never doubled) after an upstream edit, or
    was left as it is (someone else's), with ``created``/``updated`` agreeing."""
    fake_hub.add_repo(BROKEN, sample_files("chatml-missing-im-end"))
    session = HubSession(token=TOKEN, describe=pr_description)

    def outcome():
        pr = session.open_pr(session.check(BROKEN))
        assert pr is not None
        assert pr.url == f"{fake_hub.url}/{BROKEN}/discussions/1"  # one PR, ever
        assert (pr.created, pr.updated) == (
            pr.outcome is PrOutcome.OPENED,
            pr.outcome is PrOutcome.UPDATED,
        )
        return pr.outcome, pr.left

    assert outcome() == (PrOutcome.OPENED, None)
    assert outcome() == (PrOutcome.UNCHANGED, None)
    gen = fake_hub.repos[BROKEN].files["generation_config.json"]
    edited = gen.replace(b"{", b'{\n  "temperature": 0.6,', 1)
    fake_hub.push(BROKEN, {"generation_config.json": edited}, message="tune sampling")
    assert outcome() == (PrOutcome.UPDATED, None)
    assert outcome() == (PrOutcome.UNCHANGED, None)
    (pr,) = fake_hub.repos[BROKEN].discussions
    pr.author = "someone-else"
    fake_hub.push(BROKEN, {"generation_config.json": gen.replace(b"{", b'{\n  "top_k": 5,', 1)})
    got, why = outcome()
    assert got is PrOutcome.LEFT
    assert why == "opened by someone-else, not by eosfix-user: left as it is"
    assert [c["create_pr"] for c in fake_hub.commits_received] == [True, False]
    assert [d.is_pull_request for d in fake_hub.repos[BROKEN].discussions] == [True]


def test_unreadable_file_is_named_by_repo_path(fake_hub, run_eosfix):
    files = sample_files("chatml-missing-im-end", **{"config.json": b"{not json"})
    fake_hub.add_repo("org/badjson", files)
    result = run_eosfix("hub", "org/badjson")
    assert result.exit_code == 2
    assert result.stderr.startswith("org/badjson: error: org/badjson/config.json: invalid JSON"), (
        result.stderr
    )
