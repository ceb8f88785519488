"""Write ``tokenizer.ggml.*`` stop keys into a GGUF, touching nothing else.

One module, over 400 lines: writing in place, rewriting, copying a split's shards and the
refusals before any of them share one layout, one verification and one commit of temp files.

A value is a ``*_token_id`` (UINT32) or ``tokenizer.ggml.eos_token_ids`` (an ARRAY of INT32,
ollama's key). Two ways, chosen by ``write_token_ids``:

- **in place**, when every key exists with the same encoding (a UINT32; an INT32 array of
  the same length) and the file is an ordinary, unshared file: only those bytes are written;
  the header is then re-read and compared byte for byte with the expected one (a mismatch
  puts the old bytes back);
- **rewrite**, otherwise (a key to add or retype, ``--output``, a hard-linked file): a new
  header with the keys replaced or appended, the tensor infos and data copied unchanged into
  a temp file beside the target after a free-space check, the data section hashed while
  copying and hashed again from the new file, the new header re-parsed and compared, then
  renamed over the target. On any failure the temp file is removed and the original is
  untouched.

``--output`` writes a complete model: for a split, every shard under the output's name (the
first rewritten, the others copied and hash-checked), since llama.cpp finds the shards by
name; with nothing to change, a verified copy (``copy_gguf``). An existing output is
refused unless ``force``. An ollama blob (``blobs/sha256-<hex>``) is never written in place:
its name is its content's hash, which the store's manifests name.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shlex
import shutil
import stat
import struct
import tempfile
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from eosfix.containers.gguf.format import MAGIC, ValueType
from eosfix.containers.gguf.plan import GgufValue
from eosfix.containers.gguf.read import (
    SPLIT_NAME,
    Header,
    data_start,
    read_header,
    shard_name,
    split_count,
    tensor_info_end,
)
from eosfix.containers.paths import is_ollama_blob
from eosfix.core.errors import VerificationError, WriteError
from eosfix.core.fileio import (
    check_writable,
    copy_metadata,
    fsync_dir,
    locked_dir,
    remove_stale_temps,
)

Progress = Callable[[str, int, int], None]  # phase ("copy" | "verify"), bytes done, total
CHUNK = 8 * 1024 * 1024
_FREE_MARGIN = 16 * 1024 * 1024
_TMP_SUFFIX = ".eosfix-tmp"  # eosfix.core.fileio removes such files left by a killed process


@dataclass(frozen=True)
class WriteResult:
    path: Path  # the file written (a split's first shard)
    mode: str  # "in-place" | "rewrite" | "copy"
    bytes_written: int
    data_sha256: str | None  # the tensor data's hash, equal before and after (rewrite)
    paths: tuple[Path, ...] = ()  # every file written (a split's shards, in order)


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def _value_bytes(value: GgufValue) -> bytes:
    """The bytes of the value itself (after the type and, for an array, its header)."""
    if isinstance(value, int):
        return _u32(value)
    return struct.pack(f"<{len(value)}i", *value)


def _entry(key: str, value: GgufValue) -> bytes:
    raw = key.encode("utf-8")
    head = struct.pack("<Q", len(raw)) + raw
    if isinstance(value, int):
        return head + _u32(ValueType.UINT32) + _u32(value)
    array = struct.pack("<IIQ", ValueType.ARRAY, ValueType.INT32, len(value))
    return head + array + _value_bytes(value)


def _same_encoding(header: Header, key: str, value: GgufValue) -> bool:
    """The key exists and ``value`` fits its bytes exactly (nothing else moves)."""
    f = header.fields.get(key)
    if f is None:
        return False
    if isinstance(value, int):
        return f.type is ValueType.UINT32
    return (
        f.item_type is ValueType.INT32 and isinstance(f.value, array) and len(f.value) == len(value)
    )


def _reads_back(value: object, wanted: GgufValue) -> bool:
    if isinstance(wanted, int):
        return value == wanted
    return isinstance(value, array) and tuple(value) == wanted


def _can_edit_in_place(header: Header, values: Mapping[str, GgufValue]) -> bool:
    if not all(_same_encoding(header, k, v) for k, v in values.items()):
        return False
    info = os.lstat(header.path)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


_CHANGED = (
    "changed since eosfix read it (another program wrote it); nothing written, run eosfix again"
)


def _same_file(header: Header, st: os.stat_result) -> None:
    """Refuse unless ``st`` is the file ``header`` was read from, unchanged: the same
    device and inode (not a new file renamed over it), size and mtime_ns."""
    seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if seen != (*header.inode, header.file_size, header.mtime_ns):
        raise WriteError(_CHANGED, path=header.path)


def _unchanged_since_read(header: Header) -> None:
    try:
        st = os.stat(header.path)
    except OSError as exc:
        raise WriteError(f"cannot stat: {exc.strerror or exc}", path=header.path) from None
    _same_file(header, st)


@contextlib.contextmanager
def _source(header: Header) -> Iterator[BinaryIO]:
    """The file ``header`` was read from, open and checked to be it: every later read (the
    tensor infos, the data) is from this descriptor, never from the path again."""
    try:
        fh = open(header.path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise WriteError(f"cannot open: {exc.strerror or exc}", path=header.path) from None
    with fh:
        _same_file(header, os.fstat(fh.fileno()))
        yield fh


def _read_span(fh: BinaryIO, start: int, end: int) -> bytes:
    fh.seek(start)
    return fh.read(end - start)


def _edit_in_place(header: Header, values: Mapping[str, GgufValue]) -> WriteResult:
    path = header.path
    with locked_dir(path):
        fd = os.open(path, os.O_RDWR)
        try:
            _same_file(header, os.fstat(fd))  # the descriptor written is the file read
            old = os.pread(fd, header.kv_end, 0)
            expected = bytearray(old)
            for key, value in values.items():
                at, data = header.fields[key].value_start, _value_bytes(value)
                expected[at : at + len(data)] = data
            try:
                for key, value in values.items():
                    os.pwrite(fd, _value_bytes(value), header.fields[key].value_start)
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
    size = sum(len(_value_bytes(v)) for v in values.values())
    return WriteResult(path, "in-place", size, None, (path,))


def _values_ok(path: Path, values: Mapping[str, GgufValue]) -> bool:
    new = read_header(path)
    return all(_reads_back(new.value(k), v) for k, v in values.items())


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


def _layout(header: Header, values: Mapping[str, GgufValue], fh: BinaryIO) -> _Layout:
    """The new header and where the data is, read from ``fh`` (``_source``)."""
    info_end = tensor_info_end(header, fh.fileno())
    kv = bytearray(_read_span(fh, header.kv_start, header.kv_end))
    info = _read_span(fh, header.kv_end, info_end)
    appended = b""
    # Spliced from the last field to the first, so earlier offsets stay valid.
    present = sorted((k for k in values if k in header.fields),
                     key=lambda k: header.fields[k].start, reverse=True)  # fmt: skip
    for key in present:
        f, value = header.fields[key], values[key]
        if _same_encoding(header, key, value):
            at, data = f.value_start - header.kv_start, _value_bytes(value)
            kv[at : at + len(data)] = data
        else:  # another type (an eos_token_ids array of UINT32...): the whole entry replaced
            kv[f.start - header.kv_start : f.end - header.kv_start] = _entry(key, value)
    for key, value in values.items():
        if key not in header.fields:
            appended += _entry(key, value)
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
    values: Mapping[str, GgufValue],
    sha: str,
    progress: Progress | None,
    fo: BinaryIO,
) -> None:
    new = read_header(tmp)
    with open(tmp, "rb") as fn:
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
    if not all(_reads_back(new.value(k), v) for k, v in values.items()):
        raise VerificationError("a written value does not read back", path=tmp)
    if _hash_file(tmp, len(lay.head), lay.data_len, progress) != sha:
        raise VerificationError("tensor data hash differs after copying", path=tmp)


def _temp_beside(target: Path) -> IO[bytes]:
    try:
        return tempfile.NamedTemporaryFile(
            dir=target.parent, delete=False, prefix=f".{target.name}.", suffix=_TMP_SUFFIX
        )
    except OSError as exc:
        reason = exc.strerror or exc
        raise WriteError(f"cannot create a temp file: {reason}", path=target) from None


def _rewritten_temp(
    header: Header,
    values: Mapping[str, GgufValue],
    target: Path,
    progress: Progress | None,
    src: BinaryIO,
) -> tuple[Path, _Layout, str]:
    """The rewritten file in a verified temp file beside ``target``; ``src``: ``_source``."""
    lay = _layout(header, values, src)
    out = _temp_beside(target)
    tmp = Path(out.name)
    try:
        with out:
            out.write(lay.head)
            sha = _copy_data(src, out, lay.data_from, lay.data_len, progress)
            out.flush()
            os.fsync(out.fileno())
            if target == header.path:  # over the original: its owner and xattrs kept
                copy_metadata(src.fileno(), out.fileno())
            os.fchmod(out.fileno(), stat.S_IMODE(os.fstat(src.fileno()).st_mode))
        _verify_rewrite(header, tmp, lay, values, sha, progress, src)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp, lay, sha


def _copied_temp(
    src: Path, target: Path, progress: Progress | None, opened: BinaryIO | None = None
) -> tuple[Path, int, str]:
    """A copy of ``src`` (``opened``: its checked descriptor) in a temp file beside
    ``target``, hash-checked."""
    out = _temp_beside(target)
    tmp = Path(out.name)
    try:
        with out, contextlib.ExitStack() as stack:
            fh = opened or stack.enter_context(open(src, "rb"))
            info = os.fstat(fh.fileno())
            size = info.st_size
            sha = _copy_data(fh, out, 0, size, progress)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
        if _hash_file(tmp, 0, size, progress) != sha:
            raise VerificationError("the copy's hash differs from the original's", path=tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp, size, sha


def _commit(
    header: Header,
    targets: Sequence[Path],
    make: Callable[[int, Path], tuple[Path, int, str | None]],
    mode: str,
) -> WriteResult:
    """Make every target's temp file (``make(index, target)``), then rename them all into
    place; on a failure before the renames, every temp file is removed."""
    folder = targets[0].parent
    with locked_dir(targets[0]):
        _unchanged_since_read(header)
        remove_stale_temps(folder)
        made: list[Path] = []
        total, first_sha = 0, None
        try:
            for index, target in enumerate(targets):
                tmp, size, sha = make(index, target)
                made.append(tmp)
                total += size
                first_sha = sha if index == 0 else first_sha
            _unchanged_since_read(header)  # another program's write is not lost
            for tmp, target in zip(made, targets, strict=True):
                os.replace(tmp, target)
        except BaseException as exc:
            for tmp in made:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            if isinstance(exc, OSError):
                reason = exc.strerror or str(exc)
                raise WriteError(
                    f"write failed, original unchanged: {reason}", path=targets[0]
                ) from exc
            raise
    fsync_dir(folder)
    return WriteResult(targets[0], mode, total, first_sha, tuple(targets))


def _rewrite(
    header: Header,
    values: Mapping[str, GgufValue],
    targets: Sequence[Path],
    shards: Sequence[Path],
    progress: Progress | None,
) -> WriteResult:
    """Shard 1 rewritten into ``targets[0]``; the other shards (``--output``) copied."""
    with locked_dir(targets[0]), _source(header) as src:
        # A killed run's temp file would count against the free space: removed first.
        remove_stale_temps(targets[0].parent)
        size = _layout(header, values, src).size
        _free_space_check(targets[0], size + sum(os.stat(s).st_size for s in shards[1:]))

        def make(index: int, target: Path) -> tuple[Path, int, str | None]:
            if index == 0:
                tmp, lay, sha = _rewritten_temp(header, values, target, progress, src)
                return tmp, lay.size, sha
            return _copied_temp(shards[index], target, progress)

        return _commit(header, targets, make, "rewrite")


def copy_gguf(
    header: Header,
    output: Path,
    *,
    shards: Sequence[Path] = (),
    force: bool = False,
    progress: Progress | None = None,
) -> WriteResult:
    """``--output`` with nothing to change: the model copied there as it is (every shard of a
    split), so ``fix --output NEW && upload NEW`` holds whatever the check found."""
    shards = tuple(shards) or (header.path,)
    targets = output_targets(header, output, shards, force=force)
    with locked_dir(targets[0]), _source(header) as src:

        def make(index: int, target: Path) -> tuple[Path, int, str | None]:
            return _copied_temp(shards[index], target, progress, src if index == 0 else None)

        remove_stale_temps(targets[0].parent)  # before the free-space check, as in _rewrite
        _free_space_check(targets[0], sum(os.stat(s).st_size for s in shards))
        return _commit(header, targets, make, "copy")


# --- where the result goes ----------------------------------------------------------------


def output_targets(
    header: Header, output: Path, shards: Sequence[Path], *, force: bool
) -> tuple[Path, ...]:
    """The files ``--output`` writes: ``output``, and for a split of N the other shards under
    its name (``NAME-0000k-of-0000N.gguf``, which is how llama.cpp finds them). Refused before
    anything is written: a name llama.cpp cannot find the shards by, a folder, an existing
    file without ``force``, an input shard."""
    if output.is_dir():
        raise WriteError("is a directory; --output needs a file name", path=output)
    count = len(shards)
    if count > 1:
        m = SPLIT_NAME.match(output.name)
        if m is None or int(m["no"]) != 1 or int(m["count"]) != count:
            stem = output.name.removesuffix(".gguf")
            raise WriteError(
                f"{header.path.name} is shard 1 of a split into {count} files, and llama.cpp "
                f"finds the other shards by the first one's name: name the output "
                f"{shard_name(stem, 1, count)} (eosfix writes all {count} shards there)",
                path=output,
            )
        targets = tuple(
            output.with_name(shard_name(m["stem"], n, count)) for n in range(1, count + 1)
        )
    else:
        targets = (output,)
    inputs = {s.resolve() for s in shards}
    for target in targets:
        if target.exists() and target.resolve() in inputs:
            raise WriteError(
                "is one of the input's shards; --output must name new files", path=target
            )
        if target.is_dir():
            raise WriteError("is a directory; --output needs a file name", path=target)
        if (target.exists() or target.is_symlink()) and not force:
            raise WriteError("exists; refusing to overwrite it (use --force)", path=target)
        check_writable(target)
    return targets


def fixed_name(header: Header) -> str:
    """A file name in the current folder that ``--output`` can write, none there yet:
    ``model-fixed.gguf`` (a split: ``model-fixed-00001-of-00003.gguf``, the name llama.cpp
    finds its shards by; ``model-fixed2...`` when that is taken)."""
    count = split_count(header)
    split = SPLIT_NAME.match(header.path.name)
    stem = split["stem"] if split else header.path.name.removesuffix(".gguf")
    for n in itertools.count(1):
        base = f"{stem}-fixed" if n == 1 else f"{stem}-fixed{n}"
        names = (
            [shard_name(base, k, count) for k in range(1, count + 1)]
            if count > 1
            else [f"{base}.gguf"]
        )
        if not any(os.path.lexists(name) for name in names):
            return names[0]
    raise AssertionError("unreachable")


def instead_command(header: Header) -> str:
    """The command that writes the fixed model into a new file of the current folder."""
    return shlex.join(["eosfix", "fix", str(header.path), "--output", fixed_name(header)])


def check_in_place(header: Header) -> None:
    """Refuse to fix the file itself when it must not be written, before anything is; the
    error names the command that writes a new file instead, as it runs when typed."""
    if header.path.is_symlink():
        command = instead_command(header)
        raise WriteError(
            "is a symlink; refusing to write through it (its target may be shared): write a "
            f"new file instead: {command}",
            path=header.path,
            instead=command,
        )
    if is_ollama_blob(header.path.resolve()):
        command = instead_command(header)
        new = command.rsplit(" ", 1)[-1]
        raise WriteError(
            "is an ollama blob: its name is the hash of its content, which the store's "
            f"manifests name, and eosfix never edits the store: write a new file instead: "
            f"{command} (then FROM ./{new} in a Modelfile)",
            path=header.path,
            instead=command,
        )
    check_writable(header.path)


def in_place_or_output(header: Header, output: Path, *, force: bool) -> Path | None:
    """Where ``--output`` writes: ``output``, or None (the input fixed in place) when it
    names the input itself (the same path, a link to it, a hard link) and ``force`` lets it
    be overwritten; without ``force`` that is refused like any existing file."""
    try:
        itself = os.path.samefile(output, header.path)
    except OSError:  # absent (or unreadable): not the input
        itself = False
    if not itself:
        return output
    if not force:
        raise WriteError(
            "exists (it is the input itself); refusing to overwrite it (use --force, or leave "
            "out --output to fix the file in place)",
            path=output,
        )
    return None


def write_token_ids(
    header: Header,
    values: Mapping[str, GgufValue],
    *,
    output: Path | None = None,
    shards: Sequence[Path] = (),
    force: bool = False,
    progress: Progress | None = None,
) -> WriteResult:
    """Set each key in ``values`` (an int: UINT32; a tuple: ARRAY of INT32): in place when
    possible, else a rewrite. ``output``: a new file (a split: every shard) instead
    (``in_place_or_output`` says which)."""
    shards = tuple(shards) or (header.path,)
    if output is None:
        check_in_place(header)
        if _can_edit_in_place(header, values):
            return _edit_in_place(header, values)
        return _rewrite(header, values, (header.path,), (header.path,), progress)
    targets = output_targets(header, output, shards, force=force)
    return _rewrite(header, values, targets, shards, progress)
