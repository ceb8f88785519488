"""A GGUF's string arrays as the file holds them, and llama.cpp's text -> id over a token list:
memory in proportion to the bytes, never a Python object per item.

A header may hold 4M tokens in 128 MiB (the reader's limits). A str per token and a dict over
them take ~600 MB for such a list, and millions of small objects, freed while other threads
allocate, leave the allocator's arenas holding pages the process never gives back: a server's
resident memory stays up long after the check. So:

- ``Strings``: one string array, as the array's bytes (its items with their 8-byte length
  prefixes, copied once from the file) and an ``array`` of 4-byte offsets, where each item
  begins; an item is decoded when asked for (UTF-8; bytes that are not UTF-8 are kept as
  ``surrogateescape`` keeps them, so that distinct bytes are distinct texts).
- ``TokenIds``: llama.cpp's ``token_to_id`` over a token list (an empty text is
  ``[EMPTY_<id>]``): an open-addressing table of 4-byte ids, at most half full, keyed by
  ``hash()`` of each text's bytes (SipHash, seeded per process: a hostile list cannot aim its
  texts at one slot). Built once per list, on first use, and kept with it (the quantisations
  of one model share their lists, ``read.KnownFields``). Building it finds the first text
  that two tokens share, which llama.cpp aborts on.

The list as a repo's vocabulary (text <-> id, ids as text) is ``eosfix.containers.gguf.pieces``.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from itertools import count, islice
from typing import Any, overload

PREFIX = 8  # an item's length, a little-endian u64, before its bytes
# An offset into one array's bytes: 4 bytes hold every header (MAX_HEADER_BYTES is 128 MiB).
OFFSET = next(code for code in "IL" if array(code).itemsize >= 4)
SLOT = OFFSET  # a table slot: 0 empty, else a token id + 1 (at most MAX_TOKENS)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class Strings(Sequence[str]):
    """The items of one GGUF string array: ``data`` holds them as the file does (each a u64
    length and its bytes), item ``i`` spanning ``data[starts[i]:starts[i + 1]]``."""

    __slots__ = ("_ids", "_lock", "data", "starts")

    def __init__(self, data: bytes, starts: array[int]) -> None:
        self.data, self.starts = data, starts  # ``starts``: one offset more than items
        self._ids: TokenIds | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.starts) - 1

    def raw(self, i: int) -> bytes:
        """Item ``i``'s bytes (0 <= i < len)."""
        return self.data[self.starts[i] + PREFIX : self.starts[i + 1]]

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [_decode(self.raw(j)) for j in range(*i.indices(len(self)))]
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("string array index out of range")
        return _decode(self.raw(j))

    def _raws(self) -> Iterator[bytes]:
        """Every item's bytes, in order (sliced at C speed: no Python loop)."""
        n, starts = len(self), self.starts
        begins = map(PREFIX.__add__, islice(starts, n))
        return map(self.data.__getitem__, map(slice, begins, islice(starts, 1, None)))

    def __iter__(self) -> Iterator[str]:
        return map(_decode, self._raws())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Strings):
            return self.data == other.data  # the same bytes parse to the same items
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by value, like the list it was

    def __repr__(self) -> str:
        return f"Strings({len(self)} items, {len(self.data)} bytes)"

    @property
    def held_bytes(self) -> int:
        """A bound on the memory this list holds: its bytes, its offsets, and the table its
        ``ids()`` builds (counted whether built yet or not)."""
        n = len(self)
        return len(self.data) + self.starts.itemsize * (n + 1) + array(SLOT).itemsize * _slots(n)

    def ids(self) -> TokenIds:
        """llama.cpp's text -> id over this list as a token list (built once, then kept)."""
        with self._lock:
            if self._ids is None:
                self._ids = TokenIds(self)
            return self._ids


NO_STRINGS = Strings(b"", array(OFFSET, [0]))


def _slots(n: int) -> int:
    """Table slots for ``n`` texts: a power of two, at least twice ``n`` (at most half full)."""
    return 1 << max(3, (2 * n - 1).bit_length())


def _empty_key(token_id: int) -> bytes:
    return f"[EMPTY_{token_id}]".encode()


class TokenIds(Mapping[str, int]):
    """llama.cpp's ``token_to_id`` of a token list (see the module): a Mapping, iterated in id
    order. ``duplicate``: (first id, second id) of the first text two tokens share, found while
    building (then the table is left incomplete: llama.cpp refuses such a list).

    A slot holds id + 1 in its low bits and, above them, more bits of the text's hash (a tag),
    so that a slot taken by another text is passed without reading that text's bytes."""

    def __init__(self, tokens: Strings) -> None:
        # The list keeps its table: the table reads the same bytes through a list of its own,
        # not that one (a reference cycle would hold both until the garbage collector runs).
        self._tokens = tokens = Strings(tokens.data, tokens.starts)
        self.duplicate: tuple[int, int] | None = None
        n = len(tokens)
        self._bits = bits = max(1, n.bit_length())  # id + 1 <= n < 2**bits
        self._ids = (1 << bits) - 1
        self._tags = tags = (1 << max(0, 8 * array(SLOT).itemsize - bits)) - 1
        size = _slots(n)
        self._mask = mask = size - 1
        self._table = table = array(SLOT, bytes(array(SLOT).itemsize * size))
        self._empty: list[int] = []  # ids of empty texts
        for i, h in enumerate(map(hash, tokens._raws()), 1):  # i: id + 1
            j = h & mask
            if h and not table[j]:  # most texts: a free slot at once
                table[j] = ((h >> 32) & tags) << bits | i
                continue
            if not h:
                h = self._empty_hash(i - 1)
                j = h & mask
            slot = ((h >> 32) & tags) << bits | i
            while k := table[j]:  # taken: the same text (same tag, then bytes), or another
                if not (k ^ slot) >> bits and self._same(k, i - 1):
                    return
                j = (j + 1) & mask
            table[j] = slot

    def _empty_hash(self, token_id: int) -> int:
        """The hash of token ``token_id``'s key, whose bytes hash to 0: an empty text is
        ``[EMPTY_<id>]`` (``hash(b"")`` is 0; another text that hashes to 0 is itself)."""
        starts = self._tokens.starts
        if starts[token_id + 1] - starts[token_id] != PREFIX:
            return 0
        self._empty.append(token_id)
        return hash(_empty_key(token_id))

    def _same(self, slot: int, token_id: int) -> bool:
        """Whether the token in ``slot`` has ``token_id``'s text (then it is ``duplicate``)."""
        other = (slot & self._ids) - 1
        if self._key(other) != self._key(token_id):
            return False
        self.duplicate = (other, token_id)
        return True

    def _key(self, token_id: int) -> bytes:
        raw = self._tokens.raw(token_id)
        return raw if raw else _empty_key(token_id)

    def get(self, text: str, default: Any = None) -> Any:
        try:
            key = text.encode("utf-8", "surrogateescape")
        except (UnicodeEncodeError, AttributeError):  # no token decodes to it; not a str
            return default
        table, mask, bits, ids = self._table, self._mask, self._bits, self._ids
        h = hash(key)
        j, tag = h & mask, (h >> 32) & self._tags
        while k := table[j]:
            if k >> bits == tag and self._key((k & ids) - 1) == key:
                return (k & ids) - 1
            j = (j + 1) & mask
        return default

    def __getitem__(self, text: str) -> int:
        found = self.get(text)
        if found is None:
            raise KeyError(text)
        return int(found)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.get(text) is not None

    def __len__(self) -> int:
        return len(self._tokens)

    def __iter__(self) -> Iterator[str]:
        if not self._empty:
            return iter(self._tokens)
        return (t or f"[EMPTY_{i}]" for i, t in enumerate(self._tokens))

    def items(self) -> ItemsView[str, int]:
        return _InOrder(self)

    def text(self, token_id: int) -> str | None:
        """The text ``token_id`` has here (``[EMPTY_<id>]`` for an empty one), None: no such
        token."""
        if not 0 <= token_id < len(self._tokens):
            return None
        return self._tokens[token_id] or f"[EMPTY_{token_id}]"


class _InOrder(ItemsView[str, int]):
    """(text, id) in id order, without looking each text up again."""

    _mapping: TokenIds

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self._mapping, count())
