"""`eosfix hub` selecting repos the way the Hub lists them: --search, --filter, --library,
--pipeline-tag, --sort and --limit, with --author or without."""
# ruff: noqa: F811  (the `fake_hub` fixture is imported, then requested by name)

from __future__ import annotations

import json

from tests.support.hubrepos import sample_files
from tests.support.hubserver import fake_hub  # noqa: F401  (fixture)
from tests.support.schemas import BATCH, valid


def _slice(fake_hub) -> None:
    chat = sample_files("chatml-missing-im-end")
    meta = {"library_name": "mlx", "pipeline_tag": "text-generation"}
    fake_hub.add_repo("mlx-community/A-4bit", chat, tags=["conversational"], downloads=30, **meta)
    fake_hub.add_repo("mlx-community/B-4bit", chat, tags=["conversational"], downloads=90, **meta)
    fake_hub.add_repo("someone/C-8bit", chat, tags=["conversational"], downloads=60, **meta)
    fake_hub.add_repo("someone/D-4bit", chat, downloads=99, **meta)  # no conversational tag
    fake_hub.add_repo("org/E", sample_files("llama3-healthy"), downloads=1000)


def test_the_options_select_and_order_as_the_hub_lists(fake_hub, run_eosfix):
    _slice(fake_hub)
    result = run_eosfix(
        "hub", "--library", "mlx", "--filter", "conversational", "--sort", "downloads",
        "--limit", "2", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    valid(BATCH, payload)
    assert [e["repo_id"] for e in payload["repos"]] == ["mlx-community/B-4bit", "someone/C-8bit"]
    assert payload["listing"] == {"filter": ["conversational", "mlx"], "sort": "downloads",
                                  "limit": 2}  # fmt: skip
    (sent,) = [r.query for r in fake_hub.request_log if r.path == "/api/models"]
    assert sent["filter"] == ["conversational", "mlx"]
    assert (sent["sort"], sent["limit"]) == (["downloads"], ["2"])
    text = run_eosfix("hub", "--search", "4bit", "--author", "mlx-community", "--sort", "likes")
    assert text.exit_code == 1
    assert "mlx-community/A-4bit" in text.stdout  # the table
    assert "someone/D-4bit" not in text.stdout
    pipeline = run_eosfix("hub", "--pipeline-tag", "text-generation", "--format", "csv")
    assert "org/E" not in pipeline.stdout
    assert pipeline.stdout.count("\n") == 1 + 4


def test_an_author_alone_keeps_its_words(fake_hub, run_eosfix):
    _slice(fake_hub)
    payload = json.loads(run_eosfix("hub", "--author", "org", "--format", "json").stdout)
    assert payload["author"] == "org"
    assert "listing" not in payload
    empty = run_eosfix("hub", "--author", "nobody")
    assert empty.exit_code == 2
    assert empty.stderr.strip() == "nobody: no model repos on the Hub under this author"


def test_a_listing_that_selects_nothing_or_fails_names_the_query(fake_hub, run_eosfix):
    _slice(fake_hub)
    empty = run_eosfix("hub", "--search", "nothing-like-it")
    assert empty.exit_code == 2
    assert empty.stderr.strip() == (
        "models?search=nothing-like-it: no model repos on the Hub match this listing"
    )
    fake_hub.fail("*", 403, match="^/api/models$", headers={"X-Error-Code": None})
    failed = run_eosfix("hub", "--library", "mlx")
    assert failed.exit_code == 2
    assert failed.stderr.strip() == "models?filter=mlx: error: access denied (403)"


def test_nothing_to_select_is_a_usage_error(run_eosfix):
    result = run_eosfix("hub")
    assert result.exit_code == 2
    assert "give REPO_ID..., or select repos with --author, --search" in result.stderr
    bad = run_eosfix("hub", "--sort", "stars")
    assert bad.exit_code == 2
    assert "Invalid value for '--sort'" in bad.stderr
