from __future__ import annotations

import fcntl
import os
import random
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from eosfix.containers.folder.files import decode_text, read_bytes
from eosfix.core import fileio
from eosfix.core.errors import RepoLoadError, WriteError
from eosfix.core.fileio import locked_dir, write_atomic, write_if_changed

ORIGINAL = b'{\r\n  "eos_token_id": 2\r\n}\r\n'
NEW = b'{\r\n  "eos_token_id": [\r\n    2,\r\n    7\r\n  ]\r\n}\r\n'


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "generation_config.json"
    path.write_bytes(ORIGINAL)
    return path


@pytest.fixture
def hf_snapshot(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(snapshot file link, its blob, a second revision's link to the same blob)."""
    repo = tmp_path / "models--org--name"
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(ORIGINAL)
    links = []
    for sha in ("aaaa", "bbbb"):
        link = repo / "snapshots" / sha / "generation_config.json"
        link.parent.mkdir(parents=True)
        link.symlink_to(Path("..", "..", "blobs", "0123abcd"))
        links.append(link)
    return links[0], blob, links[1]


# --- reading: the one reader, eosfix.containers.folder.files --------------------------------


def test_read_keeps_bom_and_crlf(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": "\xc3\xa9"}\r\n')
    raw = read_bytes(path)
    text = decode_text(raw, path)
    assert text == '\ufeff{"a": "é"}\r\n'
    assert raw == path.read_bytes()


def test_read_non_utf8_names_the_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(RepoLoadError) as excinfo:
        decode_text(read_bytes(path), path)
    assert str(excinfo.value) == f"{path}: not valid UTF-8 (byte 7)"  # the one reader's words
    assert excinfo.value.path == str(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda p: None, "file not found", id="missing"),
        pytest.param(lambda p: p.mkdir(), "is a directory", id="directory"),
    ],
)
def test_read_unreadable(tmp_path, make, message):
    path = tmp_path / "config.json"
    make(path)
    with pytest.raises(RepoLoadError, match=message) as excinfo:
        read_bytes(path)
    assert "\n" not in str(excinfo.value)
    assert str(path) in str(excinfo.value)


# --- write_atomic: modes, symlinks, read-only -------------------------------------------


def _dir_entries(path: Path) -> set[str]:
    return {entry.name for entry in path.parent.iterdir()}


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664, 0o755])
def test_write_atomic_keeps_mode(target, mode):
    target.chmod(mode)
    write_atomic(target, NEW)
    assert target.read_bytes() == NEW
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert _dir_entries(target) == {target.name}


def test_write_atomic_new_file_gets_umask_default(tmp_path):
    path = tmp_path / "new.json"
    old_umask = os.umask(0o027)
    try:
        write_atomic(path, NEW)
    finally:
        os.umask(old_umask)
    assert path.read_bytes() == NEW
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_write_atomic_refuses_symlink(hf_snapshot):
    link, blob, _ = hf_snapshot
    with pytest.raises(WriteError, match="is a symlink; refusing to write through it"):
        write_atomic(link, NEW)
    assert link.is_symlink()
    assert blob.read_bytes() == ORIGINAL
    assert _dir_entries(link) == {link.name}


def test_write_atomic_replaces_symlink_when_allowed(hf_snapshot):
    link, blob, other_revision = hf_snapshot
    blob.chmod(0o644)
    write_atomic(link, NEW, allow_symlink_replace=True)
    assert not link.is_symlink()
    assert link.read_bytes() == NEW
    assert stat.S_IMODE(link.stat().st_mode) == 0o644
    assert blob.read_bytes() == ORIGINAL  # the shared blob is byte-identical
    assert other_revision.is_symlink()
    assert other_revision.read_bytes() == ORIGINAL
    assert _dir_entries(link) == {link.name}


def test_write_atomic_replaces_dangling_symlink_when_allowed(tmp_path):
    link = tmp_path / "config.json"
    link.symlink_to(tmp_path / "nowhere")
    write_atomic(link, NEW, allow_symlink_replace=True)
    assert not link.is_symlink()
    assert link.read_bytes() == NEW


@pytest.mark.parametrize("mode", [0o444, 0o044, 0o555])
def test_write_atomic_refuses_read_only(target, mode):
    target.chmod(mode)
    with pytest.raises(WriteError, match="is read-only") as excinfo:
        write_atomic(target, NEW)
    assert str(target) in str(excinfo.value)
    assert target.read_bytes() == ORIGINAL
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_write_atomic_refuses_directory(tmp_path):
    path = tmp_path / "config.json"
    path.mkdir()
    with pytest.raises(WriteError, match="not a regular file"):
        write_atomic(path, NEW)
    assert path.is_dir()


def test_write_atomic_missing_directory(tmp_path):
    with pytest.raises(WriteError, match="cannot lock directory"):
        write_atomic(tmp_path / "missing" / "config.json", NEW)


# --- write_atomic: fault injection -----------------------------------------------------


def _fail(*args, **kwargs):
    raise OSError(28, "No space left on device")


def _failing_temp_write(monkeypatch, partial: bool) -> None:
    real = tempfile.NamedTemporaryFile

    def factory(*args, **kwargs):
        tmp = real(*args, **kwargs)
        real_write = tmp.write

        def write(data):
            if partial:
                real_write(data[: len(data) // 2])
            _fail()

        tmp.write = write
        return tmp

    monkeypatch.setattr(fileio.tempfile, "NamedTemporaryFile", factory)


FAULTS = {
    "temp file creation": lambda mp: mp.setattr(fileio.tempfile, "NamedTemporaryFile", _fail),
    "temp file write": lambda mp: _failing_temp_write(mp, partial=False),
    "temp file partial write": lambda mp: _failing_temp_write(mp, partial=True),
    "fsync": lambda mp: mp.setattr(fileio.os, "fsync", _fail),
    "fchmod": lambda mp: mp.setattr(fileio.os, "fchmod", _fail),
    "replace": lambda mp: mp.setattr(fileio.os, "replace", _fail),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_write_atomic_failure_leaves_original(target, monkeypatch, fault):
    FAULTS[fault](monkeypatch)
    with pytest.raises(WriteError, match="No space left on device") as excinfo:
        write_atomic(target, NEW)
    monkeypatch.undo()
    assert str(excinfo.value).startswith(f"{target}: ")
    assert "\n" not in str(excinfo.value)
    assert target.read_bytes() == ORIGINAL
    assert _dir_entries(target) == {target.name}


def test_write_atomic_interrupt_cleans_up_and_propagates(target, monkeypatch):
    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, NEW)
    monkeypatch.undo()
    assert target.read_bytes() == ORIGINAL
    assert _dir_entries(target) == {target.name}


def test_write_atomic_survives_failing_directory_fsync(target, monkeypatch):
    real_fsync = os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 1:  # the second fsync is the directory's: best effort
            _fail()
        real_fsync(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    write_atomic(target, NEW)
    assert len(calls) == 2
    assert target.read_bytes() == NEW


# --- write_if_changed ----------------------------------------------------------------


def test_write_if_changed_unchanged_does_not_touch_file(target):
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    before = target.stat()
    assert write_if_changed(target, ORIGINAL.decode()) is False
    after = target.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)


def test_write_if_changed_unchanged_read_only_is_fine(target):
    target.chmod(0o444)
    assert write_if_changed(target, ORIGINAL.decode()) is False


def test_write_if_changed_writes_exact_bytes(target):
    text = "\ufeff" + NEW.decode()
    assert write_if_changed(target, text) is True
    assert target.read_bytes() == b"\xef\xbb\xbf" + NEW  # BOM and CRLF, no translation
    assert write_if_changed(target, text) is False


def test_write_if_changed_creates_missing_file(tmp_path):
    path = tmp_path / "generation_config.json"
    assert write_if_changed(path, "{}\n") is True
    assert path.read_bytes() == b"{}\n"


def test_write_if_changed_over_non_utf8_file(target):
    target.write_bytes(b"\xff\xfe")
    assert write_if_changed(target, "{}") is True
    assert target.read_bytes() == b"{}"


def test_write_if_changed_refuses_symlink_and_read_only(hf_snapshot, target):
    link, blob, _ = hf_snapshot
    with pytest.raises(WriteError, match="symlink"):
        write_if_changed(link, NEW.decode())
    assert write_if_changed(link, NEW.decode(), allow_symlink_replace=True) is True
    assert blob.read_bytes() == ORIGINAL
    target.chmod(0o444)
    with pytest.raises(WriteError, match="read-only"):
        write_if_changed(target, NEW.decode())
    assert target.read_bytes() == ORIGINAL


def test_write_if_changed_unencodable_text(target):
    with pytest.raises(WriteError, match="cannot be encoded as UTF-8"):
        write_if_changed(target, "\ud800")
    assert target.read_bytes() == ORIGINAL


# --- locking -------------------------------------------------------------------------


def _try_lock(directory: Path) -> bool:
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_locked_dir_excludes_others_and_is_reentrant(target):
    with locked_dir(target):
        assert not _try_lock(target.parent)
        with locked_dir(target.parent):  # re-entrant: a nested write does not deadlock
            assert write_if_changed(target, NEW.decode()) is True
        assert not _try_lock(target.parent)
    assert _try_lock(target.parent)
    assert _dir_entries(target) == {target.name}  # no lock file left behind


# --- crash safety --------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from eosfix.core.fileio import write_atomic

    path = Path(sys.argv[1])
    contents = [(b'{"v": "' + c * 3_000_000 + b'"}\\n') for c in (b"a", b"b")]
    write_atomic(path, contents[1])
    print("ready", flush=True)
    i = 0
    while True:
        write_atomic(path, contents[i % 2])
        i += 1
    """
)


def test_write_atomic_survives_kill_9(tmp_path):
    path = tmp_path / "big.json"
    contents = {(b'{"v": "' + c * 3_000_000 + b'"}\n') for c in (b"a", b"b")}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    rng = random.Random(1234)
    for _ in range(20):
        with subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, env=env
        ) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.08))
            except subprocess.TimeoutExpired:
                proc.kill()
            assert proc.wait() == -9
        assert path.read_bytes() in contents
    leftovers = {p.name for p in tmp_path.iterdir()} - {"big.json"}
    assert all(n.startswith(".big.json.") and n.endswith(".eosfix-tmp") for n in leftovers)
