"""`eosfix check/fix/explain` on GGUF files: verdicts, the key edits, and how files are written."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from types import SimpleNamespace

import pytest

from eosfix import api
from eosfix.cli import main
from eosfix.containers.gguf import write as gguf_write
from eosfix.containers.gguf.read import load_gguf, read_header
from tests.support.ggufs import BASE, chatml, command_r, glm
from tests.support.llamacpp_eog import assert_loads, real_eog

N = len(BASE)
ENDOFTEXT, USER, OBSERVATION = N, N + 4, N + 6  # ids in tests.support.ggufs.GLM_SPECIALS


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_chatml_with_endoftext_eos_is_fine_for_llama_cpp(tmp_path, capsys):
    # The seed's case: llama.cpp already stops on <|im_end|> by its name list: no false alarm.
    path = chatml(tmp_path / "chatml.gguf")
    code, out, _ = run(capsys, "check", path)
    assert code == 0
    assert "ends a turn   <|im_end|>  id 98" in out
    assert "stops on      [96, 98]" in out
    assert "EOS2" not in out
    before = sha(path)
    assert run(capsys, "fix", path)[0] == 0
    assert sha(path) == before


def test_glm_gets_eot_user_and_eom_observation_by_rewrite(tmp_path, capsys):
    path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 64)
    code, out, _ = run(capsys, "check", path)
    assert code == 1
    assert f"EOS201 llama.cpp does not stop on <|user|> ({USER})" in out
    assert f"EOS201 llama.cpp does not stop on <|observation|> ({OBSERVATION})" in out
    assert f"tokenizer.ggml.eot_token_id -> {USER} <|user|>" in out
    assert "rewrite: new header" in out
    old = read_header(path)
    end_old = gguf_write.data_start(old, gguf_write.tensor_info_end(old))
    data = path.read_bytes()[end_old:]
    code, _out, err = run(capsys, "fix", path)
    assert code == 1
    assert f"Fixing {path} (rewritten)" in err
    new = read_header(path)
    assert new.value("tokenizer.ggml.eot_token_id") == USER
    assert new.value("tokenizer.ggml.eom_token_id") == OBSERVATION
    for key, f in old.fields.items():  # every other key and value unchanged
        assert new.fields[key].value == f.value, key
    assert list(new.fields)[: len(old.fields)] == list(old.fields)  # keys appended, order kept
    # the tensor data section holds the same bytes, at the new aligned offset
    end_new = gguf_write.data_start(new, gguf_write.tensor_info_end(new))
    assert path.read_bytes()[end_new:] == data
    assert len(data) == 256 * 64
    assert end_new % 32 == 0
    assert [p.name for p in tmp_path.iterdir()] == ["glm.gguf"]  # no temp file left
    assert run(capsys, "fix", path)[0] == 0  # idempotent
    assert run(capsys, "check", path)[0] == 0


def test_existing_keys_are_edited_in_place_only_those_bytes(tmp_path, capsys):
    ids = {"eos": "<|endoftext|>", "eot": "<|endoftext|>", "eom": "<|endoftext|>"}
    path = glm(tmp_path / "glm.gguf", ids=ids, tensor=bytes(100))
    before = path.read_bytes()
    inode = os.stat(path).st_ino
    code, out, err = run(capsys, "fix", "--diff", path)
    assert code == 1
    assert out == ""  # binary key edits are no text patch; they are told on stderr
    assert "in place: only those 4-byte values" in err
    assert f"-tokenizer.ggml.eot_token_id: {ENDOFTEXT}\n+tokenizer.ggml.eot_token_id: {USER}" in err
    assert path.read_bytes() == before  # --diff writes nothing
    code, _, err = run(capsys, "fix", path)
    assert code == 1
    assert "(in place)" in err
    after = path.read_bytes()
    assert os.stat(path).st_ino == inode
    assert len(after) == len(before)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    header = read_header(path)
    spans = {
        header.fields[k].value_start
        for k in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
    }
    assert changed
    assert all(any(s <= i < s + 4 for s in spans) for i in changed)


def test_command_r_terminator_outside_the_name_list(tmp_path, capsys):
    path = command_r(tmp_path / "cmdr.gguf")
    code, out, _ = run(capsys, "check", "--format", "json", path)
    assert code == 1
    repo = json.loads(out)["repos"][0]
    assert repo["container"] == "gguf"
    assert repo["runtimes"][0]["stops_before"] == {"<|END_OF_TURN_TOKEN|>": False}
    assert repo["changes"] == [
        {
            "key": "tokenizer.ggml.eot_token_id",
            "old": None,
            "new": N + 4,
            "token": "<|END_OF_TURN_TOKEN|>",
            "in_place": False,
        }
    ]
    assert N + 4 in repo["proposed_eos_token_id"]
    assert repo["changes"][0]["in_place"] is False
    assert [f["code"] for f in repo["findings"]] == ["EOS201"]


def test_output_leaves_the_original_untouched(tmp_path, capsys):
    path = command_r(tmp_path / "cmdr.gguf")
    before = sha(path)
    out_path = tmp_path / "fixed.gguf"
    code, _, err = run(capsys, "fix", path, "--output", out_path)
    assert code == 1
    assert f"Fixing {out_path}" in err
    assert sha(path) == before
    assert load_gguf(out_path).specials.get("eot") == N + 4
    assert run(capsys, "check", out_path)[0] == 0
    assert run(capsys, "fix", tmp_path, "--output", out_path)[0] == 2  # one GGUF only


def test_unexpressible_terminators_write_nothing_and_say_what_to_use(tmp_path, capsys):
    # eot and eom already hold tokens that are end-of-generation only through those keys:
    # overwriting either would stop llama.cpp stopping there, so nothing can hold <|user|>.
    ids = {"eos": "<|endoftext|>", "eot": "[gMASK]", "eom": "<sop>"}
    path = glm(tmp_path / "glm.gguf", ids=ids)
    before = sha(path)
    code, out, _ = run(capsys, "fix", path)
    assert code == 1
    assert sha(path) == before
    assert "EOS202 llama.cpp does not stop on <|user|>" in out
    assert "llama-completion: --reverse-prompt '<|user|>' --reverse-prompt '<|observation|>'" in out
    assert 'ollama: PARAMETER stop "<|user|>"' in out
    assert "--special" in out


def test_failed_rewrite_leaves_the_original_untouched(tmp_path, capsys, monkeypatch):
    path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 16)
    before = sha(path)

    def disk_full(src, dst, start, length, progress):
        dst.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gguf_write, "_copy_data", disk_full)
    code, _, err = run(capsys, "fix", path)
    assert code == 2
    assert "No space left on device" in err
    assert "original unchanged" in err
    assert sha(path) == before
    assert [p.name for p in tmp_path.iterdir()] == ["glm.gguf"]


def test_free_space_is_checked_before_writing(tmp_path, capsys, monkeypatch):
    path = glm(tmp_path / "glm.gguf")
    before = sha(path)
    monkeypatch.setattr(gguf_write.shutil, "disk_usage", lambda _: SimpleNamespace(free=1000))
    code, _, err = run(capsys, "fix", path)
    assert code == 2
    assert "not enough free space" in err
    assert sha(path) == before
    assert len(list(tmp_path.iterdir())) == 1


def test_tensor_data_corruption_is_caught_by_the_hash(tmp_path, capsys, monkeypatch):
    path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 16)
    before = sha(path)
    real = gguf_write._copy_data

    def flip(src, dst, start, length, progress):
        digest = real(src, dst, start, length, progress)
        dst.seek(-1, os.SEEK_END)
        dst.write(b"\x99")
        return digest

    monkeypatch.setattr(gguf_write, "_copy_data", flip)
    code, _, err = run(capsys, "fix", path)
    assert code == 2
    assert "tensor data hash differs" in err
    assert sha(path) == before
    assert len(list(tmp_path.iterdir())) == 1


def test_symlinked_gguf_is_refused_without_output(tmp_path, capsys):
    real = command_r(tmp_path / "blob.gguf")
    link = tmp_path / "model.gguf"
    link.symlink_to(real)
    before = sha(real)
    code, _, err = run(capsys, "fix", link)
    assert code == 2
    assert "is a symlink" in err
    assert "--output" in err
    assert sha(real) == before


def test_folder_of_ggufs_checks_each_and_skips_later_shards(tmp_path, capsys):
    (tmp_path / "lmstudio" / "org" / "a").mkdir(parents=True)
    (tmp_path / "lmstudio" / "org" / "b").mkdir(parents=True)
    chatml(tmp_path / "lmstudio" / "org" / "a" / "m-00001-of-00002.gguf")
    (tmp_path / "lmstudio" / "org" / "a" / "m-00002-of-00002.gguf").write_bytes(b"GGUF")
    glm(tmp_path / "lmstudio" / "org" / "b" / "glm.gguf")
    code, out, _ = run(capsys, "check", "--format", "json", tmp_path / "lmstudio")
    assert code == 1
    repos = {os.path.basename(r["path"]): r["status"] for r in json.loads(out)["repos"]}
    assert repos == {"m-00001-of-00002.gguf": "ok", "glm.gguf": "fixable"}


def test_explain_shows_llama_cpp_set_and_loop_ids(tmp_path, capsys):
    path = glm(tmp_path / "glm.gguf")
    code, out, _ = run(capsys, "explain", path)
    assert code == 1
    assert "probe final" in out
    assert f"stop when the sampled id is in [{ENDOFTEXT}, {USER}, {OBSERVATION}]" in out
    assert "llama.cpp's set after `eosfix fix`" in out
    code, out, _ = run(capsys, "explain", "--format", "json", path)
    assert json.loads(out)["loop"]["stop_ids"] == [ENDOFTEXT, USER, OBSERVATION]


def test_api_accepts_a_gguf_path(tmp_path):
    path = glm(tmp_path / "glm.gguf")
    result = api.check(path)
    assert result.status.value == "fixable"
    assert [t.content for t in result.check.id_terminators] == ["<|user|>", "<|observation|>"]
    fixed = api.fix(path)
    assert fixed.written == (str(path),)
    assert api.check(path).status.value == "ok"


@pytest.mark.slow
def test_real_smollm2_gguf_stops(capsys):
    from tests.support.realmodel import require_smollm2_gguf

    path = require_smollm2_gguf()
    code, out, _ = run(capsys, "check", path)
    assert code == 0
    assert "ends a turn   <|im_end|>  id 2" in out
    assert "stops on      [0, 2, 4]" in out


def test_rewrite_reports_progress_in_bytes(tmp_path):
    path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 64)
    seen = []
    result = api.fix_gguf(
        path, progress=lambda phase, done, total: seen.append((phase, done, total))
    )
    assert result.error is None
    assert ("copy", 256 * 64, 256 * 64) in seen
    assert ("verify", 256 * 64, 256 * 64) in seen
    assert result.write.data_sha256 == hashlib.sha256(bytes(range(256)) * 64).hexdigest()


# --- truncated files, splits, --output, ids past the vocabulary -------------------


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_truncated_tensor_data_is_refused_in_one_line_and_nothing_written(tmp_path, capsys):
    whole = glm(tmp_path / "whole.gguf", tensor=bytes(range(256)) * 64)
    path = tmp_path / "cut.gguf"
    path.write_bytes(whole.read_bytes()[:-1000])  # an interrupted download
    before = sha(path)
    for args in (["check", path], ["fix", path], ["fix", path, "--output", tmp_path / "o.gguf"]):
        code, out, err = run(capsys, *args)
        assert out.startswith("1 GGUF file could not be")
        assert code == 2, args
        assert err.count("\n") == 1
        assert err.startswith(f"error: {path}: truncated: tensor 'weights' needs bytes up to ")
        assert "tensor data is not within the file bounds" in err
    assert sha(path) == before
    assert _files(tmp_path) == ["cut.gguf", "whole.gguf"]
    assert "error" in real_eog([path])[path]  # llama.cpp refuses it too


def test_split_output_writes_every_shard_under_llama_cpps_names(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    first = glm(tmp_path / "in" / "m.gguf", shards=2, tensor=bytes(range(256)) * 4)
    second = first.with_name("m-00002-of-00002.gguf")
    before = {p: sha(p) for p in (first, second)}
    out = tmp_path / "out"
    out.mkdir()
    # a name llama.cpp cannot find the other shard by: refused, with the name to use
    code, _, err = run(capsys, "fix", first, "--output", out / "fixed.gguf")
    assert code == 2
    assert "name the output fixed-00001-of-00002.gguf (eosfix writes all 2 shards there)" in err
    assert _files(out) == []
    code, _, err = run(capsys, "fix", first, "--output", out / "fixed-00001-of-00002.gguf")
    assert code == 1
    assert f"Fixing {out / 'fixed-00001-of-00002.gguf'} (rewritten)" in err
    assert f"Copying shard 2 to {out / 'fixed-00002-of-00002.gguf'}" in err
    assert _files(out) == ["fixed-00001-of-00002.gguf", "fixed-00002-of-00002.gguf"]
    assert {p: sha(p) for p in (first, second)} == before
    assert sha(out / "fixed-00002-of-00002.gguf") == before[second]
    assert load_gguf(out / "fixed-00001-of-00002.gguf").specials.get("eot") == USER
    got = assert_loads([out / "fixed-00001-of-00002.gguf"])
    assert got[out / "fixed-00001-of-00002.gguf"]["eog"] == [ENDOFTEXT, USER, OBSERVATION]


def test_split_with_a_shard_missing_says_which(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    first = glm(tmp_path / "src" / "m.gguf", shards=3, tensor=bytes(64))
    only_first, only_second = tmp_path / "a", tmp_path / "b"
    only_first.mkdir()
    only_second.mkdir()
    shutil.copy(first, only_first)
    shutil.copy(first.with_name("m-00002-of-00003.gguf"), only_second)
    code, _, err = run(capsys, "check", only_first)
    assert code == 2
    assert err == (
        f"error: {only_first / first.name}: shard 1 of 3; missing shards: 2, 3 "
        "(m-00002-of-00003.gguf, m-00003-of-00003.gguf): llama.cpp loads every shard of a split\n"
    )
    code, _, err = run(capsys, "check", only_second)
    assert code == 2
    assert err == (
        f"error: {only_second / 'm-00002-of-00003.gguf'}: shard 2 of 3; its metadata is in "
        "m-00001-of-00003.gguf, which is missing (missing shards: 1, 3)\n"
    )
    assert "error" in real_eog([only_first / first.name])[only_first / first.name]


def test_output_with_nothing_to_fix_is_a_verified_copy(tmp_path, capsys):
    path = chatml(tmp_path / "ok.gguf", tensor=bytes(range(256)))
    target = tmp_path / "upload" / "ok.gguf"
    target.parent.mkdir()
    code, out, err = run(capsys, "fix", path, "--output", target)
    assert code == 0
    assert err == f"Copying {path} to {target} (nothing to fix)\n"
    assert f"copied        nothing to fix: copied unchanged to {target}" in out
    assert out.rstrip().endswith("1 GGUF file already stops correctly")
    assert target.read_bytes() == path.read_bytes()
    payload = json.loads(run(capsys, "fix", path, "--output", tmp_path / "c2.gguf", "--format",
                             "json")[1])  # fmt: skip
    repo = payload["repos"][0]
    assert (repo["written"], repo["write"]["mode"]) == ([], "copy")
    assert_loads([target])


def test_existing_output_is_refused_unless_force(tmp_path, capsys):
    path = command_r(tmp_path / "cmdr.gguf")
    target = tmp_path / "fixed.gguf"
    target.write_bytes(b"keep me")
    code, _, err = run(capsys, "fix", path, "--output", target)
    assert code == 2
    assert err == f"error: {target}: exists; refusing to overwrite it (use --force)\n"
    assert target.read_bytes() == b"keep me"
    code, _, err = run(capsys, "fix", path, "--output", target, "--force")
    assert code == 1
    assert load_gguf(target).specials.get("eot") == N + 4
    assert_loads([target])
    code, _, err = run(capsys, "fix", path, "--force")
    assert code == 2
    assert "--force only lets --output overwrite a file" in err


def test_key_past_the_vocabulary_is_eos013_like_a_folders(tmp_path, capsys):
    path = chatml(tmp_path / "bad-eos.gguf", ids={"eos": 99999, "eot": 5000})
    result = api.check(path)
    by_key = {f.file: f for f in result.check.findings if f.code == "EOS013"}
    eos = by_key["tokenizer.ggml.eos_token_id"]
    # llama.cpp logs "bad special token" and falls back to its gpt2 default, 11 (',')
    assert eos.message.startswith(
        "tokenizer.ggml.eos_token_id is 99999, which is no token (the file has 99 tokens): "
        "llama.cpp ignores it (\"bad special token\") and uses its default eos for 'gpt2' "
        "vocabularies, 11 ','"
    )
    assert (eos.severity.value, eos.fixable) == ("warning", False)
    eot = by_key["tokenizer.ggml.eot_token_id"]
    assert eot.message.endswith(
        "and takes eot from a token's text: 98 '<|im_end|>' or 96 '<|endoftext|>' (llama.cpp "
        "picks one)"
    )
    assert "eos 99999 (no token; llama.cpp uses 11 ,)" in result.check.stop.detail
    got = real_eog([path])[path]  # llama.cpp: "bad special token", and the fallbacks said
    assert got["eos"] == 11
    assert got["eot"] in (96, 98)
    assert 11 in got["eog"]


def test_a_file_that_needs_no_fix_never_reads_as_still_failing(tmp_path, capsys):
    # Qwen2's vocabulary has "</s>" as ordinary text, which llama.cpp stops on by its text: a
    # caveat of the runtimes, not a pending fix
    path = chatml(tmp_path / "q.gguf", normal=["</s>"])
    for args in (["check", path], ["fix", path], ["fix", "--diff", path]):
        code, out, err = run(capsys, *args)
        if "--diff" in args:  # the patch alone on stdout (none here), the report on stderr
            assert out == ""
            out = err
        assert code == 0, args
        assert "still" not in out
        assert "after fix" not in out
        # llama.cpp and ollama (its own row) cut alike: one line
        assert "  caveat        llama.cpp, ollama stop mid-reply at '</s>' (96)" in out


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "another spelling"])
@pytest.mark.parametrize("maker", [command_r, chatml], ids=["to fix", "nothing to fix"])
def test_output_naming_the_input_itself_is_refused_like_any_existing_file(
    tmp_path, capsys, how, maker
):
    """``--output`` that is the input (the same path, a link to it, another spelling of its
    path) exists: refused without --force, the input untouched, whether or not it needs a
    fix; never "X.gguf is unchanged" after writing into it."""
    path = maker(tmp_path / "in.gguf")
    before = sha(path)
    target = {
        "same path": path,
        "symlink": tmp_path / "link.gguf",
        "hard link": tmp_path / "hard.gguf",
        "another spelling": tmp_path / "sub" / ".." / "in.gguf",
    }[how]
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        target.symlink_to(path)
    elif how == "hard link":
        os.link(path, target)
    code, out, err = run(capsys, "fix", path, "--output", target)
    assert code == 2
    assert err == (
        f"error: {target}: exists (it is the input itself); refusing to overwrite it "
        "(use --force, or leave out --output to fix the file in place)\n"
    )
    assert "unchanged" not in out
    assert sha(path) == before


def test_output_naming_the_input_with_force_fixes_it_in_place(tmp_path, capsys):
    path = command_r(tmp_path / "in.gguf")
    code, _, _ = run(capsys, "fix", path, "--output", path, "--force")
    assert code == 1
    assert load_gguf(path).specials.get("eot") == N + 4


def test_output_into_a_missing_folder_names_the_folder_as_missing(tmp_path, capsys):
    path = command_r(tmp_path / "in.gguf")
    for target, problem in (
        (tmp_path / "nodir" / "x.gguf", f"its folder {tmp_path / 'nodir'} does not exist"),
        (path / "x.gguf", f"its folder {path} is not a folder"),
    ):
        code, _, err = run(capsys, "fix", path, "--output", target)
        assert code == 2
        assert err == f"error: {target}: {problem}\n"
        assert not (tmp_path / "nodir").exists()
