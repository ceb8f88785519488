"""Read a GGUF file's header: the metadata llama.cpp, ollama and LM Studio load, never the weights.

One module, over 400 lines: the binary format, the checks llama.cpp makes when it loads it,
and the ModelRepo built from it are read together, against one memory map.

``read_header(path)`` parses the key/value section through a read-only memory map (the
tensor infos only on request, the tensor data never), so checking a 50 GB file costs what a
50 MB one does. Every count and length a hostile header claims is checked against the bytes
that remain and against fixed limits before anything is allocated; each problem is one
``RepoLoadError`` naming the file. ``load_gguf(path)`` turns the header into the same
``ModelRepo`` a folder gives (templates, special tokens, token table), plus what llama.cpp
reads to decide where generation ends (``GgufVocab``).
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosfix.containers.gguf.format import (
    ALIGNMENT_KEY,
    ARCH_KEY,
    CONTROL,
    EOS_IDS_KEY,
    KEY_PREFIX,
    MAGIC,
    MODEL_KEY,
    PRE_KEY,
    SPLIT_COUNT_KEY,
    TEMPLATE_KEY,
    TOKEN_TYPE_KEY,
    TOKENS_KEY,
    USER_DEFINED,
    ValueType,
    key_name,
)
from eosfix.containers.gguf.pieces import GgufTokens
from eosfix.containers.gguf.tokens import NO_STRINGS, OFFSET, Strings
from eosfix.core.errors import RepoLoadError, reading
from eosfix.core.repo import ChatTemplate, ModelRepo, TokenInfo
from eosfix.core.saferead import open_regular
from eosfix.runtimes.llamacpp import ID_SLOTS, GgufVocab, SpecialIds, special_ids
from eosfix.runtimes.ollama.compat import SHAPE_ARCHITECTURES

DEFAULT_ALIGNMENT = 32
# Limits far above real files (the largest vocabularies have ~262k tokens and headers of a
# few MB), low enough that a hostile header cannot make eosfix hold or walk gigabytes.
MAX_HEADER_BYTES = 128 * 1024 * 1024
MAX_KEY_BYTES = 65536
MAX_TOKENS = 1 << 22
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024
MAX_TENSORS = 1 << 20
SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


_SCALAR = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<?",
    ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d",
}  # fmt: skip
# Arrays whose items eosfix needs; every other array is skipped without building objects.
# A decoded array is held as compactly as the file holds it: a string array as ``Strings``
# (``eosfix.containers.gguf.tokens``), a numeric one as an ``array`` of its item type (a bool
# one as bytes 0 and 1), never a Python object per item.
_DECODED_ARRAYS = frozenset({TOKENS_KEY, TOKEN_TYPE_KEY, EOS_IDS_KEY})
_ARRAY_CODES = {
    vtype: next(c for c in codes if array(c).itemsize == struct.calcsize(_SCALAR[vtype]))
    for vtype, codes in (
        (ValueType.UINT8, "B"), (ValueType.INT8, "b"), (ValueType.UINT16, "H"),
        (ValueType.INT16, "h"), (ValueType.UINT32, "IL"), (ValueType.INT32, "il"),
        (ValueType.FLOAT32, "f"), (ValueType.BOOL, "B"), (ValueType.UINT64, "QL"),
        (ValueType.INT64, "ql"), (ValueType.FLOAT64, "d"),
    )
}  # fmt: skip
_TRUTH = bytes([0] + [1] * 255)  # a GGUF bool is any nonzero byte


@dataclass(frozen=True)
class Field:
    """One key/value pair: its type, its decoded value and where its bytes are."""

    key: str
    type: ValueType
    item_type: ValueType | None  # for arrays
    start: int  # offset of the key's length prefix
    value_start: int  # offset of the value (after the type, and the array header)
    end: int  # offset after the value
    value: Any  # scalar, str, Strings or array (decoded arrays), None (skipped arrays)

    @property
    def type_name(self) -> str:
        if self.item_type is not None:
            return f"ARRAY of {self.item_type.name}"
        return self.type.name


@dataclass(frozen=True)
class Header:
    """The parsed header of one GGUF file (key/value section; tensor infos on request)."""

    path: Path
    version: int
    n_tensors: int
    n_kv_offset: int  # where the 8-byte key count is
    kv_start: int
    kv_end: int
    file_size: int
    mtime_ns: int
    fields: dict[str, Field] = field(default_factory=dict)
    inode: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the file read: a writer checks it

    def value(self, key: str, default: Any = None) -> Any:
        f = self.fields.get(key)
        return default if f is None else f.value

    @property
    def alignment(self) -> int:
        return int(self.value(ALIGNMENT_KEY, DEFAULT_ALIGNMENT))


class _Reader:
    """Bounded little-endian reads over a buffer; running past the end is a truncated file.

    ``buf`` holds the file's first bytes: all of them (a memory map), or as many as were
    fetched so far (a file read by HTTP ranges), in which case ``grow(reader, n)`` is asked
    for more whenever a read needs ``n`` bytes past ``pos`` that the buffer does not hold yet
    (it appends them to ``buf`` or raises). ``size`` is the whole file's; ``limit`` is where
    reading stops (the file's end, or MAX_HEADER_BYTES): every bound is checked against it,
    never against what happens to be fetched. ``key``, ``items``, ``item`` and ``item_start``
    say where the parse is (the field, and within an array its length, the item reached and
    where the items began), for a byte source that sizes its next read from them.
    """

    def __init__(
        self,
        buf: Any,
        path: Path,
        limit: int,
        *,
        size: int | None = None,
        grow: Grow | None = None,
    ) -> None:
        self.buf, self.path, self.pos, self.limit = buf, path, 0, limit
        self.size = len(buf) if size is None else size
        self.grow = grow
        self.key, self.items, self.item, self.item_start = "", 0, 0, 0
        self.fields: dict[str, Field] = {}  # parsed so far, by key

    def fail(self, message: str) -> RepoLoadError:
        return RepoLoadError(message, path=self.path)

    def need(self, n: int, what: str) -> None:
        if n > self.limit - self.pos:
            if self.limit < self.size:
                raise self.fail(f"GGUF header larger than {MAX_HEADER_BYTES} bytes ({what})")
            raise self.fail(
                f"truncated GGUF header: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {self.size - self.pos} left"
            )
        if n > len(self.buf) - self.pos:  # only for a buffer that holds the file's start
            assert self.grow is not None, "a partial buffer needs a byte source"
            self.grow(self, n)

    def scalar(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def raw_string(self, what: str, limit: int | None = None) -> bytes:
        n = self.u64(what)
        if limit is not None and n > limit:
            raise self.fail(f"{what} is {n} bytes long (limit {limit})")
        self.need(n, what)
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return data


# Asked by a reader for more bytes: ``grow(reader, n)`` appends to ``reader.buf`` at least the
# bytes up to ``reader.pos + n`` (or raises RepoLoadError naming the file).
Grow = Callable[[_Reader, int], None]


def _open_map(path: Path) -> tuple[Any, os.stat_result]:
    with reading(path, expected="a GGUF file"):
        fd, st = open_regular(path)  # a FIFO or device is refused, not waited on or mapped
        try:
            if st.st_size == 0:
                raise RepoLoadError("empty file, expected a GGUF file", path=path)
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), st
        finally:
            os.close(fd)


def _value_type(r: _Reader, key: str, raw: int) -> ValueType:
    try:
        return ValueType(raw)
    except ValueError:
        raise r.fail(f"{key}: unknown GGUF value type {raw}") from None


def _read_array(r: _Reader, key: str) -> tuple[ValueType, int, Any]:
    item = _value_type(r, key, r.u32(f"{key} item type"))
    if item is ValueType.ARRAY:
        raise r.fail(f"{key}: nested arrays are not valid GGUF (llama.cpp refuses them)")
    count = r.u64(f"{key} length")
    min_size = 8 if item is ValueType.STRING else struct.calcsize(_SCALAR[item])
    if count > (r.limit - r.pos) // min_size:
        left = r.limit - r.pos
        raise r.fail(f"{key}: array claims {count} items, more than the {left} bytes left hold")
    value_start = r.pos
    if item is not ValueType.STRING:
        r.need(count * min_size, key)
        r.pos += count * min_size
        value = _numeric_array(r.buf, value_start, item, count) if key in _DECODED_ARRAYS else None
        return item, value_start, value
    if key == TOKENS_KEY and count > MAX_TOKENS:
        raise r.fail(f"{key}: {count} tokens (limit {MAX_TOKENS})")
    items = _string_items(r, key, count, decode=key in _DECODED_ARRAYS)
    return item, value_start, items


_U64 = struct.Struct("<Q").unpack_from


def _string_items(r: _Reader, key: str, count: int, *, decode: bool) -> Strings | None:
    """Walk ``count`` length-prefixed strings (a tight loop: merges hold ~10^5 of them);
    ``decode``: keep them, as ``Strings`` (where each begins, and a copy of their bytes)."""
    buf, pos, limit = r.buf, r.pos, r.limit
    end = min(len(buf), limit)  # the bytes at hand (a byte source fetches more when asked)
    first = pos
    starts = array(OFFSET) if decode else None
    r.key, r.items, r.item_start = key, count, pos
    for i in range(count):
        if pos + 8 > end:
            r.pos, r.item = pos, i
            r.need(8, f"{key} item")
            buf, end = r.buf, min(len(r.buf), limit)
        (n,) = _U64(buf, pos)
        if n > end - pos - 8:
            r.pos, r.item = pos + 8, i
            r.need(n, f"{key} item")
            buf, end = r.buf, min(len(r.buf), limit)
        if starts is not None:
            starts.append(pos - first)
        pos += 8 + n
    r.pos, r.items = pos, 0
    if starts is None:
        return None
    starts.append(pos - first)
    return Strings(_copy(buf, first, pos), starts)


def _copy(buf: Any, start: int, end: int) -> bytes:
    """Bytes [start, end) of ``buf`` (a memory map or a bytearray), copied once."""
    with memoryview(buf) as view:
        return view[start:end].tobytes()


def _numeric_array(buf: Any, start: int, item: ValueType, count: int) -> array[Any]:
    out = array(_ARRAY_CODES[item])
    with memoryview(buf) as view, view[start : start + count * out.itemsize] as items:
        out.frombytes(items.tobytes().translate(_TRUTH) if item is ValueType.BOOL else items)
    if sys.byteorder == "big":  # GGUF is little-endian
        out.byteswap()
    return out


def _read_value(r: _Reader, key: str, vtype: ValueType) -> Any:
    if vtype is ValueType.STRING:
        limit = MAX_TEMPLATE_BYTES if key.startswith(TEMPLATE_KEY) else None
        data = r.raw_string(key, limit)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise r.fail(f"{key}: not valid UTF-8 (byte {exc.start})") from None
    return r.scalar(_SCALAR[vtype], key)


def _read_key(r: _Reader, index: int) -> str:
    raw_key = r.raw_string(f"key {index}", MAX_KEY_BYTES)
    try:
        key = raw_key.decode("utf-8")
    except UnicodeDecodeError:
        raise r.fail(f"key {index} is not valid UTF-8") from None
    if not key:
        raise r.fail(f"key {index} is empty (llama.cpp refuses it)")
    r.key = key
    return key


def _read_field(r: _Reader, index: int, known: KnownFields | None = None) -> Field:
    start = r.pos
    key = _read_key(r, index)
    if known is not None:
        same = known.match(r, key, start)
        if same is not None:
            return same
        r.pos = start + 8 + len(key.encode("utf-8"))  # back after the key
    vtype = _value_type(r, key, r.u32(f"{key} type"))
    if vtype is ValueType.ARRAY:
        item, value_start, value = _read_array(r, key)
        return Field(key, vtype, item, start, value_start, r.pos, value)
    value_start = r.pos
    value = _read_value(r, key, vtype)
    return Field(key, vtype, None, start, value_start, r.pos, value)


def _read_preamble(r: _Reader, size: int) -> tuple[int, int, int]:
    if size >= 4:
        r.need(4, "the magic bytes")
    if size < 4 or bytes(r.buf[:4]) != MAGIC:
        raise r.fail("not a GGUF file (the first 4 bytes are not 'GGUF')")
    r.pos = 4
    version = r.u32("version")
    if version & 0xFFFF == 0 and version:
        raise r.fail(f"GGUF version {version:#x}: a big-endian file, which eosfix cannot read")
    if version == 1:
        raise r.fail("GGUF v1 is not supported (llama.cpp stopped reading v1 files in 2023)")
    if version not in (2, 3):
        raise r.fail(f"unsupported GGUF version {version} (eosfix reads v2 and v3)")
    n_tensors = r.u64("tensor count")
    if n_tensors > MAX_TENSORS:
        raise r.fail(f"header claims {n_tensors} tensors (limit {MAX_TENSORS})")
    n_kv = r.u64("key/value count")
    # Each pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 (value) bytes.
    if n_kv > (size - r.pos) // 14:
        raise r.fail(f"header claims {n_kv} key/value pairs, more than the {size}-byte file holds")
    return version, n_tensors, n_kv


def parse_header(
    path: Path,
    buf: Any,
    size: int,
    *,
    grow: Grow | None = None,
    known: KnownFields | None = None,
    mtime_ns: int = 0,
    inode: tuple[int, int] = (0, 0),
) -> Header:
    """Parse the key/value section of a GGUF of ``size`` bytes whose first bytes are ``buf``
    (all of them, or as many as were fetched: ``grow`` fetches more, see ``_Reader``).
    ``known``: fields of headers read before, taken as they are where this file has the very
    same bytes (the quantisations of one model share their token arrays)."""
    r = _Reader(buf, path, min(size, MAX_HEADER_BYTES), size=size, grow=grow)
    version, n_tensors, n_kv = _read_preamble(r, size)
    kv_start = r.pos
    fields = r.fields
    for index in range(n_kv):
        f = _read_field(r, index, known)
        if f.key in fields:
            raise r.fail(f"duplicate key {f.key!r} (llama.cpp refuses the file)")
        fields[f.key] = f
    return Header(
        path, version, n_tensors, kv_start - 8, kv_start, r.pos, size, mtime_ns, fields, inode
    )


def _parse(path: Path, buf: Any, st: os.stat_result) -> Header:
    return parse_header(
        path, buf, st.st_size, mtime_ns=st.st_mtime_ns, inode=(st.st_dev, st.st_ino)
    )


# A str holds up to 4 bytes a character (one wide character makes every character wide).
_CHAR_BYTES = 4


def _items_bytes(f: Field) -> Any:
    """The bytes ``f``'s decoded array holds as its file does (``Strings``' own; a numeric
    array's on a little-endian machine, but a bool array's, whose bytes are 0 and 1), which a
    kept field shares rather than copies; b"" else."""
    value = f.value
    if isinstance(value, Strings):
        return value.data
    if isinstance(value, array) and sys.byteorder == "little" and f.item_type is not ValueType.BOOL:
        return memoryview(value).cast("B")
    return b""


def _held_bytes(f: Field, size: int) -> int:
    """A bound on the memory keeping field ``f`` (``size`` bytes in its file) takes: its bytes,
    and its decoded value (computed from sizes, never by walking the value); the bytes a
    decoded array shares with the field (``_items_bytes``) are counted once."""
    value = f.value
    if isinstance(value, Strings):
        return size - len(value.data) + value.held_bytes
    if isinstance(value, array):
        return size + value.itemsize * len(value) - len(_items_bytes(f))
    return size + (len(value) if isinstance(value, str) else 0) * _CHAR_BYTES


def _holds(buf: Any, start: int, part: Any) -> bool:
    """Whether ``buf`` holds the bytes ``part`` at ``start`` (compared in place, not copied)."""
    if isinstance(buf, (bytes, bytearray)):
        return buf.startswith(part, start)
    return bool(buf[start : start + len(part)] == part)


@dataclass(frozen=True)
class _Kept:
    """A kept field and its bytes, key to end: ``head``, then ``tail``, its items' bytes
    where its decoded value holds them as the file does (``_items_bytes``: kept once)."""

    field: Field
    head: bytes
    tail: Any  # bytes-like
    held: int  # _held_bytes
    after: int  # its header's key/value bytes after it: fetched with it, in the same read

    @property
    def size(self) -> int:
        return len(self.head) + len(self.tail)

    def found_in(self, buf: Any, start: int, n: int) -> bool:
        """Whether ``buf`` holds this field's first ``n`` bytes at ``start``."""
        for part in (self.head, self.tail):
            m = min(n, len(part))
            if m:
                with memoryview(part) as view, view[:m] as first:
                    if not _holds(buf, start, first):
                        return False
            start, n = start + m, n - m
        return True

    def same(self, other: _Kept) -> bool:
        """The same bytes (one key's fields split alike: the head is the key and the counts)."""
        return self.head == other.head and self.tail == other.tail


class KnownFields:
    """Large fields of headers parsed before, with their bytes: a field of another file whose
    bytes are the same is that field (the same value, moved to where it starts here), so the
    quantisations of one model walk their token arrays once. Only fields of at least
    ``MIN_BYTES`` are kept (smaller ones parse faster than they compare), the latest
    ``per_key`` of each key.

    Bounded whatever the headers hold (a process-wide one sees every header any repo sends):
    at most ``max_fields`` fields and ``max_bytes`` bytes (``held_bytes``: each field's bytes
    and a bound on its decoded value), the least recently used going first; a field that alone
    holds more than ``max_bytes`` is never kept. The default budget holds every large field of
    one model with a 262k-token vocabulary (gemma-4's: 19 MB by that bound). Thread-safe."""

    MIN_BYTES = 4096

    def __init__(
        self, per_key: int = 4, *, max_fields: int = 64, max_bytes: int = 64 << 20
    ) -> None:
        self.per_key, self.max_fields, self.max_bytes = per_key, max_fields, max_bytes
        self._kept: OrderedDict[int, _Kept] = OrderedDict()  # least recently used first
        self._by_key: dict[str, list[int]] = {}  # key -> its entries in _kept, latest first
        self._serial = itertools.count()
        self._lock = threading.Lock()
        self.held_bytes = 0
        self.reused = 0  # fields taken from an earlier header (for tests and benchmarks)

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._by_key.clear()
            self.held_bytes = 0

    def learn(self, header: Header, buf: Any) -> None:
        """Keep ``header``'s large fields, with their bytes from ``buf`` (its file's start)."""
        for f in header.fields.values():
            size = f.end - f.start
            if size < self.MIN_BYTES or f.end > len(buf) or size > self.max_bytes:
                continue
            held = _held_bytes(f, size)
            if held > self.max_bytes:
                continue
            tail = _items_bytes(f)
            head = _copy(buf, f.start, f.end - len(tail))
            self._keep(_Kept(f, head, tail, held, header.kv_end - f.end))

    def _keep(self, kept: _Kept) -> None:
        f = kept.field
        with self._lock:
            same_key = self._by_key.setdefault(f.key, [])
            for serial in same_key:
                if self._kept[serial].same(kept):
                    self._kept.move_to_end(serial)
                    return
            serial = next(self._serial)
            self._kept[serial] = kept
            same_key.insert(0, serial)
            self.held_bytes += kept.held
            for old in same_key[self.per_key :]:
                self._drop(old)
            while self.held_bytes > self.max_bytes or len(self._kept) > self.max_fields:
                self._drop(next(iter(self._kept)))

    def _drop(self, serial: int) -> None:
        kept = self._kept.pop(serial)
        self.held_bytes -= kept.held
        same_key = self._by_key[kept.field.key]
        same_key.remove(serial)
        if not same_key:
            del self._by_key[kept.field.key]

    def match(self, r: _Reader, key: str, start: int) -> Field | None:
        """The known field ``key`` whose bytes ``r`` has at ``start`` (fetching them if need
        be), moved there, with ``r.pos`` after it. None: no such field (``r.pos`` moved)."""
        with self._lock:
            candidates = [(s, self._kept[s]) for s in self._by_key.get(key, ())]
        for serial, kept in candidates:
            f, size = kept.field, kept.size
            if size > r.limit - start:
                continue
            here = min(size, len(r.buf) - start)  # what is fetched already must agree
            if not kept.found_in(r.buf, start, here):  # (before more is fetched for it)
                continue
            if here < f.value_start - f.start:  # its key, type and length not seen yet: more
                continue  # is fetched for it only when they agree (another model's costs a read)
            r.pos = start
            r.need(min(size + kept.after, r.limit - start), key)
            if kept.found_in(r.buf, start, size):
                r.pos = start + size
                shift = start - f.start
                with self._lock:
                    self.reused += 1
                    if serial in self._kept:
                        self._kept.move_to_end(serial)
                return Field(key, f.type, f.item_type, start, f.value_start + shift,
                             f.end + shift, f.value)  # fmt: skip
        return None


def read_header(path: str | Path) -> Header:
    """Parse the key/value section of the GGUF at ``path`` (nothing past it is read)."""
    path = Path(path)
    buf, st = _open_map(path)
    try:
        return _parse(path, buf, st)
    finally:
        buf.close()


# ggml type -> (elements per block, bytes per block): ggml/src/ggml.c type_traits (the same
# table gguf-py has as GGML_QUANT_SIZES). A type not listed is one eosfix does not know: its
# tensor's size is not checked, only where its data starts.
GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}  # fmt: skip


@dataclass(frozen=True)
class Tensors:
    """What the tensor infos say: where they end, and each tensor's shape (when asked for)."""

    info_end: int
    shapes: dict[str, tuple[int, ...]] | None  # name -> ne (dims), None: not collected


def _nbytes(dims: tuple[int, ...], ggml_type: int) -> int | None:
    block = GGML_BLOCKS.get(ggml_type)
    if block is None:
        return None
    elements, size = block
    rows = 1
    for d in dims[1:]:
        rows *= d
    return (dims[0] if dims else 1) // elements * size * rows


def read_tensors(header: Header, *, shapes: bool = False, fd: int | None = None) -> Tensors:
    """Walk the tensor infos (name, dims, type, offset of each tensor) and check that every
    tensor's data lies inside the file, as llama.cpp does before it loads a model (a truncated
    download fails there: "tensor data is not within the file bounds"). ``shapes``: also
    collect name -> dims. ``fd``: read that open file (the one a writer checked is still
    the file the header was read from), not whatever ``header.path`` names now."""
    if fd is None:
        buf, st = _open_map(header.path)
    else:
        st = os.fstat(fd)
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    try:
        r = _Reader(buf, header.path, st.st_size)
        r.pos = header.kv_end
        found: dict[str, tuple[int, ...]] | None = {} if shapes else None
        last, last_name = 0, b""  # the furthest any tensor's data reaches (from data start)
        for i in range(header.n_tensors):
            name = r.raw_string(f"tensor {i} name", MAX_KEY_BYTES)
            n_dims = r.u32(f"tensor {i} dimension count")
            if n_dims > 8:
                raise r.fail(f"tensor {i} claims {n_dims} dimensions")
            r.need(n_dims * 8 + 4 + 8, f"tensor {i} info")
            dims = struct.unpack_from(f"<{n_dims}Q", buf, r.pos)
            ggml_type, offset = struct.unpack_from("<IQ", buf, r.pos + n_dims * 8)
            r.pos += n_dims * 8 + 4 + 8
            end = offset + (_nbytes(dims, ggml_type) or 0)
            if end > last:
                last, last_name = end, name
            if found is not None:
                found[name.decode("utf-8", "surrogateescape")] = tuple(dims)
        needed = data_start(header, r.pos) + last
        if header.n_tensors and needed > st.st_size:
            text = last_name.decode("utf-8", "replace")
            raise RepoLoadError(
                f"truncated: tensor {text!r} needs bytes up to {needed}, the file has "
                f"{st.st_size} (llama.cpp refuses it: tensor data is not within the file "
                "bounds; download it again)",
                path=header.path,
            )
        return Tensors(r.pos, found)
    finally:
        buf.close()


def tensor_info_end(header: Header, fd: int | None = None) -> int:
    """Offset after the tensor infos (name, dims, type, offset of each tensor); ``fd``: of
    that open file (see ``read_tensors``)."""
    return read_tensors(header, fd=fd).info_end


def data_start(header: Header, info_end: int) -> int:
    """Where tensor data begins: the tensor infos' end, padded to ``general.alignment``."""
    align = header.alignment
    return info_end + (-info_end % align)


# --- split files --------------------------------------------------------------------------


def shard_name(stem: str, no: int, count: int) -> str:
    """llama.cpp's name for shard ``no`` of ``count`` (``llama_split_path``)."""
    return f"{stem}-{no:05d}-of-{count:05d}.gguf"


def first_shard(path: Path) -> Path:
    """The shard holding the metadata (``-00001-of-0000N.gguf``) for any shard of a split."""
    m = SPLIT_NAME.match(path.name)
    if m is None or int(m["no"]) == 1:
        return path
    count = int(m["count"])
    first = path.with_name(shard_name(m["stem"], 1, count))
    if not first.exists():
        absent = [n for n in range(1, count + 1)
                  if not path.with_name(shard_name(m["stem"], n, count)).exists()]  # fmt: skip
        raise RepoLoadError(
            f"shard {int(m['no'])} of {count}; its metadata is in {first.name}, which is "
            f"missing (missing shards: {_numbers(absent)})",
            path=path,
        )
    return first


def _numbers(items: Sequence[int]) -> str:
    return ", ".join(str(i) for i in items)


def split_count(header: Header) -> int:
    """How many files the model is split into (``split.count``, which llama.cpp reads)."""
    value = header.value(SPLIT_COUNT_KEY, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def shard_paths(header: Header) -> tuple[Path, ...]:
    """Every file of the model, the first (this one) first: a split's shards as llama.cpp names
    them from the first shard's name and ``split.count``. RepoLoadError when llama.cpp cannot
    load the set: a name it cannot derive the others from, or a shard missing."""
    count, path = split_count(header), header.path
    if count <= 1:
        return (path,)
    m = SPLIT_NAME.match(path.name)
    if m is None or int(m["no"]) != 1 or int(m["count"]) != count:
        raise RepoLoadError(
            f"split into {count} files ({SPLIT_COUNT_KEY}), but its name does not end in "
            f"-00001-of-{count:05d}.gguf, so llama.cpp cannot find the other shards (it refuses "
            '"invalid split file name")',
            path=path,
        )
    paths = tuple(path.with_name(shard_name(m["stem"], n, count)) for n in range(1, count + 1))
    absent = [n for n, p in enumerate(paths, 1) if not p.is_file()]
    if absent:
        names = ", ".join(paths[n - 1].name for n in absent)
        raise RepoLoadError(
            f"shard 1 of {count}; missing shards: {_numbers(absent)} ({names}): llama.cpp "
            "loads every shard of a split",
            path=path,
        )
    return paths


def is_later_shard(path: Path) -> bool:
    m = SPLIT_NAME.match(path.name)
    return m is not None and int(m["no"]) > 1


def iter_gguf_files(folder: Path) -> Iterator[Path]:
    """Every ``*.gguf`` under ``folder`` (sorted), later shards of a split left out unless
    their first shard is missing (loading one then says which shards are)."""
    for p in sorted(folder.rglob("*.gguf")):
        if not p.is_file():
            continue
        m = SPLIT_NAME.match(p.name) if is_later_shard(p) else None
        if m is None:
            yield p
        elif not p.with_name(shard_name(m["stem"], 1, int(m["count"]))).exists():
            lowest = min(
                int(q["no"]) for q in map(SPLIT_NAME.match, (c.name for c in p.parent.iterdir()))
                if q is not None and q["stem"] == m["stem"] and q["count"] == m["count"]
            )  # fmt: skip
            if int(m["no"]) == lowest:  # one orphan shard stands for the set
                yield p


# --- the repo model -----------------------------------------------------------------------


@dataclass(frozen=True)
class GgufModel:
    """A GGUF as eosfix sees it: the header, llama.cpp's view of its vocabulary, the repo.

    ``shards``: every file of the model (a split's shards, the first one first);
    ``tensor_shapes``: name -> dims of each tensor, read only for the architectures whose
    stop keys ollama rewrites by tensor shape (None otherwise).
    """

    path: Path
    header: Header
    vocab: GgufVocab
    specials: SpecialIds
    repo: ModelRepo
    token_types: Sequence[int] | None  # tokenizer.ggml.token_type (an array of int32)
    shards: tuple[Path, ...] = ()
    tensor_shapes: dict[str, tuple[int, ...]] | None = None

    def token_text(self, token_id: int | None) -> str | None:
        tokens = self.header.value(TOKENS_KEY) or NO_STRINGS
        return tokens[token_id] if token_id is not None and 0 <= token_id < len(tokens) else None

    @property
    def architecture(self) -> str:
        value = self.header.value(ARCH_KEY, "")
        return value if isinstance(value, str) else ""

    @property
    def eos_token_ids(self) -> tuple[tuple[int, ...] | None, str]:
        """``tokenizer.ggml.eos_token_ids`` (ollama's key; llama.cpp never reads it): its
        integer items (None: absent) and its item type name (``INT32``...; a value that is not
        an array is named ``scalar <TYPE>``). Never a reason to refuse the file."""
        f = self.header.fields.get(EOS_IDS_KEY)
        if f is None:
            return None, ""
        if f.item_type is None:
            return (), f"scalar {f.type.name}"
        ints = f.item_type not in (ValueType.STRING, ValueType.BOOL, ValueType.FLOAT32,
                                   ValueType.FLOAT64)  # fmt: skip
        return (tuple(int(v) for v in f.value) if ints else ()), f.item_type.name


def _expect(header: Header, key: str, vtype: ValueType, item: ValueType | None = None) -> None:
    f = header.fields.get(key)
    if f is not None and (f.type is not vtype or f.item_type is not item):
        want = f"ARRAY of {item.name}" if item is not None else vtype.name
        raise RepoLoadError(
            f"{key} has type {f.type_name}, llama.cpp needs {want} (it refuses to load the file)",
            path=header.path,
        )


def _validate(header: Header) -> None:
    """The types llama.cpp checks for the keys eosfix reads: a mismatch fails its load."""
    for key in (MODEL_KEY, PRE_KEY):
        _expect(header, key, ValueType.STRING)
    for key, f in header.fields.items():
        if key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + "."):
            _expect(header, key, ValueType.STRING)
        elif key.startswith(KEY_PREFIX) and key.endswith("_token_id"):
            _expect(header, key, ValueType.UINT32)
        elif key == TOKENS_KEY:
            _expect(header, key, ValueType.ARRAY, ValueType.STRING)
        elif key == TOKEN_TYPE_KEY:
            _expect(header, key, ValueType.ARRAY, ValueType.INT32)
            n_tokens = len(header.value(TOKENS_KEY) or [])
            if len(f.value) < n_tokens:
                raise RepoLoadError(
                    f"{key} has {len(f.value)} entries for {n_tokens} tokens "
                    "(llama.cpp refuses the file)",
                    path=header.path,
                )
    if MODEL_KEY not in header.fields:
        raise RepoLoadError(f"no {MODEL_KEY}: not a model llama.cpp can load", path=header.path)


def _vocab(header: Header) -> GgufVocab:
    model = header.value(MODEL_KEY)
    tokens: Strings = header.value(TOKENS_KEY) or NO_STRINGS
    if not tokens and model not in ("no_vocab", "none"):
        raise RepoLoadError(f"no {TOKENS_KEY}: the file has no vocabulary", path=header.path)
    keys = {slot: header.fields[key_name(slot)].value for _, slot in ID_SLOTS
            if key_name(slot) in header.fields}  # fmt: skip
    text_ids = tokens.ids()  # built once per list, kept with it
    if text_ids.duplicate is not None:
        first, second = text_ids.duplicate
        raise RepoLoadError(
            f"{TOKENS_KEY}: {text_ids.text(second)!r} is both token {first} and {second} "
            "(llama.cpp aborts on duplicate token texts)",
            path=header.path,
        )
    return GgufVocab(model, header.value(PRE_KEY, ""), len(tokens), text_ids, keys)


# What is built from a token list beyond text -> id (the added tokens) is built once per list:
# the quantisations of one model share their lists (``KnownFields``). Keyed by the lists'
# identity; the entry holds the lists, so an id is not reused while it is here. Bounded like
# ``KnownFields``, least recently used first out: at most _SHARED_SIZE builds, from lists of
# _SHARED_ITEMS items in all; a build from a longer list is not kept.
_SHARED: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = OrderedDict()
_SHARED_LOCK = threading.Lock()
_SHARED_SIZE = 16
_SHARED_ITEMS = 1 << 19


def _is_list(part: Any) -> bool:
    return isinstance(part, Sized) and not isinstance(part, str)


def _items(parts: tuple[Any, ...]) -> int:
    return max((len(p) for p in parts if _is_list(p)), default=0)


def shared_items() -> int:
    """The list items the builds kept now hold (their bound: _SHARED_ITEMS)."""
    with _SHARED_LOCK:
        return sum(_items(parts) for parts, _ in _SHARED.values())


def _shared(parts: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    key = tuple(id(p) if _is_list(p) else p for p in parts)
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is not None and all(a is b for a, b in zip(found[0], parts, strict=True)):
            _SHARED.move_to_end(key)
            return found[1]
    value = build()
    if _items(parts) > _SHARED_ITEMS:
        return value
    with _SHARED_LOCK:
        _SHARED.pop(key, None)  # a stale entry under a reused id: the new one is the latest
        _SHARED[key] = (parts, value)
        held = sum(_items(kept) for kept, _ in _SHARED.values())
        while len(_SHARED) > _SHARED_SIZE or held > _SHARED_ITEMS:
            dropped, _ = _SHARED.popitem(last=False)[1]
            held -= _items(dropped)
    return value


def _templates(header: Header) -> tuple[ChatTemplate, ...]:
    """``tokenizer.chat_template`` is the default; ``tokenizer.chat_template.<name>`` named."""
    out: list[ChatTemplate] = []
    for key, f in header.fields.items():
        if key == TEMPLATE_KEY:
            out.insert(0, ChatTemplate("default", f.value, key))
        elif key.startswith(TEMPLATE_KEY + "."):
            out.append(ChatTemplate(key[len(TEMPLATE_KEY) + 1 :], f.value, key))
    return tuple(out)


_ADDED_TYPES = frozenset({CONTROL, USER_DEFINED})


def _added_tokens(tokens: Sequence[str], types: Sequence[int] | None) -> dict[str, TokenInfo]:
    """Control tokens (special) and user-defined ones (added, not special), as a folder's
    ``added_tokens_decoder`` would list them."""
    out: dict[str, TokenInfo] = {}
    types = types or ()
    for i in itertools.compress(range(len(tokens)), map(_ADDED_TYPES.__contains__, types)):
        text = tokens[i]
        out[text] = TokenInfo(text, i, types[i] == CONTROL, False, TOKEN_TYPE_KEY)
    return out


def load_gguf(path: str | Path) -> GgufModel:
    """Read the GGUF at ``path`` (a later shard of a split is read from the first).

    Refused as llama.cpp refuses it: a key of the wrong type, a tensor whose data lies
    outside its file (a truncated download), a split with a shard missing.
    """
    path = first_shard(Path(path))
    header = read_header(path)
    _validate(header)
    arch = header.value(ARCH_KEY, "")
    tensors = read_tensors(header, shapes=arch in SHAPE_ARCHITECTURES)
    shards = shard_paths(header)
    for shard in shards[1:]:
        read_tensors(read_header(shard))
    return model_from_header(header, shards=shards, tensor_shapes=tensors.shapes)


def model_from_header(
    header: Header,
    *,
    shards: tuple[Path, ...] = (),
    tensor_shapes: dict[str, tuple[int, ...]] | None = None,
) -> GgufModel:
    """The ``GgufModel`` of a parsed header (``_validate`` is applied here too): what
    ``load_gguf`` returns for a local file, and what a file read by ranges gives, whose
    tensor infos are never read (``tensor_shapes`` None)."""
    _validate(header)
    path = header.path
    vocab = _vocab(header)
    specials = special_ids(vocab)
    tokens: Strings = header.value(TOKENS_KEY) or NO_STRINGS
    types: array[int] | None = header.value(TOKEN_TYPE_KEY)
    # llama.cpp renders the template with the text of its bos/eos ids (common/chat.cpp)
    named = {f"{r}_token": tokens[i] for r in ("bos", "eos") if (i := specials.get(r)) is not None}
    added = _shared(("added", tokens, types), lambda: _added_tokens(tokens, types))
    repo = ModelRepo(
        root=path,
        templates=_templates(header),
        special_tokens=named,
        added_tokens=added,
        vocabulary=GgufTokens(tokens.ids(), tokens, types, vocab.model),
    )
    return GgufModel(
        path, header, vocab, specials, repo, types or None,
        shards or (path,), tensor_shapes,
    )  # fmt: skip
