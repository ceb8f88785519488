"""The pre-commit hook (.pre-commit-hooks.yaml), run by the real pre-commit via try-repo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eosfix.core.repo import RELEVANT_FILES, TEMPLATE_DIR, TOKENIZER_JSON, is_relevant_file
from tests.conftest import ROOT, SAMPLES, copy_repo

MANIFEST = ROOT / ".pre-commit-hooks.yaml"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "eosfix tests",
    "GIT_AUTHOR_EMAIL": "tests@eosfix.invalid",
    "GIT_COMMITTER_NAME": "eosfix tests",
    "GIT_COMMITTER_EMAIL": "tests@eosfix.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def _commit_all(repo: Path) -> None:
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "snapshot", "--no-verify")


def _snapshot_working_tree(dst: Path) -> Path:
    """This checkout as it is now (uncommitted edits included), committed in a fresh repo.

    try-repo clones a repo at a commit; snapshotting lets the test run on uncommitted
    changes and in CI's clean checkout alike.
    """
    if (ROOT / ".git").exists():
        listed = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        for rel in filter(None, listed.split("\0")):
            src = ROOT / rel
            if src.is_file():
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst / rel)
    else:  # an sdist or a plain copy
        shutil.copytree(
            ROOT,
            dst,
            ignore=shutil.ignore_patterns(".git", ".venv", "*cache*", "*.egg-info", "__pycache__"),
        )
    _commit_all(dst)
    return dst


def test_manifest_is_valid_for_pre_commit():
    from pre_commit.clientlib import load_manifest  # type: ignore[import-untyped]

    (hook,) = load_manifest(str(MANIFEST))
    assert hook["id"] == "eosfix"
    assert hook["entry"] == "eosfix fix"
    assert hook["language"] == "python"
    assert hook["require_serial"] is True
    files = re.compile(hook["files"])
    for name in (
        "config.json",
        "generation_config.json",
        "m/tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "processor_config.json",
        "chat_template.jinja",
        "m/additional_chat_templates/tool_use.jinja",
    ):
        assert files.search(name), name
    for name in ("tokenizer.json", "model.safetensors", "myconfig.json", "README.md"):
        assert not files.search(name), name


def test_manifest_files_are_the_relevant_files_table():
    """The hook's ``files:`` runs it on exactly the files eosfix reads first
    (``eosfix.core.repo.RELEVANT_FILES``) and on templates: none missed, nothing else."""
    from pre_commit.clientlib import load_manifest  # type: ignore[import-untyped]

    (hook,) = load_manifest(str(MANIFEST))
    files = re.compile(hook["files"])
    templates = ("chat_template.jinja", f"{TEMPLATE_DIR}/tool_use.jinja")
    for name in (*RELEVANT_FILES, *templates):
        for path in (name, f"models/chat/{name}"):
            assert files.search(path), path
    others = (
        TOKENIZER_JSON,  # read only when an id is only there; it does not decide the fix
        "model.safetensors",
        "README.md",
        "vocab.json",
        "tokenizer.model",
        "preprocessor_config.json",
        "myconfig.json",
        "config.json.bak",
        "chat_template.json.orig",
    )
    for name in others:
        assert not files.search(name), name
        assert not is_relevant_file(name), name
    # the .json names the pattern lists are the table's, no more
    listed = re.search(r"\(\^\|/\)\(([\w|]+)\)\\\.json\$", hook["files"])
    assert listed is not None, hook["files"]
    table = {n.removesuffix(".json") for n in RELEVANT_FILES if n.endswith(".json")}
    assert set(listed.group(1).split("|")) == table


@pytest.mark.slow
def test_try_repo_fixes_then_passes(tmp_path):
    """Real pre-commit: a virtualenv with eosfix pip-installed (needs PyPI; ~1 minute)."""
    hook_repo = _snapshot_working_tree(tmp_path / "eosfix-src")
    model = tmp_path / "model-repo"
    model.mkdir()
    copy_repo(SAMPLES / "chatml-missing-im-end", model / "chat")
    copy_repo(SAMPLES / "llama3-healthy", model / "llama")
    (model / "README.md").write_text("# models\n")
    _commit_all(model)
    env = {
        **os.environ,
        **_GIT_ENV,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "pre_commit",
        "try-repo",
        str(hook_repo),
        "eosfix",
        "--all-files",
        "--color",
        "never",
    ]

    first = subprocess.run(
        cmd, check=False, cwd=model, env=env, capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert "Failed" in first.stdout
    assert "files were modified by this hook" in first.stdout
    assert "Fixing chat/generation_config.json" in first.stdout
    fixed = SAMPLES / "chatml-missing-im-end" / "fixed" / "generation_config.json"
    assert (model / "chat" / "generation_config.json").read_bytes() == fixed.read_bytes()
    assert _git(model, "status", "--porcelain").split() == ["M", "chat/generation_config.json"]

    _git(model, "add", "-A")
    second = subprocess.run(
        cmd, check=False, cwd=model, env=env, capture_output=True, text=True, timeout=900
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout
