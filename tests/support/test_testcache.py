"""tests/support/testcache.py's ``built_once``: a folder is built once per inputs, and a build
that fails leaves nothing that counts as built."""

from __future__ import annotations

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
