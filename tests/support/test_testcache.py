"""tests/support/testcache.py's ``built_once``: a folder is built once per inputs, and a build
that fails leaves nothing that counts as built."""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest

from tests.support import testcache


def test_a_folder_is_built_once_per_inputs_and_never_half(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSFIX_TEST_CACHE", str(tmp_path))
    builds = []

    def build(folder):
        builds.append(folder.name)
        (folder / "weights").write_text(str(len(builds)), encoding="utf-8")

    first = testcache.built_once("seed", [b"model", b"transformers==5"], build)
    assert (first / "weights").read_text(encoding="utf-8") == "1"
    assert testcache.built_once("seed", [b"model", b"transformers==5"], build) == first
    assert len(builds) == 1
    other = testcache.built_once("seed", [b"model", b"transformers==6"], build)
    assert other != first
    assert (other / "weights").read_text(encoding="utf-8") == "2"

    def fails(folder):
        (folder / "weights").write_text("half", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        testcache.built_once("seed", [b"model", b"transformers==7"], fails)
    again = testcache.built_once("seed", [b"model", b"transformers==7"], build)
    assert (again / "weights").read_text(encoding="utf-8") == "3"  # built anew, not the half one


@pytest.mark.skipif(importlib.util.find_spec("fcntl") is None, reason="no flock (Windows)")
def test_builders_side_by_side_build_once_and_both_read_it_whole(tmp_path, monkeypatch):
    """Two builders asking at once (pytest -n workers, CI's stage 0 beside a test): one builds,
    the other waits on the lock and reads the finished folder, never the half-made one."""
    monkeypatch.setenv("EOSFIX_TEST_CACHE", str(tmp_path))
    started, builds, seen = threading.Event(), [], []

    def build(folder):
        builds.append(folder.name)
        started.set()
        time.sleep(0.3)  # the other builder asks meanwhile
        (folder / "wheels").write_text("all", encoding="utf-8")

    def ask():
        made = testcache.built_once("wheelhouse", [b"jinja2>=3"], build)
        seen.append((made / "wheels").read_text(encoding="utf-8"))

    first = threading.Thread(target=ask)
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=ask)
    second.start()
    first.join(10)
    second.join(10)
    assert len(builds) == 1
    assert seen == ["all", "all"]
