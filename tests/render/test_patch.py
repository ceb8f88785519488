"""``fix --diff`` prints a patch that applies: the diff alone on stdout, paths relative to the
current folder, the report on stderr (two ``--- a/generation_config.json`` with no
folder, mixed with the report, did not apply). Checked with real git."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support import ggufs

GEN = "generation_config.json"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, check=False
    )


@pytest.fixture
def project(tmp_path):
    """A git work tree with three repos to fix: one in a subfolder, one whose
    generation_config.json is missing (created), one with CRLF newlines and a BOM (which the
    fix removes); and a healthy one."""
    root = tmp_path / "project"
    root.mkdir()
    copy_repo(SAMPLES / "chatml-missing-im-end", root / "chat")
    copy_repo(SAMPLES / "named-templates", root / "models" / "llama")
    created = copy_repo(SAMPLES / "chatml-missing-im-end", root / "models" / "created")
    (created / GEN).unlink()
    crlf = copy_repo(SAMPLES / "chatml-missing-im-end", root / "crlf")
    text = (crlf / GEN).read_text()
    (crlf / GEN).write_bytes(("\ufeff" + text.replace("\n", "\r\n")).encode())
    copy_repo(SAMPLES / "llama3-healthy", root / "healthy")
    assert _git(root, "init", "-q").returncode == 0
    return root


REPOS = ("chat", "models/llama", "models/created", "crlf", "healthy")


def test_fix_diff_applies_with_git_and_equals_what_fix_writes(
    project, tmp_path, capsys, monkeypatch
):
    twin = tmp_path / "twin"  # the same repos, fixed by `eosfix fix`
    shutil.copytree(project, twin)
    code, patch, err = run_in(capsys, monkeypatch, project, "fix", "--diff", *REPOS)
    assert code == 1
    # only the patch on stdout: every line is a diff line
    assert patch.startswith(
        "--- a/chat/generation_config.json\n+++ b/chat/generation_config.json\n"
    )
    assert "--- a/models/llama/generation_config.json\n" in patch
    assert "--- /dev/null\n+++ b/models/created/generation_config.json\n" in patch
    assert "healthy" not in patch
    assert all(line[:1] in "-+ @\\" for line in patch.splitlines()), patch
    # the report on stderr
    assert "4 repos would be fixed, 1 repo stops correctly" in err
    assert "chat/generation_config.json: EOS001" in err

    check = _git(project, "apply", "--check", "-", stdin=patch)
    assert check.returncode == 0, check.stderr
    assert _git(project, "apply", "-", stdin=patch).returncode == 0
    assert run_in(capsys, monkeypatch, twin, "fix", *REPOS)[0] == 1
    for repo in REPOS:
        assert (project / repo / GEN).read_bytes() == (twin / repo / GEN).read_bytes(), repo
    # CRLF kept; the byte-order mark goes (runtimes refuse it: EOS017), in the patch too
    assert (project / "crlf" / GEN).read_bytes().startswith(b"{\r\n")
    assert run_in(capsys, monkeypatch, project, "check", *REPOS)[0] == 0


def test_fix_diff_paths_are_relative_to_the_current_folder(project, capsys, monkeypatch):
    """Run from a subfolder, given a path through its parent: git apply, run there, takes it."""
    code, patch, _ = run_in(
        capsys, monkeypatch, project / "models", "fix", "--diff", "llama", "../chat"
    )
    assert code == 1
    assert "+++ b/llama/generation_config.json\n" in patch
    assert "+++ b/chat/generation_config.json\n" not in patch
    assert "+++ b/../chat/generation_config.json\n" in patch  # outside: git needs --unsafe-paths
    inside = patch[patch.index("--- a/llama/") :]
    inside = inside[: inside.index("--- a/../chat")] if "--- a/../chat" in inside else inside
    assert _git(project / "models", "apply", "--check", "-", stdin=inside).returncode == 0


def test_fix_diff_nothing_to_fix_prints_nothing_on_stdout(project, capsys, monkeypatch):
    code, out, err = run_in(capsys, monkeypatch, project, "fix", "--diff", "healthy")
    assert (code, out) == (0, "")
    assert "1 repo stops correctly" in err


def test_fix_diff_gguf_key_edits_go_to_stderr_and_stdout_still_applies(
    project, capsys, monkeypatch
):
    """A GGUF's key edits are binary: listed on stderr, left out of the patch."""
    ids = {"eos": "<|endoftext|>", "eot": "<|endoftext|>", "eom": "<|endoftext|>"}
    ggufs.glm(project / "glm.gguf", ids=ids, tensor=bytes(64))
    code, patch, err = run_in(capsys, monkeypatch, project, "fix", "--diff", "glm.gguf", "chat")
    assert code == 1
    assert "gguf" not in patch.lower()
    assert _git(project, "apply", "--check", "-", stdin=patch).returncode == 0
    assert "glm.gguf: not in the patch: a GGUF's metadata is binary" in err
    assert "+tokenizer.ggml.eot_token_id: " in err


@pytest.mark.parametrize("fmt", ["json", "github", "sarif"])
def test_fix_diff_with_a_machine_format_is_a_usage_error(project, capsys, monkeypatch, fmt):
    code, out, err = run_in(capsys, monkeypatch, project, "fix", "--diff", "--format", fmt, "chat")
    assert (code, out) == (2, "")
    assert "--diff prints a patch" in err
    assert "eosfix check --format json" in err


def _patch_p1(cwd, patch: str) -> subprocess.CompletedProcess:
    """GNU patch, as the docs tell a user without git to apply ``fix --diff``."""
    tool = shutil.which("patch")
    if tool is None:
        pytest.skip("needs GNU patch (Debian: apt-get install patch)")
    return subprocess.run(
        [tool, "-p1", "--batch", "--forward"], cwd=cwd, input=patch, capture_output=True,
        text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("tool", ["patch -p1", "git apply"])
def test_fix_diff_for_a_path_with_a_space_applies(tool, tmp_path, capsys, monkeypatch):
    """A file name with a space ends with a tab on the ---/+++ lines (as git and GNU diff
    write it): patch -p1 otherwise reads the name up to the space and finds no file."""
    root = tmp_path / "project"
    copy_repo(SAMPLES / "chatml-missing-im-end", root / "my models" / "chat")
    created = copy_repo(SAMPLES / "chatml-missing-im-end", root / "my models" / "new one")
    (created / GEN).unlink()
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    assert _git(root, "init", "-q").returncode == 0
    repos = ("my models/chat", "my models/new one")
    code, patch, _ = run_in(capsys, monkeypatch, root, "fix", "--diff", *repos)
    assert code == 1
    assert f"--- a/my models/chat/{GEN}\t\n+++ b/my models/chat/{GEN}\t\n" in patch
    assert f"--- /dev/null\n+++ b/my models/new one/{GEN}\t\n" in patch
    done = _patch_p1(root, patch) if tool == "patch -p1" else _git(root, "apply", "-", stdin=patch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert run_in(capsys, monkeypatch, twin, "fix", *repos)[0] == 1
    for repo in repos:
        assert (root / repo / GEN).read_bytes() == (twin / repo / GEN).read_bytes()
    assert not list(root.rglob("*.orig"))
    assert not list(root.rglob("*.rej"))
