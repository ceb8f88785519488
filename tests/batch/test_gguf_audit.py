"""GGUF repos in a Hub audit (``eosfix hub``): one row per repo, by the same header check as
``eosfix check ORG/REPO-GGUF`` (eosfix.targets.gguf_hub), against the stand-in Hub's GGUF
publisher (tests/support/hubserver.py add_gguf_org); --state, Ctrl-C and every output format."""

from __future__ import annotations

import json
import threading

import pytest

from eosfix.batch.hub import HubSource
from eosfix.batch.run import Run
from eosfix.batch.verdict import Verdict
from eosfix.sources.hub.read import HubReader, ListingQuery
from eosfix.targets.hub import check_hub_target
from eosfix.targets.parse import parse_hub
from tests.support.hubserver import GGUF_ORG
from tests.support.schemas import BATCH, check_csv, check_markdown, valid

CHAT = f"{GGUF_ORG}/Chat-7B-GGUF"
REPOS = ["Broken-GGUF", "Chat-70B-GGUF", "Chat-7B-GGUF", "ChatML-GGUF", "Reasoner-GGUF"]


def _ranges(hub) -> int:
    """Requests that read the bytes of a readable GGUF (the CDN's: an error is retried)."""
    return sum("Broken-GGUF" not in r.path for r in hub.cdn_requests)


def test_each_gguf_repo_is_one_row_with_the_checks_verdict(gguf_org, run_eosfix):
    result = run_eosfix("hub", "--author", GGUF_ORG, "--format", "json")
    assert result.exit_code == 2  # a repo whose files cannot be read
    payload = json.loads(result.stdout)
    valid(BATCH, payload)
    entries = {e["repo_id"].split("/")[1]: e for e in payload["repos"]}
    assert sorted(entries) == REPOS
    assert all(e["container"] == "gguf" for e in entries.values())
    # the verdict of each repo is that of `eosfix check` on its worst group of files
    for name, entry in entries.items():
        checked = check_hub_target(parse_hub(f"{GGUF_ORG}/{name}"), reader=HubReader())
        names = [r.status.value if r.error is None else "error" for r in checked.results]
        order = ("problems", "fixable", "error", "ok")
        worst = min(names, key=lambda n: order.index(n) if n in order else len(order))
        assert entry["status"] == worst, name
        assert [g["file"] for g in entry["gguf_groups"]] == [r.gguf.file for r in checked.results]
    chat = entries["Chat-7B-GGUF"]
    assert chat["verdict"] == "fixable"  # the older Q2_K: llama.cpp runs on past its turn end
    assert chat["file"] == "Chat-7B-Q2_K.gguf"
    assert chat["differs_in"] == ["tokenizer.ggml.eot_token_id"]
    main, older = chat["gguf_groups"]
    assert (main["quant"], main["verdict"], len(main["files"])) == ("Q4_K_M", "ok", 5)
    assert (older["quant"], older["verdict"]) == ("Q2_K", "fixable")
    assert entries["ChatML-GGUF"]["verdict"] == "ok"
    broken = entries["Broken-GGUF"]
    assert broken["verdict"] == "error"
    assert broken["error"].startswith(f"{GGUF_ORG}/Broken-GGUF/Broken-Q4_K_M.gguf: truncated")
    assert [g["verdict"] for g in broken["gguf_groups"]] == ["error", "error"]
    assert payload["summary"]["fixable"] == 2
    assert payload["summary"]["error"] == 1


def test_the_table_names_the_quant_that_differs(gguf_org, run_eosfix):
    result = run_eosfix("hub", "--author", GGUF_ORG, "--format", "markdown")
    check_markdown(result.stdout, 5)
    row = next(ln for ln in result.stdout.splitlines() if "Chat-7B-GGUF" in ln)
    note = "(5 of 6 GGUF files alike; Q2_K differs in tokenizer.ggml.eot_token_id: would be fixed)"
    assert f"runs on -> [96, 98, 100] {note} |" in row
    assert "without a chat template" not in result.stdout + result.stderr
    rows = {r["repo_id"]: r for r in check_csv(
        run_eosfix("hub", "--author", GGUF_ORG, "--format", "csv").stdout, 5
    )}  # fmt: skip
    assert rows[CHAT]["verdict"] == "fixable"
    assert rows[CHAT]["proposed_eos_token_id"] == "[96, 98, 100]"
    text = run_eosfix("hub", "--author", GGUF_ORG).stdout
    assert "ok (2 GGUF files alike)" in text  # the split model and its Q8_0


def test_a_resumed_audit_reads_no_header_again(gguf_org, run_eosfix, tmp_path):
    state = tmp_path / "state.jsonl"
    first = run_eosfix("hub", "--author", GGUF_ORG, "--state", state, "--format", "csv")
    read = _ranges(gguf_org)
    assert read > 0
    again = run_eosfix("hub", "--author", GGUF_ORG, "--state", state, "--format", "csv")
    assert _ranges(gguf_org) == read  # every repo unchanged: its record stands
    assert again.stdout == first.stdout
    assert "4 unchanged since the last run (--state)" in again.stderr  # not the broken one
    records = [json.loads(ln) for ln in state.read_text().splitlines()]
    chat = next(r for r in records if r["repo_id"] == CHAT)
    assert Verdict.from_state(chat).gguf.startswith("5 of 6 GGUF files alike; Q2_K differs")
    # JSON wants whole entries: the headers are read again, the entries are a fresh run's
    fresh = json.loads(run_eosfix("hub", "--author", GGUF_ORG, "--format", "json").stdout)
    resumed = json.loads(
        run_eosfix("hub", "--author", GGUF_ORG, "--state", state, "--format", "json").stdout
    )
    valid(BATCH, resumed)
    for a, b in zip(fresh["repos"], resumed["repos"], strict=True):
        assert b["resumed"] is (a["verdict"] != "error")  # an error is checked again
        assert {**a, "resumed": b["resumed"]} == b


def test_a_stopped_audit_is_whole(gguf_org):
    """Stopped while the listing's second page is on its way: no repo of the second page is
    started, and a first-page repo is reported whole or not at all."""
    gguf_org.page_size = 2
    page2 = gguf_org.hold(r"^/api/models$", query="cursor=2")
    run = Run(HubSource(HubReader(), query=ListingQuery(author=GGUF_ORG)))

    def stop_at_page2():
        assert page2.arrived.wait(60)
        run.stop()
        page2.release()

    stopper = threading.Thread(target=stop_at_page2)
    stopper.start()
    seen = list(run)
    stopper.join()
    assert run.interrupted
    assert run.exit_code == 130
    # the second page's repos are never started; a first-page repo whose header reads the
    # stop cut short is left out, one whose reads were done is reported whole
    whole = {
        f"{GGUF_ORG}/Broken-GGUF": ("error", "Q4_K_M cannot be read; Q8_0 cannot be read"),
        f"{GGUF_ORG}/Chat-70B-GGUF": ("ok", "2 GGUF files alike"),
    }
    assert {r.item.repo_id for r in seen} <= set(whole)
    for r in seen:
        assert (r.verdict.name, r.verdict.gguf) == whole[r.item.repo_id]
    assert not any(
        f"{GGUF_ORG}/{n}" in req.path for n in REPOS[2:] for req in gguf_org.cdn_requests
    )


@pytest.mark.parametrize("fake_hub", [{"token": "hf_gguf_test"}], indirect=True)
def test_hub_pr_opens_a_gguf_repos_params_pull_request_once(gguf_org, run_eosfix, monkeypatch):
    """``eosfix hub --pr``: a GGUF repo's pull request is its params file, as HubSession's
    (the one ollama's default quant plans); a repo whose params are right gets none."""
    monkeypatch.setenv("HF_TOKEN", "hf_gguf_test")
    dry = run_eosfix("hub", "--author", GGUF_ORG, "--pr", "--dry-run", "--format", "csv")
    rows = {r["repo_id"]: r for r in check_csv(dry.stdout, 5)}
    assert rows[f"{GGUF_ORG}/Reasoner-GGUF"]["pull_request"] == "would open (dry run)"
    assert rows[CHAT]["pull_request"] == ""  # its header is wrong, its params are not
    assert not gguf_org.commits_received
    opened = run_eosfix("hub", "--author", GGUF_ORG, "--pr", "--format", "json")
    entries = {e["repo_id"]: e for e in json.loads(opened.stdout)["repos"]}
    reasoner = entries[f"{GGUF_ORG}/Reasoner-GGUF"]
    assert reasoner["pr"] == "opened"
    assert reasoner["pr_url"] == f"{gguf_org.url}/{GGUF_ORG}/Reasoner-GGUF/discussions/1"
    (commit,) = gguf_org.commits_received
    assert list(commit["files"]) == ["params"]
    assert json.loads(commit["files"]["params"]) == {"stop": ["<|turn_end|>"], "temperature": 0.6}
    again = run_eosfix("hub", "--author", GGUF_ORG, "--pr", "--format", "json")
    entries = {e["repo_id"]: e for e in json.loads(again.stdout)["repos"]}
    assert entries[f"{GGUF_ORG}/Reasoner-GGUF"]["pr"] == "already open"
    assert len(gguf_org.commits_received) == 1


def test_an_organisation_of_both_kinds_has_a_row_for_each(fake_hub, tmp_path, run_eosfix):
    """Safetensors repos by their small files, GGUF repos by their headers, in listing order;
    a repo holding both a tokenizer's files and GGUF files is checked by its small files."""
    from tests.support import ggufs
    from tests.support.hubrepos import sample_files
    from tests.support.hubserver import add_gguf_repo

    fake_hub.add_repo("mixed/chat-7b", sample_files("chatml-missing-im-end"))
    gguf = ggufs.chatml(tmp_path / "chat-7b-Q4_K_M.gguf", tensor=bytes(64)).read_bytes()
    add_gguf_repo(fake_hub, "mixed/chat-7b-GGUF", {"chat-7b-Q4_K_M.gguf": gguf})
    fake_hub.add_repo(
        "mixed/chat-7b-both", {**sample_files("llama3-healthy"), "chat-7b-Q4_K_M.gguf": gguf}
    )
    payload = json.loads(run_eosfix("hub", "--author", "mixed", "--format", "json").stdout)
    valid(BATCH, payload)
    entries = {e["repo_id"]: e for e in payload["repos"]}
    assert entries["mixed/chat-7b"]["container"] == "folder"
    assert entries["mixed/chat-7b"]["verdict"] == "fixable"
    assert entries["mixed/chat-7b-GGUF"]["container"] == "gguf"
    assert entries["mixed/chat-7b-GGUF"]["verdict"] == "ok"
    assert entries["mixed/chat-7b-GGUF"]["file"] == "chat-7b-Q4_K_M.gguf"
    assert entries["mixed/chat-7b-both"]["container"] == "folder"
    assert "gguf_groups" not in entries["mixed/chat-7b-both"]


def test_a_gguf_repo_by_id_is_its_worst_groups_block_named_by_its_file(gguf_org, run_eosfix):
    result = run_eosfix("hub", CHAT)
    assert result.exit_code == 1
    head = result.stdout.splitlines()[0]
    assert head.startswith(f"{CHAT}/Chat-7B-Q2_K.gguf")
    assert f"{CHAT}/Chat-7B-Q2_K.gguf/tokenizer.ggml.eot_token_id: EOS201" in result.stdout
