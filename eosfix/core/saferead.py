"""Reading a repo file with a bound: only a regular file, and never more than a limit.

``st_size`` says nothing about a device or a FIFO (0 for ``/dev/zero`` and a pipe), so a size
check before ``read_bytes`` lets a link to ``/dev/zero`` fill the memory and a FIFO hang the
run. Here the file is opened without blocking (a FIFO with no writer opens at once), its type
is checked on the descriptor that is read (not on the path, which another program may swap),
and at most ``limit + 1`` bytes are read whatever the file claims.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from eosfix.core.errors import RepoLoadError

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_CHUNK = 1024 * 1024
# tokenizer.json is 10-35 MB in real repos; every read of it (its head, the tokenizers library's
# load of the vocabulary) is refused above this.
MAX_TOKENIZER_JSON_BYTES = 256 * 1024 * 1024

NOT_REGULAR = "is not a regular file (a device, FIFO or socket); refusing to read it"


def open_regular(path: str | Path) -> tuple[int, os.stat_result]:
    """An fd open for reading on the regular file ``path`` and its ``fstat``.

    OS errors propagate (wrap the call in ``reading``); a directory raises
    ``IsADirectoryError``; a device, FIFO or socket raises a one-line ``RepoLoadError``.
    """
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | _BINARY)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):
            raise RepoLoadError(NOT_REGULAR, path=path)
        if _NONBLOCK and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_fd(fd: int, limit: int, path: str | Path) -> bytes:
    """Every byte of the open file ``fd``, refusing (one line) more than ``limit`` bytes:
    a file that grows while read is bounded too."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise RepoLoadError(f"too large (more than {limit} bytes, the limit)", path=path)


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most ``limit``."""
    fd, info = open_regular(path)
    try:
        if info.st_size > limit:
            raise RepoLoadError(f"too large ({info.st_size} bytes, limit {limit})", path=path)
        return read_fd(fd, limit, path)
    finally:
        os.close(fd)


# Real config files nest a few levels (tokenizer.json's normalizers about ten). Python's own
# parser stops near 1000, but code that walks a parsed value (pydantic, the duplicate-key
# scanner, json.dumps) recurses too and would hit the recursion limit between ~400 and 990.
MAX_JSON_DEPTH = 100


def json_depth_over(data: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the parsed JSON ``data`` nests deeper than ``limit`` (walked without
    recursion)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False
