"""What every command that takes a target does with the text around it: an empty argument is
refused with one line naming it (never read as the current folder), and whitespace around a
target is dropped as the target grammar drops it (``hf.co/ORG/REPO:Q4_K_M `` pasted with
its trailing space names the same file, and the output names it without the space).

Commands: check, fix, explain, render, goldens, diagnose, hub, upload (REPO_ID and FOLDER),
cache --repo. Against the stand-in Hub; the working folder is a model folder, so an empty
argument taken for ``.`` would show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eosfix.cli import main
from tests.conftest import SAMPLES, copy_repo
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.hubrepos import BROKEN_REPO, HEALTHY_REPO
from tests.support.hubserver import GGUF_ORG

GGUF_QUANT = f"hf.co/{GGUF_ORG}/Chat-7B-GGUF:Q4_K_M"
BLANKS = ("", "   ")
# each command that takes a target, with what else it needs
TARGET_COMMANDS = {
    "check": ["check"],
    "fix": ["fix"],
    "explain": ["explain"],
    "render": ["render"],
    "render json": ["render", "--format", "json"],
    "goldens": ["goldens"],
    "diagnose": ["diagnose", "--ids", "1,2"],
    "hub": ["hub"],
}


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _unshared(answer):
    """An answer without what a second run saves (hub's requests: the files are kept)."""
    code, out, err = answer
    return code, re.sub(r"; \d+ requests? for listings and files", "", out), err


@pytest.fixture
def here(gguf_org, hub_repos, tmp_path, monkeypatch):
    """The stand-in Hub (a GGUF publisher, BROKEN_REPO), the working folder a healthy model
    folder."""
    folder = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "cwd")
    monkeypatch.chdir(folder)
    return gguf_org


@pytest.mark.parametrize("blank", BLANKS, ids=["empty", "spaces"])
@pytest.mark.parametrize("command", list(TARGET_COMMANDS))
def test_an_empty_target_is_one_line_naming_it_never_the_current_folder(
    here, capsys, command, blank
):
    code, out, err = _run(capsys, *TARGET_COMMANDS[command], blank)
    assert code == 2, (out, err)
    assert "<|eot_id|>" not in out + err  # the working folder's terminator: never read
    (line,) = [ln for ln in err.splitlines() if "empty" in ln]
    assert line.startswith(("''", "error: ''")), line
    assert not here.commits_received


@pytest.mark.parametrize("fmt", ["json", "github", "sarif"])
def test_an_empty_target_is_not_named_as_the_current_folder_in_any_format(here, capsys, fmt):
    code, out, _ = _run(capsys, "check", "--format", fmt, "")
    assert code == 2
    if fmt == "json":
        (repo,) = json.loads(out)["repos"]
        assert (repo["path"], repo["name"]) == ("''", "''")
    elif fmt == "github":
        assert out.startswith("::error file='',"), out
    else:
        uris = [
            loc["physicalLocation"]["artifactLocation"]["uri"]
            for run in json.loads(out)["runs"]
            for result in run["results"]
            for loc in result.get("locations", ())
        ]
        assert "." not in uris


def test_hub_names_an_empty_id_as_given_in_text_and_json(here, capsys):
    code, out, err = _run(capsys, "hub", "", BROKEN_REPO)
    assert code == 2
    assert "'': error: empty: give a Hub repo id" in err.splitlines()
    code, out, _ = _run(capsys, "hub", "--format", "json", "", BROKEN_REPO)
    assert [r["repo_id"] for r in json.loads(out)["repos"]] == ["''", BROKEN_REPO]


@pytest.mark.parametrize("blank", BLANKS, ids=["empty", "spaces"])
@pytest.mark.parametrize("order", ["repo first", "folder first"])
def test_upload_refuses_an_empty_folder_and_uploads_nothing(here, capsys, blank, order):
    """``eosfix upload org/new ""`` (an unset shell variable) uploaded the working folder."""
    args = ["org/new", blank] if order == "repo first" else [blank, "org/new"]
    code, _, err = _run(capsys, "upload", *args)
    assert code == 2
    assert "empty" in err
    assert not here.commits_received


@pytest.mark.parametrize("blank", BLANKS, ids=["empty", "spaces"])
def test_upload_refuses_an_empty_repo_id(here, capsys, blank):
    code, _, err = _run(capsys, "upload", blank, ".")
    assert code == 2
    assert "Invalid value for 'REPO_ID': '': empty: give a Hub repo id" in err
    assert not here.commits_received


@pytest.mark.parametrize("pad", [" {} ", "{} ", "\t{}\n"], ids=["around", "after", "tab-newline"])
@pytest.mark.parametrize("target", [GGUF_QUANT, BROKEN_REPO], ids=["gguf-quant", "folder-repo"])
@pytest.mark.parametrize("command", list(TARGET_COMMANDS))
def test_whitespace_around_a_target_is_dropped_everywhere(here, capsys, command, target, pad):
    """The same output, byte for byte, as without the whitespace (render and diagnose named
    the target with its trailing space)."""
    args = TARGET_COMMANDS[command]
    plain = _run(capsys, *args, target)
    assert plain[0] in (0, 1, 2)
    if command != "fix":  # fix refuses a Hub target (pointing to a pull request)
        assert plain[0] != 2, plain
    padded = _run(capsys, *args, pad.format(target))
    assert _unshared(padded) == _unshared(plain)


def test_upload_drops_whitespace_around_the_repo_id_and_the_folder(here, capsys, tmp_path):
    folder = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "out")
    (folder / "README.md").write_text("a new upload\n")  # something to commit
    code, out, err = _run(capsys, "upload", f" {HEALTHY_REPO} ", f"{folder} ")
    assert code == 0, err
    assert [c["repo_id"] for c in here.commits_received] == [HEALTHY_REPO]
    assert HEALTHY_REPO in out


def test_a_folder_whose_name_ends_in_a_space_is_still_that_folder(here, capsys, tmp_path):
    """Whitespace is dropped only when no path has it, as the grammar does."""
    folder = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "out ")
    (folder / "README.md").write_text("a new upload\n")
    code, _, err = _run(capsys, "upload", HEALTHY_REPO, str(folder))
    assert code == 0, err
    assert [c["repo_id"] for c in here.commits_received] == [HEALTHY_REPO]


@pytest.mark.parametrize("pad", [" {} ", "{}\t"], ids=["around", "tab"])
def test_cache_repo_drops_whitespace_around_the_repo(tmp_path, capsys, pad):
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/chat", chatml_files(1000))
    b.add_revision("org/other", chatml_files(2000, healthy=True))
    args = ["cache", "--cache-dir", str(b.root), "--format", "json", "--repo"]
    plain = _run(capsys, *args, "org/chat")
    padded = _run(capsys, *args, pad.format("org/chat"))
    assert padded == plain
    assert [r["repo_id"] for r in json.loads(plain[1])["repos"]] == ["org/chat"]


@pytest.mark.parametrize("blank", BLANKS, ids=["empty", "spaces"])
def test_cache_repo_empty_matches_nothing_and_says_so(tmp_path, capsys, blank):
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/chat", chatml_files(1000))
    code, out, err = _run(capsys, "cache", "--cache-dir", str(b.root), "--repo", blank)
    assert code == 2
    assert "no cached model repo matches --repo" in err
    assert "org/chat" not in out


def test_the_working_folder_is_a_model_folder(here, capsys):
    """What the tests above rely on: ``.`` checked names <|eot_id|>."""
    code, out, _ = _run(capsys, "check", ".")
    assert code == 0
    assert "<|eot_id|>" in out
    assert Path.cwd().name == "cwd"
