"""Golden sample repos: what `check` prints and the exact bytes `fix` writes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES, copy_repo, sample_names


@pytest.mark.parametrize("name", sample_names())
def test_check_prints_expected_lines(name, sample_repo, run_eosfix):
    repo = sample_repo(name)
    result = run_eosfix("check", repo)
    out = result.stdout.replace(str(repo), f"sample_repos/{name}")
    expected = (SAMPLES / name / "expected.txt").read_text().splitlines()
    for line in expected:
        assert line in out, f"missing line {line!r} in:\n{out}"
    # fixable means exit 1, unless the findings are warnings only (stop ids that never fire)
    fixable = (SAMPLES / name / "fixed").is_dir() and "1 repo with warnings only" not in expected
    assert result.exit_code == (1 if fixable else 0)


@pytest.mark.parametrize("name", sample_names())
def test_fix_writes_expected_bytes_then_is_idempotent(name, sample_repo, run_eosfix):
    repo = sample_repo(name)
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    fixed_dir = SAMPLES / name / "fixed"
    expected = (
        {p.relative_to(fixed_dir): p.read_bytes() for p in fixed_dir.rglob("*") if p.is_file()}
        if fixed_dir.is_dir()
        else {}
    )

    first = run_eosfix("fix", repo)
    assert first.exit_code == (1 if expected else 0), first.stdout
    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    for rel, data in after.items():
        assert data == expected.get(rel, before.get(rel)), f"{rel} differs"
    assert set(after) == set(before) | set(expected)
    for rel in expected:
        assert f"Fixing {repo / rel}" in first.stderr

    second = run_eosfix("fix", repo)
    assert second.exit_code == 0
    assert second.stderr == ""
    assert run_eosfix("check", repo).exit_code == 0


@pytest.mark.parametrize("name", sample_names())
def test_json_output_shape(name, sample_repo, run_eosfix):
    repo = sample_repo(name)
    payload = json.loads(run_eosfix("check", repo, "--format", "json").stdout)
    (entry,) = payload["repos"]
    if entry["status"] == "no_template":
        assert entry["terminators"] == []
        return
    assert {"terminators", "eos_token_id", "proposed_eos_token_id", "findings"} <= set(entry)
    for t in entry["terminators"]:
        assert {"content", "id", "kind"} <= set(t)
    for f in entry["findings"]:
        assert f["code"].startswith("EOS")


def test_config_json_option_edits_existing_values_only(tmp_path, run_eosfix):
    """--config-json: text_config's eos is edited in place; no top-level key is invented."""
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "vlm")
    cfg = repo / "config.json"
    cfg.write_text(
        '{\n  "model_type": "qwen3_5_vl",\n  "text_config": {\n    "eos_token_id": 248044\n  }\n}\n'
    )
    assert run_eosfix("fix", "--config-json", repo).exit_code == 1
    assert cfg.read_text() == (
        '{\n  "model_type": "qwen3_5_vl",\n  "text_config": {\n'
        '    "eos_token_id": [\n      248044,\n      248046\n    ]\n  }\n}\n'
    )
    assert run_eosfix("fix", "--config-json", repo).exit_code == 0


def test_config_json_option_keeps_the_first_id_first(sample_repo, run_eosfix):
    repo = sample_repo("chatml-missing-im-end")
    assert run_eosfix("fix", "--config-json", repo).exit_code == 1
    assert json.loads((repo / "config.json").read_text())["eos_token_id"] == [248044, 248046]
