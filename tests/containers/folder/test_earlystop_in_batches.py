"""Early stops where the fix options reach: the HF cache (``cache --fix``), the Hub (``hub
--pr``: the PR explains a removal as clearly as an addition), ``--keep-id`` in both."""

from __future__ import annotations

import json
import pickle

from click.testing import CliRunner

from eosfix.cli import cli
from tests.conftest import SAMPLES
from tests.support.cachebuilder import CacheBuilder
from tests.support.hubrepos import sample_files

GEN = "generation_config.json"
HARMONY = "stop-inside-turn"
REPO = "org/harmony"


def _cache(tmp_path):
    files = {
        p.name: p.read_bytes()
        for p in (SAMPLES / HARMONY).iterdir()
        if p.is_file() and p.name != "expected.txt"
    }
    b = CacheBuilder(tmp_path / "hub")
    sha = b.add_revision(REPO, files)
    return b, b.snapshot(REPO, sha) / GEN


def _cache_cli(*args: str):
    return CliRunner().invoke(cli, ["cache", *args], catch_exceptions=False)


def test_cache_fix_removes_an_in_turn_stop_id(tmp_path):
    b, gen = _cache(tmp_path)
    check = _cache_cli("--cache-dir", str(b.root), "--format", "json")
    assert check.exit_code == 1
    (entry,) = json.loads(check.stdout)["repos"]
    assert "EOS011" in [f["code"] for f in entry["findings"]]
    fixed = _cache_cli("--cache-dir", str(b.root), "--fix")
    assert fixed.exit_code == 1
    assert not gen.is_symlink()
    assert json.loads(gen.read_text())["eos_token_id"] == [200002, 199999, 200012]
    assert gen.read_bytes() == (SAMPLES / HARMONY / "fixed" / GEN).read_bytes()


def test_cache_fix_keep_id_keeps_it(tmp_path):
    b, gen = _cache(tmp_path)
    result = _cache_cli("--cache-dir", str(b.root), "--fix", "--keep-id", "200007")
    assert result.exit_code == 0, result.stdout
    assert gen.is_symlink()  # nothing written: the blob stays the snapshot's file
    assert 200007 in json.loads(gen.read_text())["eos_token_id"]


def test_hub_pr_explains_the_removal(fake_hub, run_eosfix):
    fake_hub.add_repo(REPO, sample_files(HARMONY))
    result = run_eosfix("hub", REPO, "--pr")
    assert result.exit_code == 1, result.output
    (commit,) = fake_hub.commits_received
    assert commit["files"] == {GEN: (SAMPLES / HARMONY / "fixed" / GEN).read_bytes()}
    desc = commit["description"]
    # what was wrong, in one sentence (the body is for the repo's owner)
    assert desc.startswith(
        "Generation stops in the middle of a reply: `eos_token_id` holds `<|end|>` (200007)"
    )
    # where each terminator is written (report.placement_text)
    assert "`<|return|>` (200002, after the last reply only (earlier replies end with " \
        "`<|end|>`))" in desc  # fmt: skip
    assert "`<|call|>` (200012, after a tool call)" in desc
    assert (
        "`<|end|>` (id 200007) is written inside an assistant turn (between the reasoning "
        "and the answer):"
    ) in desc
    assert "analysis<|message|>…<|end|><|start|>assistant" in desc  # the evidence, no sentinel
    assert "-    200012,\n-    200007\n+    200012\n" in desc
    assert "| transformers | generation_config.json (config.json if missing) | yes | " \
        "`<\\|end\\|>` | yes |" in desc  # fmt: skip


def test_hub_pr_keep_id_opens_nothing(fake_hub, run_eosfix):
    fake_hub.add_repo(REPO, sample_files(HARMONY))
    result = run_eosfix("hub", REPO, "--pr", "--keep-id", "200007")
    assert result.exit_code == 0, result.output
    assert not fake_hub.commits_received


def test_pr_marks_an_added_terminator(fake_hub, run_eosfix):
    fake_hub.add_repo(REPO, sample_files("reasoning-channel"))
    assert run_eosfix("hub", REPO, "--pr").exit_code == 1
    (commit,) = fake_hub.commits_received
    desc = commit["description"]
    assert "`chat_template.jinja` writes `<|call|>` (id 200012) after a tool call:" in desc
    assert "is written inside an assistant turn" not in desc  # nothing is removed


def test_keep_id_reaches_worker_processes(tmp_path, monkeypatch):
    """--keep-id is bound into the job function the worker processes run (pickled)."""
    from eosfix.batch import pool
    from eosfix.batch.cache import CacheRun
    from eosfix.sources import cache as cachelib

    files = {
        p.name: p.read_bytes()
        for p in (SAMPLES / HARMONY).iterdir()
        if p.is_file() and p.name != "expected.txt"
    }
    b = CacheBuilder(tmp_path / "hub")
    gen = files[GEN].decode()
    for i in range(4):  # distinct generation_config.json: four analyses, not one shared
        b.add_revision(f"org/h{i}", {**files, GEN: gen.replace("{", f'{{\n  "top_k": {i},', 1)})
    scan = cachelib.scan_cache(b.root)
    monkeypatch.setattr(pool, "POOL_MIN", 1)
    kept = CacheRun(scan, workers=2, fix=True, keep_ids=(200007,)).drain()
    assert kept.analyses == 4
    assert pickle.loads(pickle.dumps(kept.analyze)).keywords == {"keep_ids": (200007,)}
    assert pickle.loads(pickle.dumps(kept.cache.fixer)).keywords == {"keep_ids": (200007,)}
    assert kept.counts()["warned"] == 4
    assert kept.counts()["fixed"] == 0
    fixed = CacheRun(scan, workers=2, fix=True).drain()
    assert fixed.counts()["fixed"] == 4
