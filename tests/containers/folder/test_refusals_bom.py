"""A UTF-8 byte-order mark in a JSON file runtimes read: every runtime's JSON reader refuses it
(tests/conformance runs them), so transformers, vLLM, SGLang, TGI, mlx-lm and mlx-vlm ignore
a generation_config.json that starts with one (and stop on config.json's ids), and a BOM in
config.json or a tokenizer file stops them loading the model. EOS017 says so; ``fix`` removes
the mark from the files it writes, the one byte change beyond the ids."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support.cachebuilder import CacheBuilder, chatml_files

GEN = "generation_config.json"
BOM = b"\xef\xbb\xbf"


def _with_bom(folder, name):
    path = folder / name
    path.write_bytes(BOM + path.read_bytes())
    return path


def _sample(tmp_path, *, healthy=False):
    folder = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    if healthy:
        path = folder / GEN
        path.write_text(
            path.read_text().replace('"eos_token_id": 248044', '"eos_token_id": [248044, 248046]')
        )
    return folder


def test_a_bom_in_generation_config_is_eos017_and_fix_removes_it(tmp_path, capsys, monkeypatch):
    folder = _sample(tmp_path)
    path = _with_bom(folder, GEN)
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1
    assert (
        f"m/{GEN}: EOS017 {GEN} starts with a UTF-8 byte-order mark, which JSON readers "
        "refuse: transformers, vLLM, SGLang, TGI, mlx-lm and mlx-vlm ignore the file (as if "
        "it were missing), ollama and ExLlamaV2 cannot load the model; fix removes the mark"
    ) in out
    assert "  fix           eos_token_id -> [248044, 248046] and the byte-order mark removed" in out
    code, diff, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "--diff", "m")
    assert code == 1
    removed = [ln for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert removed == ["-\ufeff{", '-  "eos_token_id": 248044,']
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 1
    assert "wrote         eos_token_id -> [248044, 248046] and the byte-order mark removed" in out
    assert not path.read_bytes().startswith(BOM)
    assert json.loads(path.read_text())["eos_token_id"] == [248044, 248046]
    assert run_in(capsys, monkeypatch, tmp_path, "check", "m")[0] == 0


def test_right_ids_behind_a_bom_do_not_stop_transformers(tmp_path, capsys, monkeypatch):
    """The ids are right, but transformers ignores the file and falls back to config.json's
    248044: it would not stop on <|im_end|> until the mark is gone (the issue's case: eosfix
    said "stops correctly")."""
    folder = _sample(tmp_path, healthy=True)
    path = _with_bom(folder, GEN)
    result = api.check(folder)
    assert [f.code for f in result.check.findings] == ["EOS017"]
    rows = {r.runtime: r for r in result.runtimes.rows}
    assert rows["transformers"].stops_before == {"<|im_end|>": False}
    assert rows["transformers"].stops_after == {"<|im_end|>": True}
    assert rows["ExLlamaV2"].note.startswith("cannot load the model: ")
    assert rows["transformers"].note == (
        f"ignores {GEN}: it starts with a byte-order mark; the fix removes that"
    )
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1
    assert "run on now: transformers" in out
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 1
    assert f"  wrote         {GEN}: byte-order mark removed" in out
    assert path.read_bytes() == (SAMPLES / "chatml-missing-im-end" / GEN).read_bytes().replace(
        b'"eos_token_id": 248044', b'"eos_token_id": [248044, 248046]'
    )


@pytest.mark.parametrize("name", ["tokenizer_config.json", "config.json"])
def test_a_bom_in_a_file_fix_does_not_write_is_a_problem_it_names(
    tmp_path, name, capsys, monkeypatch
):
    folder = _sample(tmp_path, healthy=True)
    path = _with_bom(folder, name)
    result = api.check(folder)
    (f,) = result.check.findings
    assert (f.code, f.file, f.fixable) == ("EOS017", name, False)
    assert f.message.startswith(
        f"{name} starts with a UTF-8 byte-order mark, which JSON readers refuse:"
    )
    assert "remove the mark (its first 3 bytes)" in f.message
    assert result.check.status.value == "problems"
    assert run_in(capsys, monkeypatch, tmp_path, "fix", "m")[0] == 1  # a problem fix cannot fix
    assert path.read_bytes().startswith(BOM)
    if name == "config.json":  # --config-json writes config.json: its mark goes too
        assert api.check(folder, config_json=True).check.findings[0].fixable
        fixed = api.fix(folder, config_json=True)
        assert fixed.written == ("config.json",)
        assert not path.read_bytes().startswith(BOM)
        assert api.check(folder).check.findings == ()


def test_a_bom_in_tokenizer_json_is_named(tmp_path):
    from tests.support.tiny_lm import save_tokenizer, word_level_tokenizer

    folder = _sample(tmp_path, healthy=True)
    save_tokenizer(word_level_tokenizer(["hello"], {"<|endoftext|>": 0}), folder)
    _with_bom(folder, "tokenizer.json")
    codes = [(f.code, f.file) for f in api.check(folder).check.findings]
    assert ("EOS017", "tokenizer.json") in codes


def test_cache_fix_removes_the_mark(tmp_path):
    from click.testing import CliRunner

    from eosfix.cli import cli

    builder = CacheBuilder(tmp_path / "hub")
    files = chatml_files(1000, healthy=True)
    files[GEN] = "\ufeff" + str(files[GEN])
    sha = builder.add_revision("org/bom", files)
    result = CliRunner().invoke(cli, ["cache", "--cache-dir", str(builder.root), "--fix"])
    assert result.exit_code == 1, result.output
    gen = builder.snapshot("org/bom", sha) / GEN
    assert not gen.is_symlink()
    assert gen.read_bytes() == str(files[GEN]).encode().removeprefix(BOM)


def test_hub_pr_carries_the_file_without_its_mark(fake_hub, run_eosfix):
    """Through the Hub: check names EOS017, and the pull request carries generation_config.json
    without the mark, saying so."""
    from tests.support.hubrepos import sample_files

    files = sample_files("chatml-missing-im-end")
    fixed = files[GEN].replace(b'"eos_token_id": 248044', b'"eos_token_id": [248044, 248046]')
    fake_hub.add_repo("org/bom", {**files, GEN: BOM + fixed})
    result = run_eosfix("hub", "org/bom")
    assert result.exit_code == 1, result.output
    assert "EOS017 generation_config.json starts with a UTF-8 byte-order mark" in result.stdout
    result = run_eosfix("hub", "org/bom", "--pr")
    assert result.exit_code == 1, result.output
    assert fake_hub.repos["org/bom"].pr_files(1)[GEN] == fixed
    (commit,) = fake_hub.commits_received
    assert "removes only the byte-order mark" in commit["description"]
    assert "starts with a byte-order mark" in commit["description"]
