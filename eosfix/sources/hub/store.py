"""eosfix's own store of Hub repos' small files, by commit, so a second audit asks for nothing.

A commit sha names an immutable tree, so the stop-relevant files of a commit, once here, are
the Hub's files for good: a later audit whose listing shows the same sha reads them from disk
and sends no request for that repo. Layout (under ``$EOSFIX_CACHE``, else
``$XDG_CACHE_HOME/eosfix``, else ``~/.cache/eosfix``)::

    hub/blobs/<ab>/<git sha1>                 a file's bytes, named by its git blob sha1
    hub/ids/<ab>/<sha256>                     the git sha1 of an LFS file's bytes
    hub/snapshots/<ab>/<commit>/<path> -> blob  the commit's relevant files (symlinks)
    hub/snapshots/<ab>/<commit>.json          its manifest: written last, so it means "complete"
    hub/incoming/                             downloads under way (renamed into blobs/ once
                                              whole and checked, deleted otherwise; what a
                                              killed run left, after an hour)

Identical files (the same tokenizer_config.json in 40 quantizations) are one blob, found by
the id the Hub gives a file's content before it is downloaded (a paths-info answer, a
resolve's ``ETag``): the git blob sha1 of a file kept in git, the sha256 of one kept in LFS
(``ids/``), so a file already here is never downloaded again, whichever repo has it. Every write
is a temp file or folder renamed into place: a crash leaves no half file, and two processes
publishing the same commit both end with the same snapshot. It is a cache: delete it any time.
The HF cache is not used, so ``eosfix cache --fix`` edits never mix with what the Hub serves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from eosfix.sources import Key


def default_store_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the store lives, from the environment *now*."""
    env = os.environ if env is None else env
    root = env.get("EOSFIX_CACHE") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "eosfix"
    )
    return Path(os.path.expanduser(root)) / "hub"


def git_sha1(data: bytes) -> str:
    """The git blob sha1 of ``data``: what the Hub names a (non-LFS) file by."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


CHUNK = 1024 * 1024


def git_sha1_of(f: IO[bytes]) -> str:
    """``git_sha1`` of a file's bytes, read a chunk at a time from its start."""
    f.flush()
    size = os.fstat(f.fileno()).st_size
    h = hashlib.sha1(b"blob %d\0" % size)
    f.seek(0)
    while chunk := f.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


def sha256_of(f: IO[bytes]) -> str:
    h = hashlib.sha256()
    f.seek(0)
    while chunk := f.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Manifest:
    """The relevant files of one commit that are in the store, and what else the repo has."""

    files: dict[str, str]  # path in the repo -> git sha1 of its bytes
    tokenizer_json: bool  # the repo has tokenizer.json (fetched only when an id needs it)
    model: bool = True  # the repo holds a model (False: tokenizer files only)

    @property
    def key(self) -> Key:
        return tuple(sorted(self.files.items()))


class Store:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_dir()
        self._lock = threading.Lock()  # two repos of a batch may share a commit (duplicates)
        self._swept = False  # incoming/ cleared of what killed runs left (once)

    def snapshot(self, commit: str) -> Path:
        return self.root / "snapshots" / commit[:2] / commit

    def manifest(self, commit: str) -> Manifest | None:
        """The commit's manifest, or None when the store does not hold it (complete)."""
        try:
            data = json.loads(self._manifest_path(commit).read_text(encoding="utf-8"))
            model = bool(data.get("model", True))
            return Manifest(dict(data["files"]), bool(data["tokenizer_json"]), model)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def add_blob(self, data: bytes, content_id: str | None = None) -> str:
        """Keep ``data`` (once); returns its git sha1. ``content_id``: the Hub's id of it
        (checked by the caller); a sha256 (an LFS file) is indexed, so ``blob_of`` finds it."""
        sha = git_sha1(data)
        blob = self._blob(sha)
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(blob, data)
        self._index_id(sha, content_id)
        return sha

    def _index_id(self, sha: str, content_id: str | None) -> None:
        if content_id is not None and len(content_id) == 64:
            index = self._index(content_id)
            if not index.exists():
                index.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(index, sha.encode())

    @contextlib.contextmanager
    def incoming(self) -> Iterator[IO[bytes]]:
        """A temporary file in the store for a download under way (``adopt`` keeps it);
        removed when the block ends, whatever happened, unless it was adopted."""
        folder = self.root / "incoming"
        folder.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            self._swept = True
            _sweep(folder)
        fd, name = tempfile.mkstemp(prefix=".download.", dir=folder)
        os.close(fd)
        try:
            with open(name, "w+b") as f:  # named: ``adopt`` renames it
                yield f
        finally:
            Path(name).unlink(missing_ok=True)

    def adopt(
        self, download: IO[bytes], content_id: str | None = None, sha: str | None = None
    ) -> str:
        """Keep a whole, checked download (a file ``incoming`` gave) as a blob, renamed into
        place, not copied; its git sha1 (``sha``: already known). ``content_id`` as in
        ``add_blob``."""
        download.flush()
        sha = sha or git_sha1_of(download)
        download.close()  # renamed once closed (Windows renames no open file)
        blob = self._blob(sha)
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            os.replace(download.name, blob)
        self._index_id(sha, content_id)
        return sha

    def blob_of(self, content_id: str) -> str | None:
        """The git sha1 of the blob holding the content the Hub names ``content_id`` (a git
        sha1, or an LFS file's sha256), or None when the store does not hold it."""
        sha: str | None = content_id
        if len(content_id) == 64:
            try:
                sha = self._index(content_id).read_text(encoding="ascii").strip()
            except (OSError, ValueError):
                return None
        return sha if sha and self._blob(sha).is_file() else None

    def publish(self, commit: str, manifest: Manifest) -> Path:
        """Make the commit's snapshot (links to its blobs), then its manifest; returns it."""
        with self._lock:
            return self._publish(commit, manifest)

    def _publish(self, commit: str, manifest: Manifest) -> Path:
        final = self.snapshot(commit)
        if self.manifest(commit) is not None:  # published meanwhile (two repos, one commit):
            return final  # keep it; replacing it would pull the folder from under a reader
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{commit}.", dir=final.parent))
        try:
            for path, sha in manifest.files.items():
                self._link(tmp / path, sha)
            if final.exists():  # an earlier, unfinished attempt (no manifest): replace it
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.replace(tmp, final)
            except OSError:  # another process published it meanwhile: keep theirs
                if self.manifest(commit) is None:
                    raise
                return final
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._write_manifest(commit, manifest)
        return final

    def add_file(self, commit: str, path: str, sha: str) -> Manifest:
        """Add one more file (tokenizer.json), a blob already here (its git sha1), to a
        published snapshot."""
        with self._lock:
            return self._add_file(commit, path, sha)

    def _add_file(self, commit: str, path: str, sha: str) -> Manifest:
        old = self.manifest(commit)
        assert old is not None, commit
        link = self.snapshot(commit) / path
        if not link.exists():
            tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
            self._link(tmp, sha)
            os.replace(tmp, link)
        new = Manifest({**old.files, path: sha}, old.tokenizer_json, old.model)
        self._write_manifest(commit, new)
        return new

    def blob_path(self, sha: str) -> Path:
        """Where the blob of git sha1 ``sha`` is (or would be)."""
        return self._blob(sha)

    def _blob(self, sha: str) -> Path:
        return self.root / "blobs" / sha[:2] / sha

    def _index(self, sha256: str) -> Path:
        return self.root / "ids" / sha256[:2] / sha256

    def _manifest_path(self, commit: str) -> Path:
        return self.snapshot(commit).with_name(commit + ".json")

    def _link(self, at: Path, sha: str) -> None:
        at.parent.mkdir(parents=True, exist_ok=True)
        blob = self._blob(sha)
        try:
            at.symlink_to(os.path.relpath(blob, at.parent))
        except OSError:  # no symlinks here (Windows without developer mode)
            shutil.copyfile(blob, at)

    def _write_manifest(self, commit: str, manifest: Manifest) -> None:
        data = {
            "files": manifest.files,
            "tokenizer_json": manifest.tokenizer_json,
            "model": manifest.model,
        }
        _write_atomic(self._manifest_path(commit), json.dumps(data, sort_keys=True).encode())


STALE = 3600.0  # seconds: a download older than any request's deadline was abandoned


def _sweep(folder: Path) -> None:
    """Delete the downloads a killed run left in ``incoming/`` (another process's, still under
    way, was written to within its request's deadline)."""
    now = time.time()
    for leftover in folder.glob(".download.*"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > STALE:
                leftover.unlink()


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
