"""Write a model folder's planned edits: every file or none, and safely in a cache snapshot.

A file replaced whole (a generation_config.json that is not JSON at all) has its old bytes
written beside it first (``FilePatch.backup``, ``generation_config.json.corrupt``), never over
other bytes already there; a failure removes that copy with the rest.

Each file is checked writable before the first is written (a symlink, a read-only file, a
folder that is not writable refuse the whole fix), and an unforeseen failure on a later file
(disk full, I/O error) puts the earlier ones back as they were.

A Hugging Face cache snapshot (``models--org--name/snapshots/<commit>``) holds links into
``blobs/``, each blob shared by every revision with the same content. There the link itself is
replaced by a regular file (``replace_symlinks``) and a blob is never written through; then
the ``.no_exist/<commit>/<file>`` marker of a written file is deleted (``drop_no_exist_marker``),
or transformers offline would not see the new file. The file is written first and the marker
deleted after: a kill between the two leaves a *stale* marker (the file is there, the marker
says it is not), which ``stale_no_exist_markers`` finds and ``drop_stale_no_exist`` removes on
the next ``cache --fix``, whatever the analysis then says of the files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from eosfix.containers.folder.plan import FilePatch
from eosfix.containers.paths import cache_snapshot
from eosfix.core import fileio
from eosfix.core.errors import EosfixError, WriteError
from eosfix.core.fileio import check_holds, check_writable, write_atomic

AfterWrite = Callable[[Path, FilePatch], None]  # (the written file, its patch)


def write_patches(
    root: Path,
    patches: Sequence[FilePatch],
    *,
    replace_symlinks: bool = False,
    after_write: AfterWrite | None = None,
) -> list[str]:
    """Write every patch into the folder ``root``, or none; return the files written.

    ``replace_symlinks``: a cache snapshot, where a link is replaced by a regular file.
    ``after_write`` runs for each file written, once all are. Run it with the folder locked
    (``locked_dir``).
    """
    for patch in patches:  # all or nothing: refuse before writing the first file
        _check_writable(root, patch, replace_symlinks)
        _check_backup(root, patch)
    for patch in patches:  # another program's edit since eosfix read the file is never lost
        target = root / patch.file
        if not _already(target, patch.new_text):
            check_holds(target, patch.old_text)
    written = _write_all(root, patches, replace_symlinks)
    if after_write is not None:
        for patch in patches:
            if patch.file in written:
                after_write(root / patch.file, patch)
    return written


def _write_all(root: Path, patches: Sequence[FilePatch], replace_symlinks: bool) -> list[str]:
    """Write every patch, or none: an unforeseen failure (disk full, I/O error) on a later
    file puts the earlier ones back as they were (a created file is removed)."""
    written: list[FilePatch] = []
    kept: list[Path] = []  # backups written by this run
    try:
        for patch in patches:
            target = root / patch.file
            if patch.backup is not None and not _already(target, patch.new_text):
                backup = root / patch.backup
                if fileio.write_if_changed(backup, patch.old_text or "", old_text=None):
                    kept.append(backup)
            if fileio.write_if_changed(
                target,
                patch.new_text,
                allow_symlink_replace=replace_symlinks,
                old_text=patch.old_text,  # refused if another program wrote it meanwhile
            ):
                written.append(patch)
    except BaseException as exc:  # any error (a raw OSError, Ctrl-C too): all or nothing
        for backup in kept:
            with contextlib.suppress(Exception):
                backup.unlink(missing_ok=True)
        for done in reversed(written):
            target = root / done.file
            with contextlib.suppress(Exception):  # best effort: report the first failure
                if done.old_text is None:
                    target.unlink(missing_ok=True)
                else:  # a cache snapshot link comes back as a regular file with the same bytes
                    data = done.old_text.encode("utf-8")
                    write_atomic(target, data, allow_symlink_replace=True)
        if isinstance(exc, Exception) and not isinstance(exc, EosfixError):
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise WriteError(f"write failed, nothing changed: {reason}", path=root) from exc
        raise
    return [p.file for p in written]


def write_blocker(
    root: Path, patches: Sequence[FilePatch], *, replace_symlinks: bool = False
) -> WriteError | None:
    """What ``write_patches`` would refuse before writing anything (a symlink, a read-only
    file or folder), with what to do; None when nothing stands in its way. Writes nothing."""
    try:
        for patch in patches:
            _check_writable(root, patch, replace_symlinks)
    except WriteError as exc:
        return exc
    return None


def _check_backup(root: Path, patch: FilePatch) -> None:
    """Refuse to replace a file whole when its backup's name holds other bytes: the bytes it
    keeps from an earlier replacement are never overwritten."""
    if patch.backup is None or _already(root / patch.file, patch.new_text):
        return
    path = root / patch.backup
    if path.is_symlink() or (path.exists() and not _already(path, patch.old_text or "")):
        raise WriteError(
            f"it holds other bytes, and fix would keep {patch.file}'s there before writing a "
            f"new one: move it away, then run fix again",
            path=path,
        )


def _already(target: Path, new_text: str) -> bool:
    """The file already holds ``new_text`` (another eosfix run wrote it): nothing to do."""
    try:
        return target.read_bytes() == new_text.encode("utf-8", "surrogateescape")
    except OSError:
        return False


def _check_writable(root: Path, patch: FilePatch, replace_symlinks: bool) -> None:
    """Refuse a file that must not be written; in a cache snapshot, say what does it safely."""
    try:
        check_writable(root / patch.file, allow_symlink_replace=replace_symlinks)
    except WriteError as exc:
        snapshot = cache_snapshot(root)
        if snapshot is not None and replace_symlinks and not os.access(root, os.W_OK | os.X_OK):
            # cache --fix itself: recommending it again would send the user in a circle
            raise WriteError(_unwritable_snapshot(root), path=exc.path) from None
        if snapshot is None or not (root / patch.file).is_symlink():
            raise
        raise WriteError(
            "a Hugging Face cache snapshot: its files are links into blobs/, shared with other "
            f"revisions, and eosfix fix never writes through them; {snapshot.fix_command} "
            "replaces the link safely",
            path=exc.path,
        ) from None


def _unwritable_snapshot(root: Path) -> str:
    """Why a cache snapshot cannot be fixed where it is, and what can be done instead."""
    copy = "or copy the snapshot (cp -rL) and run eosfix fix on the copy"
    with contextlib.suppress(OSError, AttributeError):
        if os.statvfs(root).f_flag & os.ST_RDONLY:
            return f"the cache snapshot is on a read-only file system: remount it writable, {copy}"
    owner = _owner_name(root)
    return (
        f"the cache snapshot's folder is not writable by this user (it belongs to {owner}): "
        f"run eosfix cache --fix as {owner}, {copy}"
    )


def _owner_name(path: Path) -> str:
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "another user"
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def drop_no_exist_marker(snapshot: Path, target: Path, patch: FilePatch) -> None:
    """After writing ``patch.file`` into a cache snapshot: delete ``.no_exist/<commit>/<file>``,
    which would make ``try_to_load_from_cache`` (and transformers offline) ignore the new file.
    An ``after_write`` once ``snapshot`` is bound (``functools.partial``)."""
    _unlink(_no_exist_dir(snapshot) / patch.file, "written, but its .no_exist marker stays")


def _unlink(marker: Path, failure: str) -> None:
    try:
        marker.unlink(missing_ok=True)
    except OSError as exc:
        raise WriteError(f"{failure}: {exc.strerror or exc}", path=marker) from None


def _no_exist_dir(snapshot: Path) -> Path:
    return snapshot.parent.parent / ".no_exist" / snapshot.name


def stale_no_exist_markers(snapshot: Path) -> list[Path]:
    """The ``.no_exist/<commit>/<file>`` markers of a cache snapshot whose file exists in the
    snapshot (left by a run killed between writing the file and deleting its marker)."""
    markers = _no_exist_dir(snapshot)
    if not markers.is_dir():
        return []
    stale = []
    for marker in sorted(markers.rglob("*")):
        rel = marker.relative_to(markers)
        if not marker.is_dir() and (snapshot / rel).is_file():
            stale.append(marker)
    return stale


def drop_stale_no_exist(snapshot: Path) -> list[Path]:
    """Delete the stale markers of ``snapshot``; return them. Run it with the folder locked."""
    stale = stale_no_exist_markers(snapshot)
    for marker in stale:
        _unlink(marker, "a stale .no_exist marker cannot be removed")
    return stale
