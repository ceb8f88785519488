"""A model repo of the Hugging Face hub cache, read by a plain walk of its folders.

``walk_repo`` reads ``refs/``, the snapshot folders and every file's link with ``os.scandir``
and gives what ``huggingface_hub.scan_cache_dir``'s per-repo scanner gives for an ordinary
repo: each revision's commit, refs, folder, and the key of the files a check reads. It
accepts only the ordinary layout: a broken link, a ref to a missing commit, a file where a
folder belongs, a link for a snapshot... give None, and ``eosfix.sources.cache`` asks that
scanner, which decides and words the warning. So the answer is scan_cache_dir's, at a
quarter of its cost (no object per file of every snapshot).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from pathlib import Path
from typing import NamedTuple

from eosfix.core.errors import EosfixError
from eosfix.core.repo import READ_FILES, is_read_file
from eosfix.core.saferead import read_regular
from eosfix.sources import Key, gguf_models, holds_a_model, holds_a_model_folder

_HASH_NAME = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_HASH_LIMIT = 4 * 1024 * 1024  # regular files up to this size are keyed by content hash


class Revision(NamedTuple):
    commit: str
    refs: tuple[str, ...]  # sorted
    path: Path  # <cache>/models--org--name/snapshots/<commit>
    key: Key
    model: bool  # False: no config.json, generation_config.json or weights (tokenizer files only)
    folder: bool = True  # a tokenizer's or a template's files: checked as a folder
    ggufs: tuple[tuple[str, str], ...] = ()  # its GGUF model files: (path, content identity)


def git_sha1_file(path: Path, limit: int = _HASH_LIMIT) -> str:
    data = read_regular(path, limit)  # a /dev/zero link or a FIFO: refused, not read forever
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_identity(file_path: Path, blob_path: Path) -> str:
    """What decides a file's content: its blob's name (a content hash) for a link into
    ``blobs/``; the git sha1 of a regular file (a snapshot file eosfix already replaced)."""
    if blob_path != file_path:
        return blob_path.name if _HASH_NAME.match(blob_path.name) else str(blob_path)
    try:
        st = file_path.stat()
        if st.st_size <= _HASH_LIMIT:
            return git_sha1_file(file_path)
    except (OSError, EosfixError):
        return f"unreadable:{file_path}"
    return f"file:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _identity(file_path: str, blob: str | None) -> str:
    """``file_identity`` of a file found by the walk (``blob``: a link's first hop, made
    absolute), without building paths for a link."""
    if blob is None:
        path = Path(file_path)
        return file_identity(path, path)
    name = os.path.basename(blob)
    return name if _HASH_NAME.match(name) else blob


# Names scan_cache_dir skips (``FILES_TO_IGNORE``) or never treats as a snapshot: a folder
# holding one is left to it.
_HUB_IGNORES = frozenset((".DS_Store", "Thumbs.db", "desktop.ini"))


def _walk_refs(refs: str) -> dict[str, list[str]] | None:
    """commit -> ref names under ``refs/`` as scan_cache_dir reads them; None when it is
    anything but plain files of ASCII text in folders (scan_cache_dir decides then)."""
    out: dict[str, list[str]] = {}
    try:
        if not stat.S_ISDIR(os.stat(refs).st_mode):
            return None
    except FileNotFoundError:
        return out
    stack = [("", refs)]
    while stack:
        prefix, folder = stack.pop()
        with os.scandir(folder) as entries:
            for e in entries:
                if e.is_symlink() or e.name in _HUB_IGNORES:
                    return None
                if e.is_dir():
                    stack.append((f"{prefix}{e.name}/", e.path))
                    continue
                with open(e.path, "rb") as f:
                    raw = f.read()
                if not raw.isascii() or b"\r" in raw:  # it reads them as text
                    return None
                out.setdefault(raw.decode(), []).append(prefix + e.name)
    return out


def _blob_files(blobs_dir: str) -> frozenset[str]:
    """Names of the regular files (not links) in ``blobs/``, from one listing (no stat)."""
    try:
        with os.scandir(blobs_dir) as entries:
            return frozenset(e.name for e in entries if e.is_file(follow_symlinks=False))
    except OSError:
        return frozenset()


def _blob_of(link: str, depth: int, blobs_dir: str, blobs: frozenset[str]) -> str | None:
    """The blob a snapshot file's link names when it is the ordinary one (``../../blobs/NAME``
    from a file ``depth`` folders down) and ``blobs/`` lists NAME as a regular file: the path
    ``os.path.abspath`` would give, with nothing left to check; None otherwise."""
    up = "../" * (depth + 2) + "blobs/"
    name = link[len(up) :]
    if not link.startswith(up) or name not in blobs:  # a listed name has no "/", no ".."
        return None
    return f"{blobs_dir}/{name}"


class Walked(NamedTuple):
    """What a snapshot holds for a check (``_walk_snapshot``)."""

    key: list[tuple[str, str]]  # (path, identity) of each file a folder's check reads
    model: bool  # a model's files (``holds_a_model``)
    folder: bool  # a tokenizer's or a template's files (``holds_a_model_folder``)
    ggufs: list[tuple[str, str]]  # (path, identity) of each GGUF model file


def _walk_snapshot(top: str, blobs_dir: str, blobs: frozenset[str]) -> Walked | None:
    """(repo-relative path, identity) of each file a check reads, after checking every file's
    link as scan_cache_dir does (its glob: every file at any depth, links to folders skipped
    and not entered), whether any file is a model's, a model folder's, and its GGUF model
    files; None at the first broken link. ``blobs``: the regular files of ``blobs_dir``
    (``_blob_files``): an ordinary link to one of them needs no stat."""
    out: list[tuple[str, str]] = []
    names: list[str] = []
    ids: dict[str, str] = {}  # of the .gguf files
    stack = [("", top)]
    while stack:
        prefix, folder = stack.pop()
        with os.scandir(folder) as entries:
            for e in entries:
                blob = None
                if e.is_symlink():
                    link = os.readlink(e.path)
                    blob = _blob_of(link, prefix.count("/"), blobs_dir, blobs)
                    if blob is None:
                        # scan_cache_dir: the first hop, made absolute without resolving ".."
                        blob = os.path.abspath(os.path.join(folder, link))
                        try:
                            if stat.S_ISDIR(os.stat(blob).st_mode):
                                continue
                        except OSError:
                            return None  # "Blob missing (broken symlink)"
                elif e.is_dir(follow_symlinks=False):
                    stack.append((f"{prefix}{e.name}/", e.path))
                    continue
                names.append(prefix + e.name)
                if e.name.endswith(".gguf"):
                    ids[prefix + e.name] = _identity(e.path, blob)
                if e.name in READ_FILES or e.name.endswith(".jinja"):
                    rel = prefix + e.name
                    if is_read_file(rel):
                        out.append((sys.intern(rel), _identity(e.path, blob)))
    ggufs = [(n, ids[n]) for n in gguf_models(sorted(ids))]
    return Walked(out, holds_a_model(names), holds_a_model_folder(names), ggufs)


def walk_repo(path: Path) -> list[Revision] | None:
    """The revisions of a model repo folder (``models--org--name``) by a plain walk, as
    scan_cache_dir's scanner gives them for an ordinary repo; None for anything else (or any
    error): that scanner then decides, and words the warning."""
    if not path.name.startswith("models--"):
        return None
    try:
        refs = _walk_refs(os.path.join(path, "refs"))
        if refs is None:
            return None
        if (path / "snapshots").is_symlink():  # ".." in its links would leave it elsewhere
            return None
        with os.scandir(path / "snapshots") as entries:
            revisions = list(entries)
        blobs_dir = os.path.abspath(os.path.join(path, "blobs"))
        blobs = _blob_files(blobs_dir)
        out = []
        for e in revisions:
            if e.is_symlink() or not e.is_dir() or e.name in _HUB_IGNORES:
                return None
            walked = _walk_snapshot(e.path, blobs_dir, blobs)
            if walked is None:
                return None
            found = tuple(sorted(refs.pop(e.name, ())))
            key, files = tuple(sorted(walked.key)), tuple(walked.ggufs)
            revision = Revision(
                e.name, found, Path(e.path), key, walked.model, walked.folder, files
            )
            out.append(revision)
    except (OSError, ValueError):
        return None
    return None if refs else out  # a ref left over names a missing commit
