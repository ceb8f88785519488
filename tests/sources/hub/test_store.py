"""The store keeps a download only once whole and checked; what a killed run left in
``incoming/`` is cleared."""

from __future__ import annotations

import os
import time

from eosfix.sources.hub.store import Store, git_sha1


def test_a_download_is_kept_only_when_adopted(tmp_path):
    store = Store(tmp_path)
    with store.incoming() as f:
        f.write(b'{"eos_token_id": 2}')
        sha = store.adopt(f, git_sha1(b'{"eos_token_id": 2}'))
    assert store.blob_path(sha).read_bytes() == b'{"eos_token_id": 2}'
    with store.incoming() as f:
        f.write(b"x" * 1000)  # refused (over a cap, a wrong hash): never adopted
    assert list((tmp_path / "incoming").iterdir()) == []


def test_what_a_killed_run_left_in_incoming_is_cleared(tmp_path):
    folder = tmp_path / "incoming"
    folder.mkdir()
    old, new = folder / ".download.old", folder / ".download.new"
    old.write_bytes(b"x" * 100)
    new.write_bytes(b"y")  # another process's, still under way
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    with Store(tmp_path).incoming():
        pass
    assert not old.exists()
    assert new.exists()
