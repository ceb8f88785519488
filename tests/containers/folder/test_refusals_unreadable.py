"""A generation_config.json or special_tokens_map.json that is not JSON at all (invalid JSON, NUL
bytes, empty), as people push them: runtimes do not refuse the folder, each ignores the file
or cannot load the model (tests/conformance runs them on these shapes), so eosfix reads on:
the terminators, what transformers stops on (config.json's ids), per runtime what it does with
the file (EOS020), and ``fix`` writes generation_config.json anew, keeping the old bytes beside
it; afterwards ``check`` finds nothing more to fix."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support.cachebuilder import CacheBuilder, chatml_files

GEN, STM = "generation_config.json", "special_tokens_map.json"
CORRUPT = {
    "invalid": (b'{"eos_token_id": 248044,\n', "is not valid JSON"),
    "nul": (bytes(163), "holds only NUL bytes"),
    "empty": (b"", "is empty"),
}
WHO = (
    "transformers, vLLM, SGLang, TGI, mlx-lm and mlx-vlm ignore the file (as if it were "
    "missing), ollama and ExLlamaV2 cannot load the model"
)


def _sample(tmp_path, name: str, data: bytes):
    folder = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_corrupt_generation_config_is_read_past_and_fix_writes_it_anew(
    kind, tmp_path, capsys, monkeypatch
):
    data, why = CORRUPT[kind]
    folder = _sample(tmp_path, GEN, data)
    code, out, err = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert (code, err) == (1, "")
    assert "  ends a turn   <|im_end|>  id 248046" in out
    assert "  stops on      248044  (from config.json)" in out  # transformers' fallback
    assert (
        f"m/{GEN}: EOS002 {GEN} {why}, so transformers ignores it and reads config.json, whose "
        "eos_token_id 248044 does not include <|im_end|> (248046): generation runs past the "
        "turn end"
    ) in out
    assert f"m/{GEN}: EOS020 {GEN} {why}" in out
    assert f"which JSON readers refuse: {WHO}; fix writes a new one from config.json" in out
    assert (
        f"  fix           eos_token_id -> [248044, 248046] in a new {GEN} (the old {GEN} "
        f"{why}: its bytes kept as {GEN}.corrupt)"
    ) in out
    code, diff, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "--diff", "m")
    assert code == 1
    assert '+  "eos_token_id": [\n' in diff
    assert not (folder / f"{GEN}.corrupt").exists()  # --diff writes nothing
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 1
    assert (folder / f"{GEN}.corrupt").read_bytes() == data
    new = json.loads((folder / GEN).read_text())
    assert new == {"bos_token_id": 248044, "eos_token_id": [248044, 248046]}
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 0, out  # nothing more to fix
    assert "EOS020" not in out


def test_a_hidden_old_file_is_named_above_the_diff(tmp_path, capsys, monkeypatch):
    _sample(tmp_path, GEN, bytes(163))
    code, diff, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "--diff", "m")
    assert code == 1
    assert diff.startswith(
        f"m/{GEN} holds only NUL bytes (163): not shown; fix keeps it as {GEN}.corrupt\n"
        f"--- a/m/{GEN}\n+++ b/m/{GEN}\n@@ -0,0 +1,7 @@\n"
    )
    assert "\x00" not in diff


def test_a_corrupt_file_with_the_right_ids_in_config_json_is_still_replaced(tmp_path):
    """ExLlamaV2 and ollama cannot load the model while the file is there: fix writes it even
    when transformers' fallback already stops at every terminator."""
    folder = _sample(tmp_path, GEN, b"{")
    config = json.loads((folder / "config.json").read_text())
    config["eos_token_id"] = [248044, 248046]
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    result = api.check(folder)
    assert result.check is not None
    assert [f.code for f in result.check.findings] == ["EOS020"]
    assert result.check.status.value == "fixable"
    assert [p.summary for p in result.patches] == [
        (
            f"eos_token_id -> [248044, 248046] in a new {GEN} (the old {GEN} is not valid JSON: "
            f"its bytes kept as {GEN}.corrupt)"
        )
    ]
    assert api.fix(folder).written == (GEN,)
    assert api.check(folder).check.status.value == "ok"


def test_fix_never_overwrites_other_bytes_kept_before(tmp_path, capsys, monkeypatch):
    folder = _sample(tmp_path, GEN, b"{")
    (folder / f"{GEN}.corrupt").write_bytes(b"older bytes")
    code, _out, err = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 2
    assert f"{GEN}.corrupt: it holds other bytes" in err
    assert (folder / GEN).read_bytes() == b"{"  # nothing written
    assert (folder / f"{GEN}.corrupt").read_bytes() == b"older bytes"


def test_an_empty_special_tokens_map_transformers_never_opens_is_a_warning(
    tmp_path, capsys, monkeypatch
):
    """The sample's tokenizer_config.json lists added_tokens_decoder: transformers' tokenizer
    never reads special_tokens_map.json (the conformance shape stm-zero-bytes-decoder)."""
    _sample(tmp_path, STM, b"")
    path = tmp_path / "m" / GEN
    path.write_text(
        path.read_text().replace('"eos_token_id": 248044', '"eos_token_id": [248044, 248046]')
    )
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 0, out
    assert (
        f"m/{STM}: EOS020 {STM} is empty: no runtime opens {STM} here (tokenizer_config.json "
        "lists added_tokens_decoder, so transformers' tokenizer never reads it)"
    ) in out
    assert "1 repo with warnings only" in out


def test_an_empty_special_tokens_map_read_by_the_tokenizer_stops_every_loader(tmp_path):
    """Without added_tokens_decoder, transformers' AutoTokenizer json-loads the file and
    raises: every runtime loading its tokenizer with it cannot load the model."""
    folder = _sample(tmp_path, STM, b"")
    path = folder / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data.pop("added_tokens_decoder")
    path.write_text(json.dumps(data, indent=2) + "\n")
    (folder / "tokenizer.json").write_text(
        json.dumps(
            {
                "added_tokens": [
                    {"id": i, "content": c, "special": True}
                    for c, i in (
                        ("<|endoftext|>", 248044),
                        ("<|im_start|>", 248045),
                        ("<|im_end|>", 248046),
                    )
                ]
            }
        )
    )
    result = api.check(folder)
    assert result.check is not None
    (f,) = [f for f in result.check.findings if f.code == "EOS020"]
    assert f.severity.value == "error"
    assert not f.fixable
    assert (
        f"{STM} is empty, which JSON readers refuse: transformers, vLLM, SGLang, TGI, "
        "TGI-transformers, mlx-lm and mlx-vlm cannot load the model; delete it, or save the "
        "tokenizer again"
    ) == f.message
    rows = {r.runtime: r for r in result.runtimes.rows}
    assert rows["transformers"].note.startswith(f"cannot load the model: {STM} is not valid JSON")
    assert not any(rows["transformers"].stops_before.values())


def test_a_corrupt_generation_config_in_a_cache_snapshot(tmp_path):
    """A snapshot's file is a link into blobs/: cache --fix replaces the link (the blob keeps
    the old bytes for other revisions) and keeps the bytes beside it too."""
    from click.testing import CliRunner

    from eosfix.cli import cli

    files = chatml_files(1000)
    files[GEN] = bytes(163)
    builder = CacheBuilder(tmp_path / "hub")
    sha = builder.add_revision("org/broken", files)
    snapshot = builder.snapshot("org/broken", sha)
    result = CliRunner().invoke(cli, ["cache", "--cache-dir", str(builder.root)])
    assert result.exit_code == 1, result.output
    result = CliRunner().invoke(cli, ["cache", "--cache-dir", str(builder.root), "--fix"])
    assert result.exit_code == 1, result.output
    assert not (snapshot / GEN).is_symlink()
    assert json.loads((snapshot / GEN).read_text())["eos_token_id"] == [1000, 1002]
    assert (snapshot / f"{GEN}.corrupt").read_bytes() == bytes(163)
    assert api.check(snapshot).check.status.value == "ok"


def test_hub_pr_carries_a_new_file_and_says_why(fake_hub, run_eosfix):
    from tests.support.hubrepos import sample_files

    files = sample_files("chatml-missing-im-end")
    fake_hub.add_repo("org/broken", {**files, GEN: b'{"eos_token_id": 248044,'})
    result = run_eosfix("hub", "org/broken")
    assert result.exit_code == 1, result.output
    assert f"EOS020 {GEN} is not valid JSON" in result.stdout
    result = run_eosfix("hub", "org/broken", "--pr")
    assert result.exit_code == 1, result.output
    sent = json.loads(fake_hub.repos["org/broken"].pr_files(1)[GEN])
    assert sent["eos_token_id"] == [248044, 248046]
    (commit,) = fake_hub.commits_received
    assert "This pull request writes `generation_config.json` anew" in commit["description"]
    assert (
        "Today this raises `OSError` (`generation_config.json` is not valid JSON)"
        in (commit["description"])
    )
