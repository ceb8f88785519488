"""A JSON number too long for Python's int (more than 4,300 digits: ``sys.int_info``'s
``default_max_str_digits``) is one repo's error line, in every command: the file named, exit 2,
no traceback, nothing written, and every other repo of the batch still reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosfix.cli import main
from tests.conftest import SAMPLES, copy_repo
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.longints import DIGITS, long_added_token_id, long_member

CASES = [
    ("chatml-missing-im-end", "generation_config.json", long_member),
    ("chatml-missing-im-end", "config.json", long_member),
    ("chatml-missing-im-end", "tokenizer_config.json", long_member),
    ("ordinary-stop-id", "tokenizer.json", long_added_token_id),
]


def _run(capsys, *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize(("sample", "name", "corrupt"), CASES)
def test_a_long_integer_is_one_error_line_naming_the_file(
    tmp_path, capsys, command, sample, name, corrupt
):
    root = copy_repo(SAMPLES / sample, tmp_path / "repo")
    (root / name).write_bytes(corrupt((root / name).read_bytes()))
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    code, out, err = _run(capsys, command, root)
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {root / name}: invalid JSON: "), line
    assert f"{DIGITS} digits" in line
    assert " at line " in line
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before


def test_check_reports_the_other_folders(tmp_path, capsys):
    bad = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "bad")
    gen = bad / "generation_config.json"
    gen.write_bytes(long_member(gen.read_bytes()))
    good = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "good")
    broken = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "broken")
    code, out, err = _run(capsys, "check", "--format", "json", good, bad, broken)
    assert code == 2
    assert "Traceback" not in out + err
    repos = {Path(r["path"]).name: r for r in json.loads(out)["repos"]}
    assert repos["good"]["status"] == "ok"
    assert repos["broken"]["status"] == "fixable"
    assert "5000 digits" in repos["bad"]["error"]


def test_cache_reports_the_other_repos(tmp_path, capsys):
    b = CacheBuilder(tmp_path / "hub")
    bad = chatml_files(1000)
    bad["generation_config.json"] = long_member(bad["generation_config.json"])
    b.add_revision("org/long", bad)
    b.add_revision("org/broken", chatml_files(2000))
    b.add_revision("org/good", chatml_files(3000, healthy=True))
    code, out, err = _run(capsys, "cache", "--cache-dir", tmp_path / "hub", "--format", "json")
    assert code == 2, err
    assert "Traceback" not in out + err
    entries = {e["repo_id"]: e for e in json.loads(out)["repos"]}
    assert entries["org/good"]["verdict"] == "ok"
    assert entries["org/broken"]["verdict"] == "fixable"
    assert entries["org/long"]["verdict"] == "error"
    assert "generation_config.json" in entries["org/long"]["error"]
    assert f"{DIGITS} digits" in entries["org/long"]["error"]
    code, out, err = _run(capsys, "cache", "--cache-dir", tmp_path / "hub")
    assert code == 2
    assert "org/good" in out
    assert "org/broken" in out
    assert "Traceback" not in out + err


def test_hub_author_reports_the_other_repos(fake_hub, capsys):
    bad = chatml_files(1000)
    bad["config.json"] = long_member(bad["config.json"])
    fake_hub.add_repo("org/long", bad)
    fake_hub.add_repo("org/broken", chatml_files(2000))
    fake_hub.add_repo("org/good", chatml_files(3000, healthy=True))
    code, out, err = _run(capsys, "hub", "--author", "org", "--format", "json")
    assert code == 2, err
    assert "Traceback" not in out + err
    entries = {e["repo_id"]: e for e in json.loads(out)["repos"]}
    assert entries["org/good"]["verdict"] == "ok"
    assert entries["org/broken"]["verdict"] == "fixable"
    assert entries["org/long"]["verdict"] == "error"
    assert "config.json" in entries["org/long"]["error"]
    assert f"{DIGITS} digits" in entries["org/long"]["error"]


def test_ollama_reports_the_other_models(tmp_path, capsys):
    """A model's params blob (the Hub's ``params`` file for ``ollama run hf.co/...``) with a
    long integer is that model's error line."""
    from tests.support.ggufs import chatml
    from tests.support.ollama import add_model, four_model_store

    store = four_model_store(tmp_path)
    add_model(store, "long:latest", chatml(tmp_path / "src" / "l.gguf"), {"num_ctx": 1})
    params = next(
        p
        for p in (store / "blobs").iterdir()
        if p.read_bytes() == json.dumps({"num_ctx": 1}).encode()
    )
    params.write_bytes(long_member(params.read_bytes()))
    code, out, err = _run(capsys, "ollama", "--models", store)
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert "qwen:latest" in out
    (line,) = [line for line in out.splitlines() if "long:latest" in line]
    assert f"invalid JSON: a number of {DIGITS} digits" in line
