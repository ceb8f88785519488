"""Reading one file of a model folder: bounded, regular files only, every failure one line.

``read_bytes`` opens and reads in one go (its type and size are asked of the descriptor read,
``eosfix.core.saferead``); only once a read failed are the path's stats asked, to name a
dangling link or a folder. ``present`` is one ``lstat`` whose errors are errors, never an
absent file. ``mapped`` gives a large file (tokenizer.json) as a memory map, so only the
pages touched are read. Used by ``eosfix.containers.folder.read``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eosfix.core.errors import RepoLoadError, reading
from eosfix.core.repo import TOKENIZER_JSON
from eosfix.core.saferead import (
    MAX_JSON_DEPTH,
    MAX_TOKENIZER_JSON_BYTES,
    json_depth_over,
    open_regular,
    read_regular,
)

# Real config files and templates are kB to a few MB (a huge added_tokens_decoder); bigger
# ones are refused before reading, so a hostile repo cannot make eosfix hold hundreds of MB.
# tokenizer.json (10-35 MB, read lazily) has its own, larger bound.
MAX_FILE_BYTES = 16 * 1024 * 1024


def _limit(path: Path) -> int:
    """The most bytes eosfix reads of this repo file."""
    return MAX_TOKENIZER_JSON_BYTES if path.name == TOKENIZER_JSON else MAX_FILE_BYTES


def _readable(path: Path) -> None:
    """Refuse a dangling link, a directory, or a file over its size limit (one-line errors).
    Asked only once a read failed, to name what is there: a read costs no extra stat."""
    if path.is_symlink() and not path.exists():
        raise RepoLoadError("dangling symlink (its target is missing)", path=path)
    limit = _limit(path)
    with reading(path):
        if path.is_dir():
            raise IsADirectoryError
        size = path.stat().st_size
        if size > limit:
            raise RepoLoadError(f"too large ({size} bytes, limit {limit})", path=path)


_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)  # pathlib's "it is not there"


def present(path: Path) -> bool:
    """Whether ``path`` is a file or a link (a dangling one too), in one ``lstat``; an error
    other than absence is a one-line error naming the file, never taken for an absent file
    (``os.path.lexists`` would say False)."""
    try:
        os.lstat(path)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return False
        with reading(path):
            raise
    return True


@contextlib.contextmanager
def _opening(path: Path) -> Iterator[None]:
    """``reading(path)``; after a failed read, a dangling link or a folder is named so, else
    the read's error stands (also when looking at the path fails too)."""
    try:
        with reading(path):
            yield
    except RepoLoadError:
        with contextlib.suppress(OSError):
            _readable(path)
        raise


def read_bytes(path: Path) -> bytes:
    """Read a repo file, turning every OS problem into a one-line ``RepoLoadError``."""
    with _opening(path):  # only a regular file, and at most the limit (not st_size's word)
        return read_regular(path, _limit(path))


def decode_text(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RepoLoadError(f"not valid UTF-8 (byte {exc.start})", path=path) from None


def parse_json_text(text: str, path: Path) -> Any:
    if not text.strip():
        raise RepoLoadError("empty file, expected JSON", path=path)
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise RepoLoadError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", path=path
        ) from None
    except RecursionError:
        raise RepoLoadError("invalid JSON: nested too deeply", path=path) from None
    except ValueError:  # a number longer than Python's int conversion takes
        raise too_long_number(text, path) from None
    return shallow(data, path)


def too_long_number(text: str, path: Path) -> RepoLoadError:
    """The error for JSON whose integer has more digits than Python converts
    (``sys.get_int_max_str_digits()``, 4,300 by default: ``int()`` raises ValueError, which
    is no JSONDecodeError), at the first such run of digits."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)() or 4300
    found = re.search(f"[0-9]{{{limit + 1},}}", text)
    if found is None:  # not a number after all: say what Python said
        return RepoLoadError("invalid JSON: a value Python cannot convert", path=path)
    start = found.start()
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    return RepoLoadError(
        f"invalid JSON: a number of {found.end() - start} digits at line {line} column "
        f"{column} (Python reads at most {limit})",
        path=path,
    )


def shallow(data: Any, path: Path) -> Any:
    """``data``, unless it nests deeper than any real file (later walks would recurse)."""
    if json_depth_over(data):
        raise RepoLoadError(
            f"invalid JSON: nested too deeply (more than {MAX_JSON_DEPTH} levels)", path=path
        )
    return data


@contextlib.contextmanager
def mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes as a read-only memory map: pages are read as they are touched, so
    finding the head of a 10-35 MB tokenizer.json reads (and keeps) only its first kilobytes.
    The same checks and errors as ``read_bytes``; the whole file when it cannot be mapped."""
    with _opening(path):  # a device or FIFO is refused here, without blocking on it
        fd, info = open_regular(path)
    limit = _limit(path)
    if info.st_size > limit:
        os.close(fd)
        raise RepoLoadError(f"too large ({info.st_size} bytes, limit {limit})", path=path)
    view = None
    try:
        view = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # an empty file, or one the OS cannot map
        pass
    finally:
        os.close(fd)
    if view is None:
        yield read_bytes(path)
        return
    with view:
        yield view
