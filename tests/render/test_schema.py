"""Every machine output is what docs/schema/ says: check's and fix's JSON, cache's
and hub's JSON documents, their CSV rows and markdown tables, interrupted or not.

The outputs are real ones, of the samples, a GGUF file, a path that does not exist, a cache
with a corrupted repo, and the stand-in Hub with a failing repo, pull requests and --state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import SAMPLES, sample_names
from tests.support import ggufs
from tests.support.cachebuilder import CacheBuilder, chatml_files, git_sha1
from tests.support.hubrepos import sample_files
from tests.support.schemas import BATCH, CHECK, check_csv, check_markdown, valid


def test_the_schemas_are_valid_json_schemas():
    for schema in (CHECK, BATCH):
        Draft202012Validator.check_schema(schema)


def test_the_schemas_name_every_verdict_problem_and_column():
    """The schema's vocabularies are the code's (eosfix.core.outcome, eosfix.render.batch)."""
    from eosfix.core.outcome import PROBLEMS, VERDICTS
    from eosfix.render.batch import CSV_COLUMNS, MARKDOWN_COLUMNS

    assert CHECK["$defs"]["verdict"]["enum"] == list(VERDICTS)
    assert CHECK["$defs"]["problem"]["enum"] == [*PROBLEMS, None]
    assert BATCH["x-csv-columns"] == list(CSV_COLUMNS)
    assert BATCH["$defs"]["csv_row"]["required"] == list(CSV_COLUMNS)
    assert BATCH["x-markdown-columns"] == list(MARKDOWN_COLUMNS)
    assert BATCH["$defs"]["counts"]["required"] == list(VERDICTS)


def test_check_and_fix_json(run_eosfix, sample_repo, tmp_path):
    gguf = ggufs.glm(tmp_path / "glm.gguf")
    paths = [SAMPLES / n for n in sample_names()]
    result = run_eosfix("check", *paths, gguf, tmp_path / "missing", "--format", "json")
    payload = json.loads(result.stdout)
    valid(CHECK, payload)
    verdicts = {e["verdict"] for e in payload["repos"]}
    assert {"fixable", "ok", "warned", "no_template", "error"} <= verdicts
    fixed = run_eosfix("fix", sample_repo("chatml-missing-im-end"), "--format", "json")
    payload = json.loads(fixed.stdout)
    valid(CHECK, payload)
    assert payload["repos"][0]["verdict"] == "fixed"
    assert "before" in payload["repos"][0]


@pytest.fixture
def cache_root(tmp_path: Path) -> Path:
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/qwen", chatml_files(1000))
    b.add_revision("org/qwen", chatml_files(1000, readme="v2\n"), refs=["refs/pr/1"])
    for name in ("llama3-healthy", "plain-text-turns", "base-model", "stop-inside-turn"):
        b.add_revision(f"samples/{name}", sample_files(name))
    bad = chatml_files(10)
    bad["tokenizer_config.json"] = "{not json"
    b.add_revision("org/bad", bad)
    keep = ("tokenizer_config.json", "chat_template.jinja")
    b.add_revision(
        "org/tokenizer",
        {k: v for k, v in chatml_files(20).items() if k in keep},
        no_exist=["config.json"],
    )
    broken = chatml_files(5000)
    b.add_revision("org/broken", broken)
    (b.repo_dir("org/broken") / "blobs" / git_sha1(broken["README.md"].encode())).unlink()
    return b.root


def test_cache_outputs(run_eosfix, cache_root):
    payload = json.loads(run_eosfix("cache", "--cache-dir", cache_root, "--format", "json").stdout)
    valid(BATCH, payload)
    units = len(payload["repos"]) + len(payload["corrupted"])
    assert {e["verdict"] for e in payload["repos"]} >= {"fixable", "error", "not_a_model"}
    rows = check_csv(
        run_eosfix("cache", "--cache-dir", cache_root, "--format", "csv").stdout, units
    )
    assert rows[-1]["repo_id"] == "org/broken"
    check_markdown(
        run_eosfix("cache", "--cache-dir", cache_root, "--format", "markdown").stdout, units
    )
    fixed = json.loads(
        run_eosfix("cache", "--cache-dir", cache_root, "--fix", "--format", "json").stdout
    )
    valid(BATCH, fixed)
    assert "fixed" in {e["verdict"] for e in fixed["repos"]}


def test_hub_outputs(fake_hub, run_eosfix, tmp_path):
    for name in ("chatml-missing-im-end", "llama3-healthy", "stop-inside-turn", "base-model"):
        fake_hub.add_repo(f"org/{name}", sample_files(name))
    fake_hub.add_repo("org/gone", sample_files("llama3-healthy"))
    fake_hub.fail("org/gone", 404)
    state = tmp_path / "s.jsonl"
    args = ("hub", "--author", "org", "--state", state, "--format")
    first = json.loads(run_eosfix(*args, "json", "--pr").stdout)
    valid(BATCH, first)
    assert any(e["pr_created"] for e in first["repos"])
    again = json.loads(run_eosfix(*args, "json", "--pr").stdout)  # carried over from --state
    valid(BATCH, again)
    assert again["summary"]["resumed"] == 4
    check_csv(run_eosfix(*args, "csv").stdout, 5)
    report = run_eosfix(*args, "markdown").stdout
    check_markdown(report, 5)
    sections = [ln[3:] for ln in report.splitlines() if ln.startswith("## ")]
    assert sections == BATCH["x-markdown-sections"]
    dry = json.loads(run_eosfix("hub", "--author", "org", "--format", "json", "--pr",
                                "--dry-run").stdout)  # fmt: skip
    valid(BATCH, dry)
    ids = json.loads(run_eosfix("hub", "org/llama3-healthy", "org/nope", "--format", "json").stdout)
    valid(BATCH, ids)
    fake_hub.fail("*", 403, match="^/api/models$", headers={"X-Error-Code": None})
    failed = run_eosfix("hub", "--author", "org", "--format", "csv")
    (row,) = check_csv(failed.stdout, 1)  # the listing that failed has its row
    assert (row["repo_id"], row["verdict"]) == ("org", "error")
    listing = json.loads(run_eosfix("hub", "--author", "org", "--format", "json").stdout)
    valid(BATCH, listing)
    assert listing["errors"]


def test_json_of_hub_ids_runtime_pins_gguf_and_unfinished_renders(
    fake_hub, run_eosfix, sample_repo, tmp_path, monkeypatch
):
    """What main added to check's JSON is in the schema: a Hub id's keys (repo_id, revision,
    sha), a pinned runtime's row (--runtime ollama==0.20.0) on a GGUF with EOS203, and a
    template that could not finish on this machine (EOS103, status problems)."""
    from eosfix.core import limits
    from eosfix.core.limits import RenderLimits

    fake_hub.add_repo("org/broken", sample_files("chatml-missing-im-end"))
    gguf = ggufs.chatml(tmp_path / "q.gguf", arch="qwen3")
    monkeypatch.chdir(tmp_path)  # no local folder named org/broken
    out = run_eosfix("check", "--runtime", "ollama==0.20.0", "--format", "json", "org/broken",
                     gguf)  # fmt: skip
    payload = json.loads(out.stdout)
    valid(CHECK, payload)
    hub, file = payload["repos"]
    assert (hub["repo_id"], hub["revision"], len(hub["sha"])) == ("org/broken", "main", 40)
    assert [f["code"] for f in file["findings"]] == ["EOS203"]
    assert {r["runtime"]: r["version"] for r in file["runtimes"]}["ollama"] == "0.20.0"
    repo = sample_repo("chatml-missing-im-end")
    monkeypatch.setattr(limits, "DEFAULT_LIMITS", RenderLimits(max_seconds=0.0))
    payload = json.loads(run_eosfix("check", "--format", "json", repo).stdout)
    valid(CHECK, payload)
    (entry,) = payload["repos"]
    assert "EOS103" in [f["code"] for f in entry["findings"]]
    assert entry["status"] == "problems"
