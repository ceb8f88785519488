"""Malformed input: exit 2, one `error:` line naming the file, no traceback, nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eosfix.cli import main
from tests.conftest import SAMPLES, copy_repo

SAMPLE = "chatml-missing-im-end"


def _set(name: str, data: bytes):
    def corrupt(root: Path) -> str:
        (root / name).write_bytes(data)
        return name

    return corrupt


def _gen_eos(value: object):
    return _set("generation_config.json", json.dumps({"eos_token_id": value}).encode())


def _tok_key(key: str, value: object):
    def corrupt(root: Path) -> str:
        path = root / "tokenizer_config.json"
        data = json.loads(path.read_text())
        data[key] = value
        path.write_text(json.dumps(data))
        return path.name

    return corrupt


def _huge_tokenizer_config(root: Path) -> str:
    with (root / "tokenizer_config.json").open("r+b") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, instant to make
    return "tokenizer_config.json"


def _dangling_symlink(root: Path) -> str:
    (root / "generation_config.json").unlink()
    (root / "generation_config.json").symlink_to(root / "missing-blob")
    return "generation_config.json"


def _directory(root: Path) -> str:
    (root / "tokenizer_config.json").unlink()
    (root / "tokenizer_config.json").mkdir()
    return "tokenizer_config.json"


CASES = {
    # a generation_config.json or special_tokens_map.json that is not JSON is read past, as
    # runtimes do (EOS020: tests/containers/folder/test_refusals_unreadable.py); any other file
    # refuses
    "invalid-json": _set("tokenizer_config.json", b'{"eos_token": [1,}\n'),
    "truncated-json": _set("config.json", b'{"eos_token_id": 2'),
    "top-level-list": _set("generation_config.json", b"[1, 2]\n"),
    # generation_config.json's "2", 2.0, -1, ["a"] are read and rewritten as ids (EOS018,
    # EOS013: tests/containers/folder/test_refusals_eos_types.py); an object is no id at all
    "eos-an-object": _gen_eos({"id": 2}),
    "eos-an-object-in-a-list": _gen_eos([2, {"id": 2}]),
    "config-eos-as-string": _set("config.json", json.dumps({"eos_token_id": "2"}).encode()),
    "eos-huge-list": _gen_eos(list(range(5000))),
    "chat-template-not-a-string": _tok_key("chat_template", 42),
    "added-tokens-decoder-a-list": _tok_key("added_tokens_decoder", ["<s>"]),
    "added-tokens-decoder-bad-key": _tok_key(
        "added_tokens_decoder", {"x": {"content": "<s>", "special": True}}
    ),
    "eos-token-a-number": _tok_key("eos_token", 7),
    "non-utf8": _set("tokenizer_config.json", b'{"eos_token": "\xff\xfe"}'),
    "non-utf8-template": _set("chat_template.jinja", b"{{ '\xc3\x28' }}"),
    "empty-file": _set("config.json", b""),
    "whitespace-file": _set("tokenizer_config.json", b"  \n"),
    "nested-too-deep": _set("config.json", b"[" * 100_000 + b"]" * 100_000),
    "huge-tokenizer-config": _huge_tokenizer_config,
    "invalid-jinja": _set("chat_template.jinja", b"{% if messages %}{{ x }"),
    "jinja-unknown-filter": _set("chat_template.jinja", b"{{ x|no_such_filter }}"),
    "jinja-nested-too-deep": _set(
        "chat_template.jinja", b"{{ " + b"(" * 5000 + b")" * 5000 + b" }}"
    ),
    "template-too-large": _set("chat_template.jinja", b"x" * 1_100_000),
    "dangling-symlink": _dangling_symlink,
    "directory-not-file": _directory,
}


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = None
    return out


def _assert_one_error_line(code: int, out: str, err: str, name: str) -> None:
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:"), err
    assert name in lines[0], err


@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("case", list(CASES))
def test_malformed_input_is_one_line_and_untouched(tmp_path, capsys, case, command):
    root = copy_repo(SAMPLES / SAMPLE, tmp_path / "repo")
    name = CASES[case](root)
    before = _snapshot(root)
    code = main([command, str(root)])
    out, err = capsys.readouterr()
    _assert_one_error_line(code, out, err, name)
    assert _snapshot(root) == before


@pytest.mark.parametrize("command", ["check", "fix"])
def test_unreadable_file_is_named(tmp_path, capsys, monkeypatch, command):
    root = copy_repo(SAMPLES / SAMPLE, tmp_path / "repo")
    before = _snapshot(root)
    real = os.open  # repo files are read through os.open (eosfix.core.saferead)

    def os_open(path, *args, **kwargs):
        if Path(path).name == "tokenizer_config.json":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    code = main([command, str(root)])
    out, err = capsys.readouterr()
    monkeypatch.undo()
    _assert_one_error_line(code, out, err, "tokenizer_config.json")
    assert "permission denied" in err
    assert _snapshot(root) == before


def test_read_only_generation_config_is_refused_by_fix(tmp_path, capsys):
    root = copy_repo(SAMPLES / SAMPLE, tmp_path / "repo")
    (root / "generation_config.json").chmod(0o444)
    before = _snapshot(root)
    assert main(["check", str(root)]) == 1  # reading is fine: it reports the finding
    capsys.readouterr()
    code = main(["fix", str(root)])
    out, err = capsys.readouterr()
    _assert_one_error_line(code, out, err, "generation_config.json")
    assert "read-only" in err
    assert _snapshot(root) == before


@pytest.mark.parametrize("blocked", ["config.json", "generation_config.json"])
def test_config_json_fix_is_all_or_nothing(tmp_path, capsys, blocked):
    """With --config-json two files change: one that cannot be written stops both."""
    root = copy_repo(SAMPLES / SAMPLE, tmp_path / "repo")
    (root / blocked).chmod(0o444)
    before = _snapshot(root)
    code = main(["fix", "--config-json", str(root)])
    out, err = capsys.readouterr()
    _assert_one_error_line(code, out, err, blocked)
    assert _snapshot(root) == before


def test_internal_error_exits_3_with_hint(tmp_path, capsys, monkeypatch):
    root = copy_repo(SAMPLES / SAMPLE, tmp_path / "repo")
    monkeypatch.delenv("EOSFIX_DEBUG", raising=False)

    def boom(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr("eosfix.decide.check.check", boom)
    assert main(["check", str(root)]) == 3
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error: RuntimeError: boom" in err
    assert "EOSFIX_DEBUG=1" in err
    monkeypatch.setenv("EOSFIX_DEBUG", "1")
    assert main(["check", str(root)]) == 3
    _, err = capsys.readouterr()
    assert "Traceback" in err
    assert "RuntimeError: boom" in err


def test_failure_on_the_second_file_rolls_back_the_first(tmp_path, monkeypatch):
    """--config-json writes two files: an unforeseen failure on the second (disk full) puts
    the first back byte for byte."""
    import shutil

    import eosfix.api
    import eosfix.core.fileio
    from eosfix.core.errors import WriteError
    from tests.conftest import SAMPLES

    repo = tmp_path / "repo"
    shutil.copytree(
        SAMPLES / "chatml-missing-im-end",
        repo,
        ignore=shutil.ignore_patterns("fixed", "expected.txt"),
    )
    before = {p.name: p.read_bytes() for p in repo.iterdir()}
    real = eosfix.core.fileio.write_if_changed

    def fail_on_config(path, text, **kwargs):
        if path.name == "config.json":
            raise WriteError("No space left on device", path=path)
        return real(path, text, **kwargs)

    monkeypatch.setattr(eosfix.core.fileio, "write_if_changed", fail_on_config)
    result = eosfix.api.fix(repo, config_json=True)
    assert isinstance(result.error, WriteError)
    assert {p.name: p.read_bytes() for p in repo.iterdir()} == before
