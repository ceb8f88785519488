"""Shared fixtures: sample repos, the real-model corpus, a CLI runner, and a network guard."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosfix.cli import cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_repos"
CORPUS = Path(os.environ.get("EOSFIX_CORPUS", ROOT.parent / "shared" / "corpus"))

pytest_plugins = ["tests.hubserver"] if (ROOT / "tests" / "hubserver.py").exists() else []


def sample_names() -> list[str]:
    return sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())


def corpus_cases() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(p.name for p in CORPUS.iterdir() if (p / "expect.json").is_file())


def copy_repo(src: Path, dst: Path) -> Path:
    """Copy a repo folder (without the expectations) so tests never mutate the originals."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("fixed", "expected.txt"))
    for path in dst.rglob("*"):  # the corpus is read-only; the copy must be writable
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


@pytest.fixture
def sample_repo(tmp_path):
    """Factory: copy ``sample_repos/<name>`` into tmp_path and return the copy's path."""

    def _copy(name: str) -> Path:
        return copy_repo(SAMPLES / name, tmp_path / name)

    return _copy


@pytest.fixture
def run_eosfix():
    """Run the CLI in-process; returns the click Result (stdout and stderr kept apart)."""
    runner = CliRunner()

    def _run(*args: str):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return _run


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests never reach the network: only loopback connections are allowed."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and host not in ("127.0.0.1", "localhost", "::1")
            and not (host.startswith("/"))
        ):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1"))


@pytest.fixture(scope="session")
def seed_model(tmp_path_factory):
    """The seed's broken SmolLM2-135M-Instruct folder (tests/realmodel.py), written once."""
    from tests.realmodel import write_seed_folder

    return write_seed_folder(tmp_path_factory.mktemp("seed") / "SmolLM2-135M-Instruct")


@pytest.fixture
def seed_repo(seed_model, tmp_path):
    """A copy of the seed folder this test may fix; the weights are hard-linked (eosfix never
    writes them), or copied where the file system cannot link."""
    folder = tmp_path / seed_model.name
    folder.mkdir()
    for path in seed_model.iterdir():
        if path.suffix == ".safetensors":
            try:
                os.link(path, folder / path.name)
                continue
            except OSError:
                pass
        shutil.copyfile(path, folder / path.name)
    return folder
