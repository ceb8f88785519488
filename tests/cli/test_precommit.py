"""The pre-commit hook (.pre-commit-hooks.yaml), run by the real pre-commit via try-repo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosfix.core.repo import READ_FILES, TEMPLATE_DIR, is_read_file
from tests.conftest import ROOT, SAMPLES, copy_repo
from tests.support.wheelhouse import wheelhouse

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
    assert hook["entry"] == "eosfix fix --quiet"  # quiet on healthy repos
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
        "m/tokenizer.json",  # its added tokens decide ids, specials and the converter's eos
    ):
        assert files.search(name), name
    for name in ("model.safetensors", "myconfig.json", "README.md"):
        assert not files.search(name), name


def test_manifest_files_are_the_read_files_table():
    """The hook's ``files:`` runs it on exactly the files a check may read
    (``eosfix.core.repo.READ_FILES``: tokenizer.json too, whose added tokens decide ids) and
    on templates: none missed, nothing else."""
    from pre_commit.clientlib import load_manifest  # type: ignore[import-untyped]

    (hook,) = load_manifest(str(MANIFEST))
    files = re.compile(hook["files"])
    templates = ("chat_template.jinja", f"{TEMPLATE_DIR}/tool_use.jinja")
    for name in (*READ_FILES, *templates):
        for path in (name, f"models/chat/{name}"):
            assert files.search(path), path
    others = (
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
        assert not is_read_file(name), name
    # the .json names the pattern lists are the table's, no more
    listed = re.search(r"\(\^\|/\)\(([\w|]+)\)\\\.json\$", hook["files"])
    assert listed is not None, hook["files"]
    table = {n.removesuffix(".json") for n in READ_FILES if n.endswith(".json")}
    assert set(listed.group(1).split("|")) == table


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This checkout committed in a fresh repo and tagged as docs/ci.md's ``rev:``, which each
    test below has pre-commit clone and install as a user's would."""
    from eosfix import __version__

    root = tmp_path_factory.mktemp("pre-commit")
    repo = _snapshot_working_tree(root / "eosfix-src")
    _git(repo, "tag", f"v{__version__}")
    return repo


# A hook virtualenv is some 3,000 files (pre-commit's clone, pip's build environment and
# eosfix's build, every dependency unpacked), thrown away after the test. Created on a disk
# each costs about 0.2 ms of kernel time here (ext4), on a tmpfs 0.01 ms.
_MEMORY = Path("/dev/shm")


@pytest.fixture
def pre_commit_tmp(tmp_path) -> Iterator[Path]:
    """Where pre-commit keeps its store and pip its temporary folders for one test: on a
    tmpfs when there is one, else in the test's folder."""
    if _MEMORY.is_dir() and os.access(_MEMORY, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="eosfix-pre-commit-", dir=_MEMORY))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path / "pre-commit"


def _pre_commit_env(scratch: Path) -> dict[str, str]:
    """pre-commit's environment: its own store and temporary folders under ``scratch``, and a
    pip and virtualenv set up so that the hook's virtualenv costs what eosfix's install does
    and no more.

    The hook's ``pip install .`` still builds eosfix from the clone (its build requirements in
    an isolated environment) and resolves its declared dependencies: against the wheelhouse
    pip wheel made from those very requirements (tests/support/wheelhouse.py) instead of the
    index's pages. Bytecode is compiled when a module is first imported rather than for every
    file of every dependency at install; pip is linked from virtualenv's app data rather than
    copied, and no setuptools is seeded (the build has its own, the hook imports none)."""
    (scratch / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        **_GIT_ENV,
        "PRE_COMMIT_HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),  # try-repo's store, pip's build environment
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheelhouse()),
        "PIP_COMPILE": "0",  # --no-compile (PIP_NO_COMPILE=0 would say the same, inverted)
        "VIRTUALENV_SYMLINK_APP_DATA": "1",
        "VIRTUALENV_NO_SETUPTOOLS": "1",
    }


@pytest.mark.slow
@pytest.mark.package_index  # the hook's virtualenv pip-installs eosfix's dependencies
def test_try_repo_fixes_then_passes(hook_repo, pre_commit_tmp, tmp_path):
    """Real pre-commit: try-repo clones the hook repo and makes a virtualenv with eosfix
    pip-installed, in a store of its own each run (so twice here); the wheelhouse of eosfix's
    dependencies is made from the index the first time on a machine."""
    from eosfix import __version__

    model = tmp_path / "model-repo"
    model.mkdir()
    copy_repo(SAMPLES / "chatml-missing-im-end", model / "chat")
    copy_repo(SAMPLES / "llama3-healthy", model / "llama")
    (model / "README.md").write_text("# models\n")
    _commit_all(model)
    env = _pre_commit_env(pre_commit_tmp)
    cmd = [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "eosfix",
           "--ref", f"v{__version__}", "--all-files", "--color", "never"]  # fmt: skip

    first = subprocess.run(
        cmd, check=False, cwd=model, env=env, capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert "Failed" in first.stdout
    assert "files were modified by this hook" in first.stdout
    assert "Fixing chat/generation_config.json" in first.stdout
    assert "<|eot_id|>" not in first.stdout  # quiet about the healthy repo
    fixed = SAMPLES / "chatml-missing-im-end" / "fixed" / "generation_config.json"
    assert (model / "chat" / "generation_config.json").read_bytes() == fixed.read_bytes()
    assert _git(model, "status", "--porcelain").split() == ["M", "chat/generation_config.json"]

    _git(model, "add", "-A")
    second = subprocess.run(
        cmd, check=False, cwd=model, env=env, capture_output=True, text=True, timeout=900
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout


def _readme_precommit_config() -> str:
    readme = (ROOT / "docs" / "ci.md").read_text()
    section = readme[readme.index("## Use as a pre-commit hook") :]
    block = re.search(r"```yaml\n(.*?)\n```", section, re.DOTALL)
    assert block is not None
    return block.group(1) + "\n"


def test_readme_snippet_names_the_released_tag():
    """The ``rev:`` of docs/ci.md's snippet is the tag of this version (v0.1.0 did
    not exist)."""
    from eosfix import __version__

    rev = re.search(r"^\s+rev: (\S+)", _readme_precommit_config(), re.MULTILINE)
    assert rev is not None
    assert rev.group(1) == f"v{__version__}"


def test_the_readme_tag_exists_in_this_checkout():
    """The tag docs/ci.md names is in the repository (skipped outside a git checkout, and in
    a clone made without tags)."""
    from eosfix import __version__

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tags = _git(ROOT, "tag", "--list").split()
    if not tags:
        pytest.skip("a clone without tags")
    assert f"v{__version__}" in tags
    listed = _git(ROOT, "ls-tree", "--name-only", f"v{__version__}")
    assert ".pre-commit-hooks.yaml" in listed.split()


@pytest.mark.slow
@pytest.mark.package_index  # the hook's virtualenv pip-installs eosfix's dependencies
def test_readme_snippet_runs_with_real_pre_commit(hook_repo, pre_commit_tmp, tmp_path):
    """The .pre-commit-config.yaml of docs/ci.md, its repo URL pointed at a local clone tagged as
    its rev: the hook fixes, stays quiet about healthy repos, and takes [tool.eosfix]
    from the project's pyproject.toml."""
    config = re.sub(r"(?m)^(\s+- repo: )\S+.*$", rf"\g<1>{hook_repo}", _readme_precommit_config())
    model = tmp_path / "model-repo"
    model.mkdir()
    copy_repo(SAMPLES / "chatml-missing-im-end", model / "chat")
    copy_repo(SAMPLES / "llama3-healthy", model / "llama")
    copy_repo(SAMPLES / "plain-text-turns", model / "alpaca")  # a warning (EOS005) only
    (model / ".pre-commit-config.yaml").write_text(config)
    (model / "pyproject.toml").write_text("[tool.eosfix]\nstrict = true\n")
    _commit_all(model)
    env = _pre_commit_env(pre_commit_tmp)
    cmd = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cmd, check=False, cwd=model, env=env, capture_output=True, text=True, timeout=900
        )

    first = run()
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert "Fixing chat/generation_config.json" in first.stdout
    assert "<|eot_id|>" not in first.stdout  # --quiet: the healthy repo is not shown
    _git(model, "add", "-A")
    second = run()  # strict = true in [tool.eosfix]: the warning fails the hook
    assert second.returncode == 1, second.stdout + second.stderr
    assert "EOS005" in second.stdout
    assert "files were modified" not in second.stdout
    (model / "pyproject.toml").write_text("[tool.eosfix]\nstrict = false\n")
    third = run()
    assert third.returncode == 0, third.stdout + third.stderr
    assert "Passed" in third.stdout
