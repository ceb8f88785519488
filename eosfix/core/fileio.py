"""Safely rewriting the text files of a model repository (reading is the container's:
``eosfix.containers.folder.files``). One module, over 400 lines: the lock, the temp file, the
checks before the rename (another program's edit is never lost) and the metadata the temp
file carries over are the steps of one write.

A write is *atomic*: the new bytes go to a temp file in the same directory, are fsynced,
and ``os.replace`` swaps it in, so readers (and a crash) see the old or the new file,
never a mix. Symlinks are never written through: in the Hugging Face cache a snapshot
file links into ``blobs/``, shared by every revision with the same content.

Locks: on POSIX, ``flock`` on the directory itself (no lock file) and on each temp file
while it is written. Where there is no ``fcntl`` (Windows), the directory lock is a
``filelock`` lock file, ``.eosfix.lock`` in the directory (Windows removes it on release),
and a temp file counts as left over once it is a minute old (Windows refuses to delete a
file another process still has open).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from eosfix.core.errors import WriteError

_fcntl: ModuleType | None
try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None

_TMP_SUFFIX = ".eosfix-tmp"
_LOCK_FILE = ".eosfix.lock"  # the directory lock where there is no fcntl
_STALE_SECONDS = 60.0  # a temp file this old is left over from a killed process
_held = threading.local()  # per thread: {(st_dev, st_ino) of a locked dir: depth}


@contextlib.contextmanager
def locked_dir(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on a directory (``path``'s parent if not a dir).

    flock on the directory fd itself leaves no lock file behind. The lock is re-entrant
    within a thread, so write_if_changed can run inside a caller's locked_dir.
    """
    directory = path if path.is_dir() else path.parent
    try:
        info = os.stat(directory)
    except OSError as exc:
        raise WriteError(f"cannot lock directory: {exc.strerror or exc}", path=directory) from None
    key = (info.st_dev, info.st_ino)
    held: dict[tuple[int, int], int] = _held.__dict__.setdefault("dirs", {})
    with contextlib.ExitStack() as stack:
        if not held.get(key):
            stack.enter_context(_dir_lock(directory))
        held[key] = held.get(key, 0) + 1
        try:
            yield
        finally:
            held[key] -= 1


@contextlib.contextmanager
def _dir_lock(directory: Path) -> Iterator[None]:
    """The exclusive lock itself: flock on the directory, or a lock file without fcntl."""
    if _fcntl is None:
        with _lock_file(directory):
            yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise WriteError(f"cannot lock directory: {exc.strerror or exc}", path=directory) from None
    try:
        _flock_best_effort(fd)
        yield
    finally:
        os.close(fd)  # closing the last fd of the open file releases the flock


@contextlib.contextmanager
def _lock_file(directory: Path) -> Iterator[None]:
    from filelock import FileLock  # msvcrt.locking on Windows

    lock = FileLock(directory / _LOCK_FILE)
    try:
        lock.acquire()
    except OSError as exc:
        raise WriteError(f"cannot lock directory: {exc.strerror or exc}", path=directory) from None
    try:
        yield
    finally:
        lock.release()


def _flock_best_effort(fd: int) -> None:
    assert _fcntl is not None
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX)
    except OSError as exc:
        # Some network file systems have no flock; the write itself is still atomic.
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
            raise


def _current_umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _target_mode(path: Path, allow_symlink_replace: bool) -> int:
    """Permission bits for the new file, after refusing what must not be written."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0o644 & ~_current_umask()
    if stat.S_ISLNK(info.st_mode):
        if not allow_symlink_replace:
            quoted = shlex.quote(str(path))
            raise WriteError(
                "is a symlink; refusing to write through it (its target may be shared): "
                f'replace it by a copy of its target (cp --remove-destination "$(readlink -f '
                f'{quoted})" {quoted}), or fix the file it points to',
                path=path,
            )
        with contextlib.suppress(OSError):  # a dangling link gets the default mode
            return stat.S_IMODE(os.stat(path).st_mode)
        return 0o644 & ~_current_umask()
    if not stat.S_ISREG(info.st_mode):
        raise WriteError("is not a regular file; refusing to replace it", path=path)
    # Mode bits, not os.access: root may write anything, but a 0o444 file says "don't".
    if not info.st_mode & stat.S_IWUSR:
        raise WriteError(
            "is read-only; make it writable to let eosfix fix it "
            f"(chmod u+w {shlex.quote(str(path))})",
            path=path,
        )
    return stat.S_IMODE(info.st_mode)


def check_writable(path: Path, *, allow_symlink_replace: bool = False) -> None:
    """Raise ``WriteError`` if ``write_atomic(path, ...)`` would be refused; write nothing.

    Call it for every file of a multi-file fix before writing any, so that a file that
    cannot be written (symlink, read-only, not a regular file, folder missing or not writable) leaves
    the others untouched too.
    """
    if not path.parent.is_dir():  # named as it is, never as "not writable"
        what = "is not a folder" if path.parent.exists() else "does not exist"
        raise WriteError(f"its folder {path.parent} {what}", path=path)
    _target_mode(path, allow_symlink_replace)
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise WriteError(
            "its folder is not writable by this user: fix it as the folder's owner, or fix a "
            "copy of the folder",
            path=path,
        )
    # Mode bits too, as for the file: root passes os.access, but a folder nobody may write
    # (0o555) says "don't".
    try:
        folder_mode = os.stat(path.parent).st_mode
    except OSError:
        return
    if not folder_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise WriteError(
            f"its folder is read-only (mode {stat.S_IMODE(folder_mode):o}); make it writable "
            f"to let eosfix fix it (chmod u+w {shlex.quote(str(path.parent))})",
            path=path,
        )


def _try_flock(fd: int) -> bool | None:
    """Take an exclusive lock without waiting: True taken, False held elsewhere, None no flock."""
    if _fcntl is None:
        return None
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def remove_stale_temps(directory: Path) -> list[Path]:
    """Delete ``.*.eosfix-tmp`` files a killed eosfix left in ``directory``; return them.

    A writer holds an flock on its temp file until it is renamed, so a temp file nobody
    locks is garbage; where flock is unavailable, only files older than a minute go.
    Call it with the directory locked (``write_atomic`` does).
    """
    removed = []
    for tmp in directory.glob(f".*{_TMP_SUFFIX}"):
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            taken = _try_flock(fd)
            old = time.time() - os.fstat(fd).st_mtime > _STALE_SECONDS
            if taken:  # POSIX may unlink an open file; the lock is held until it is gone
                os.unlink(tmp)
                removed.append(tmp)
        except OSError:
            taken = False
        finally:
            os.close(fd)
        if taken is None and old:  # no flock: closed first (Windows won't unlink an open file)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
                removed.append(tmp)
    return removed


def fsync_dir(directory: Path) -> None:
    """Persist the rename itself; best effort (not every file system allows it)."""
    if not hasattr(os, "O_DIRECTORY"):  # Windows: a directory cannot be opened (nor needs it)
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def stamp(path: Path) -> tuple[int, ...] | None:
    """What says a file was not replaced or edited: (device, inode, size, mtime_ns) of the
    entry itself and, for a symlink, of its target; None when nothing is there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(f"cannot stat: {exc.strerror or exc}", path=path) from None
    own = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if not stat.S_ISLNK(info.st_mode):
        return own
    try:
        target = os.stat(path)
    except OSError:
        return own
    return (*own, target.st_dev, target.st_ino, target.st_size, target.st_mtime_ns)


CHANGED = (
    "changed since eosfix read it (another program wrote it); nothing written, run eosfix again"
)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(f"cannot read before writing: {exc.strerror or exc}", path=path) from None


def _still(path: Path, seen: tuple[int, ...] | None, current: bytes | None) -> Callable[[], None]:
    """A check that ``path`` is still what was read (``seen``, its ``stamp``; ``current``, its
    bytes): run just before the rename, it refuses an edit another program made meanwhile,
    even one that kept the size and the mtime (a timestamp tick is milliseconds)."""

    def check() -> None:
        if stamp(path) != seen or _read_or_none(path) != current:
            raise WriteError(CHANGED, path=path)

    return check


_NOT_HERE = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.EACCES, errno.ENODATA}


def copy_metadata(src: Path | int, dst_fd: int) -> None:
    """Give the temp file ``dst_fd`` the owner, group and extended attributes (POSIX ACLs,
    SELinux labels, ``user.*``) of ``src`` (a path, symlinks followed, or an fd), so the
    file renamed over ``src`` keeps them; the permission bits are the caller's (``fchmod``
    after this: a chown clears set-id bits). What this process may not set (another owner
    unless root, an attribute the file system lacks) is left as it is, not an error."""
    info = os.stat(src) if isinstance(src, Path) else os.fstat(src)
    if hasattr(os, "fchown"):
        mine = os.fstat(dst_fd)
        if (info.st_uid, info.st_gid) != (mine.st_uid, mine.st_gid):
            try:
                os.fchown(dst_fd, info.st_uid, info.st_gid)
            except PermissionError:  # not root: the group still, if this user is in it
                with contextlib.suppress(PermissionError):
                    os.fchown(dst_fd, -1, info.st_gid)
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(src)
    except OSError as exc:
        if exc.errno in _NOT_HERE:
            return
        raise
    for name in names:
        try:
            os.setxattr(dst_fd, name, os.getxattr(src, name))
        except OSError as exc:
            if exc.errno not in _NOT_HERE:
                raise


def hard_link_note(path: Path) -> str | None:
    """A regular file with other names (hard links): replacing it gives this name the new
    bytes and leaves the others on the old file. One line to tell the user, or None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
        return None
    others = info.st_nlink - 1
    return (
        f"{path}: had {info.st_nlink} hard links; only this name has the fix, "
        f"{others} other name(s) still lead to the old file"
    )


def write_atomic(
    path: Path,
    data: bytes,
    *,
    allow_symlink_replace: bool = False,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically; on any failure the old file is intact.

    A symlink at ``path`` is refused, or with ``allow_symlink_replace`` the link itself
    is replaced by a regular file, leaving its target untouched. ``before_replace`` runs
    just before the rename, the temp file complete: an exception there writes nothing.
    """
    with locked_dir(path):
        mode = _target_mode(path, allow_symlink_replace)
        remove_stale_temps(path.parent)
        try:
            tmp = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below or on error)
                dir=path.parent, delete=False, prefix=f".{path.name}.", suffix=_TMP_SUFFIX
            )
        except OSError as exc:
            raise WriteError(
                f"cannot create a temp file: {exc.strerror or exc}", path=path
            ) from None
        try:
            with tmp:
                _try_flock(tmp.fileno())  # marks it in use for remove_stale_temps
                if os.path.isfile(path):  # owner, group, xattrs (ACLs) kept; mode below
                    copy_metadata(path, tmp.fileno())
                tmp.write(data)
                tmp.flush()
                os.fsync(tmp.fileno())
                if hasattr(os, "fchmod"):
                    os.fchmod(tmp.fileno(), mode)
            if not hasattr(os, "fchmod"):  # Windows before Python 3.13
                os.chmod(tmp.name, mode)
            if before_replace is not None:
                before_replace()
            os.replace(tmp.name, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
            if isinstance(exc, Exception) and not isinstance(exc, WriteError):
                reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                raise WriteError(f"write failed, file left unchanged: {reason}", path=path) from exc
            raise
    fsync_dir(path.parent)


def write_if_changed(
    path: Path,
    new_text: str,
    *,
    allow_symlink_replace: bool = False,
    old_text: str | bool | None = True,
) -> bool:
    """Write ``new_text`` (bytes exactly as the str, UTF-8) unless the file already holds it.

    Returns True when the file was written. An unchanged file is not touched at all.
    ``old_text``: what the file held when eosfix read it (None: it did not exist); a file
    that now holds something else, or changes before the rename, is refused with a
    ``WriteError`` and nothing is written: another program's edit is never lost
    (``True``: not checked).
    """
    try:
        data = new_text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 form exists
        raise WriteError(f"text cannot be encoded as UTF-8: {exc.reason}", path=path) from None
    with locked_dir(path):
        seen = stamp(path)
        current = _read_or_none(path)
        if current == data:
            return False
        if old_text is not True and not _holds(current, old_text):
            raise WriteError(CHANGED, path=path)
        write_atomic(
            path,
            data,
            allow_symlink_replace=allow_symlink_replace,
            before_replace=None if old_text is True else _still(path, seen, current),
        )
    return True


def check_holds(path: Path, old_text: str | None) -> None:
    """Raise ``WriteError`` unless ``path`` still holds ``old_text`` (None: no file there),
    what eosfix read; call it for every file of a multi-file fix before writing any."""
    if not _holds(_read_or_none(path), old_text):
        raise WriteError(CHANGED, path=path)


def _holds(current: bytes | None, old_text: str | bool | None) -> bool:
    """Whether ``current`` (None: no file) is what eosfix read as ``old_text``."""
    if old_text is None or current is None:
        return old_text is None and current is None
    return isinstance(old_text, str) and current == old_text.encode("utf-8", "surrogateescape")
