"""Write ``tokenizer.ggml.*_token_id`` values into a GGUF, touching nothing else.

Two ways, chosen by ``write_token_ids``:

- **in place**, when every key exists as UINT32 and the file is an ordinary, unshared file:
  only those 4-byte values are written; the header is then re-read and compared byte for
  byte with the expected one (a mismatch puts the old bytes back);
- **rewrite**, otherwise (a key to add, ``--output``, a hard-linked file): a new header with
  the keys appended, the tensor infos and data copied unchanged into a temp file beside the
  target after a free-space check, the data section hashed while copying and hashed again
  from the new file, the new header re-parsed and compared, then renamed over the target.
  On any failure the temp file is removed and the original is untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import struct
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from eosfix.containers.gguf.read import (
    MAGIC,
    Header,
    ValueType,
    data_start,
    read_header,
    tensor_info_end,
)
from eosfix.core.errors import VerificationError, WriteError
from eosfix.core.fileio import check_writable, fsync_dir, locked_dir, remove_stale_temps

Progress = Callable[[str, int, int], None]  # phase ("copy" | "verify"), bytes done, total
CHUNK = 8 * 1024 * 1024
_FREE_MARGIN = 16 * 1024 * 1024
_TMP_SUFFIX = ".eosfix-tmp"  # eosfix.core.fileio removes such files left by a killed process


@dataclass(frozen=True)
class WriteResult:
    path: Path  # the file written
    mode: str  # "in-place" | "rewrite"
    bytes_written: int
    data_sha256: str | None  # the tensor data's hash, equal before and after (rewrite)


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def _entry(key: str, value: int) -> bytes:
    raw = key.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw + _u32(ValueType.UINT32) + _u32(value)


def _can_edit_in_place(header: Header, values: Mapping[str, int]) -> bool:
    fields = header.fields
    if not all(k in fields and fields[k].type is ValueType.UINT32 for k in values):
        return False
    info = os.lstat(header.path)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def _unchanged_since_read(header: Header) -> None:
    try:
        st = os.stat(header.path)
    except OSError as exc:
        raise WriteError(f"cannot stat: {exc.strerror or exc}", path=header.path) from None
    if (st.st_size, st.st_mtime_ns) != (header.file_size, header.mtime_ns):
        raise WriteError("changed since eosfix read it; run eosfix again", path=header.path)


def _read_span(fh: BinaryIO, start: int, end: int) -> bytes:
    fh.seek(start)
    return fh.read(end - start)


def _edit_in_place(header: Header, values: Mapping[str, int]) -> WriteResult:
    path = header.path
    with locked_dir(path):
        _unchanged_since_read(header)
        fd = os.open(path, os.O_RDWR)
        try:
            old = os.pread(fd, header.kv_end, 0)
            expected = bytearray(old)
            for key, value in values.items():
                at = header.fields[key].value_start
                expected[at : at + 4] = _u32(value)
            try:
                for key, value in values.items():
                    os.pwrite(fd, _u32(value), header.fields[key].value_start)
                os.fsync(fd)
                ok = os.pread(fd, header.kv_end, 0) == bytes(expected) and _values_ok(path, values)
            except OSError as exc:
                os.pwrite(fd, old, 0)
                raise WriteError(f"write failed: {exc.strerror or exc}", path=path) from None
            if not ok:
                os.pwrite(fd, old, 0)
                os.fsync(fd)
                raise VerificationError("re-read header differs; old bytes restored", path=path)
        finally:
            os.close(fd)
    return WriteResult(path, "in-place", 4 * len(values), None)


def _values_ok(path: Path, values: Mapping[str, int]) -> bool:
    new = read_header(path)
    return all(new.value(k) == v for k, v in values.items())


# --- rewrite ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    head: bytes  # the new header: preamble, key/values, tensor infos, padding
    info: bytes  # the tensor infos, unchanged
    data_from: int  # where the data section starts in the original
    data_len: int

    @property
    def size(self) -> int:
        return len(self.head) + self.data_len


def _layout(header: Header, values: Mapping[str, int]) -> _Layout:
    info_end = tensor_info_end(header)
    with open(header.path, "rb") as fh:
        kv = bytearray(_read_span(fh, header.kv_start, header.kv_end))
        info = _read_span(fh, header.kv_end, info_end)
    appended = b""
    for key, value in values.items():
        f = header.fields.get(key)
        if f is not None and f.type is ValueType.UINT32:
            at = f.value_start - header.kv_start
            kv[at : at + 4] = _u32(value)
        elif f is None:
            appended += _entry(key, value)
        else:  # load_gguf refuses such a file; never reached with a checked model
            raise VerificationError(f"{key} is {f.type_name}, not UINT32", path=header.path)
    n_kv = len(header.fields) + sum(1 for k in values if k not in header.fields)
    pre = MAGIC + _u32(header.version) + struct.pack("<QQ", header.n_tensors, n_kv)
    head = pre + bytes(kv) + appended + info
    old_data = data_start(header, info_end)
    if header.file_size > info_end:  # the data section (and its padding) exists
        if header.file_size < old_data:
            raise WriteError("truncated: tensor data is missing", path=header.path)
        head += b"\0" * (-len(head) % header.alignment)
        return _Layout(head, info, old_data, header.file_size - old_data)
    return _Layout(head, info, old_data, 0)


def _free_space_check(target: Path, needed: int) -> None:
    free = shutil.disk_usage(target.parent).free
    if free < needed + _FREE_MARGIN:
        raise WriteError(
            f"not enough free space: the new file needs {needed} bytes, "
            f"{free} are free in {target.parent}",
            path=target,
        )


def _copy_data(
    src: BinaryIO, dst: IO[bytes], start: int, length: int, progress: Progress | None
) -> str:
    digest, done = hashlib.sha256(), 0
    src.seek(start)
    while done < length:
        chunk = src.read(min(CHUNK, length - done))
        if not chunk:
            raise WriteError("the original ended early while copying", path=Path(src.name))
        digest.update(chunk)
        dst.write(chunk)
        done += len(chunk)
        if progress is not None:
            progress("copy", done, length)
    return digest.hexdigest()


def _hash_file(path: Path, start: int, length: int, progress: Progress | None) -> str:
    digest, done = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        fh.seek(start)
        while done < length:
            chunk = fh.read(min(CHUNK, length - done))
            if not chunk:
                break
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress("verify", done, length)
    return digest.hexdigest()


def _verify_rewrite(
    old: Header,
    tmp: Path,
    lay: _Layout,
    values: Mapping[str, int],
    sha: str,
    progress: Progress | None,
) -> None:
    new = read_header(tmp)
    with open(old.path, "rb") as fo, open(tmp, "rb") as fn:
        for key, f in old.fields.items():
            if key in values:
                continue
            nf = new.fields.get(key)
            if nf is None or (nf.type, nf.item_type) != (f.type, f.item_type):
                raise VerificationError(f"{key} is missing or retyped in the new file", path=tmp)
            old_value = _read_span(fo, f.value_start, f.end)
            if old_value != _read_span(fn, nf.value_start, nf.end):
                raise VerificationError(f"{key} differs in the new file", path=tmp)
        if _read_span(fn, new.kv_end, new.kv_end + len(lay.info)) != lay.info:
            raise VerificationError("tensor infos differ in the new file", path=tmp)
    if set(new.fields) != set(old.fields) | set(values):
        raise VerificationError("the new file's keys differ", path=tmp)
    if any(new.value(k) != v for k, v in values.items()):
        raise VerificationError("a written value does not read back", path=tmp)
    if _hash_file(tmp, len(lay.head), lay.data_len, progress) != sha:
        raise VerificationError("tensor data hash differs after copying", path=tmp)


def _rewrite(
    header: Header, values: Mapping[str, int], target: Path, progress: Progress | None
) -> WriteResult:
    lay = _layout(header, values)
    with locked_dir(target):
        _unchanged_since_read(header)
        _free_space_check(target, lay.size)
        remove_stale_temps(target.parent)
        mode = stat.S_IMODE(os.stat(header.path).st_mode)
        try:
            out = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below or on error)
                dir=target.parent, delete=False, prefix=f".{target.name}.", suffix=_TMP_SUFFIX
            )
        except OSError as exc:
            reason = exc.strerror or exc
            raise WriteError(f"cannot create a temp file: {reason}", path=target) from None
        tmp = Path(out.name)
        try:
            with out, open(header.path, "rb") as src:
                out.write(lay.head)
                sha = _copy_data(src, out, lay.data_from, lay.data_len, progress)
                out.flush()
                os.fsync(out.fileno())
                os.fchmod(out.fileno(), mode)
            _verify_rewrite(header, tmp, lay, values, sha, progress)
            os.replace(tmp, target)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                reason = exc.strerror or str(exc)
                raise WriteError(
                    f"write failed, original unchanged: {reason}", path=target
                ) from exc
            raise
    fsync_dir(target.parent)
    return WriteResult(target, "rewrite", lay.size, sha)


def check_target(header: Header, output: Path | None) -> Path:
    """Where the result goes; refuse what must not be written, before anything is."""
    if output is None or (output.exists() and output.resolve() == header.path.resolve()):
        if header.path.is_symlink():
            raise WriteError(
                "is a symlink; refusing to write through it (its target may be shared): "
                "use --output NEW.gguf",
                path=header.path,
            )
        check_writable(header.path)
        return header.path
    if output.is_dir():
        raise WriteError("is a directory; --output needs a file name", path=output)
    check_writable(output)
    return output


def write_token_ids(
    header: Header,
    values: Mapping[str, int],
    *,
    output: Path | None = None,
    progress: Progress | None = None,
) -> WriteResult:
    """Set each ``key -> uint32`` in ``values``: in place when possible, else a rewrite."""
    target = check_target(header, output)
    if target == header.path and _can_edit_in_place(header, values):
        return _edit_in_place(header, values)
    return _rewrite(header, values, target, progress)
