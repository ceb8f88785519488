"""`check` says what will stop `fix` from writing its plan (a symlinked file, a read-only file
or folder) and what to do; `fix` refuses with the same words, and `fix --diff` agrees with
`fix` (exit 2, no patch), never a patch `fix` would not write."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support.schemas import CHECK, valid

GEN = "generation_config.json"


def _symlinked(folder):
    (folder / GEN).rename(folder / "gen-real.json")
    (folder / GEN).symlink_to("gen-real.json")
    quoted = shlex.quote(f"m/{GEN}")
    return (
        f"m/{GEN}: is a symlink; refusing to write through it (its target may be shared): "
        f'replace it by a copy of its target (cp --remove-destination "$(readlink -f {quoted})" '
        f"{quoted}), or fix the file it points to"
    )


def _read_only_file(folder):
    (folder / GEN).chmod(0o444)
    return f"m/{GEN}: is read-only; make it writable to let eosfix fix it (chmod u+w m/{GEN})"


def _read_only_folder(folder):
    folder.chmod(0o555)
    return (
        f"m/{GEN}: its folder is read-only (mode 555); make it writable to let eosfix fix it "
        "(chmod u+w m)"
    )


CASES = {"symlink": _symlinked, "read-only file": _read_only_file,
         "read-only folder": _read_only_folder}  # fmt: skip


@pytest.fixture(params=sorted(CASES))
def blocked(request, tmp_path):
    folder = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    message = CASES[request.param](folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    yield tmp_path, folder, message
    folder.chmod(0o755)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_check_says_what_will_stop_fix_and_what_to_do(blocked, capsys, monkeypatch):
    root, _, message = blocked
    code, out, _ = run_in(capsys, monkeypatch, root, "check", "m")
    assert code == 1
    assert "  fix           eos_token_id -> [248044, 248046]\n" in out
    assert f"  cannot write  {message}; then run: eosfix fix m\n" in out
    assert "(run: eosfix fix m)" not in out
    code, out, _ = run_in(capsys, monkeypatch, root, "check", "--format", "json", "m")
    assert code == 1
    document = json.loads(out)
    valid(CHECK, document)
    assert document["repos"][0]["blocked"] == message


def test_fix_refuses_with_the_same_words(blocked, capsys, monkeypatch):
    root, _, message = blocked
    code, _, err = run_in(capsys, monkeypatch, root, "fix", "m")
    assert code == 2
    assert err.startswith(f"error: {message}\n")


def test_fix_diff_agrees_with_fix(blocked, capsys, monkeypatch):
    root, _, message = blocked
    code, out, err = run_in(capsys, monkeypatch, root, "fix", "--diff", "m")
    assert (code, out) == (2, "")
    assert f"error: {message}" in err


def test_a_writable_folder_gets_no_such_line(tmp_path, capsys, monkeypatch):
    copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "--format", "json", "m")
    assert code == 1
    assert "blocked" not in json.loads(out)["repos"][0]
    assert os.access(tmp_path / "m", os.W_OK)


def test_a_symlinked_gguf_check_says_fix_needs_output(tmp_path, capsys, monkeypatch):
    from tests.support.ggufs import command_r

    command_r(tmp_path / "real.gguf")
    (tmp_path / "link.gguf").symlink_to("real.gguf")
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "link.gguf")
    assert code == 1
    assert (
        "  cannot write  link.gguf: is a symlink; refusing to write through it (its target may "
        "be shared): write a new file instead: eosfix fix link.gguf --output link-fixed.gguf\n"
    ) in out
    code, _, err = run_in(capsys, monkeypatch, tmp_path, "fix", "link.gguf")
    assert code == 2
    assert "link.gguf: is a symlink; refusing to write through it" in err
