"""A GGUF that is not here (a file on the Hub): its header read by byte ranges, through the
reader local files use, and the quantisations of one model compared on their stop keys.

Vocabulary:

- **byte ranges**: where the bytes come from (``ByteRanges``: ``eosfix.sources.hub.ranges``
  sends HTTP range requests). ``read.parse_header`` asks for more whenever a read runs past
  what is here; every bound against a hostile header is the local reader's (a count or a
  length is checked against the file's size and MAX_HEADER_BYTES before anything is fetched).
- **reads**: the key/value section only, never the tensor infos or a tensor. The stop keys
  (eos/eot/eom ids, the chat template) come after the token arrays (gguf-py 0.19.0
  ``gguf/vocab.py`` ``SpecialVocab.add_to_gguf`` writes merges, then the ids, then the
  template), so the whole section is read: ~6-8 MB for 128k-152k-token vocabularies, under
  1 MB for 32k ones. The first read (``FIRST_READ``) finishes a 32k vocabulary; otherwise it
  reaches into the token list, whose count and mean item size size a second read up to the
  projected end of the section; a third tops it up if that fell short. A file read after
  another quantisation of the same model (``hint``) is read in one request sized from it.
- **stop fields**: what decides where generation stops (``STOP_KEYS``: the tokenizer's keys
  but merges and scores, and the architecture). Quantisations of one conversion share them;
  one made from an older conversion often does not (``differences``).

Pure but for the byte source it is given: no network here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eosfix.containers.gguf.format import ARCH_KEY, MODEL_KEY, TOKENS_KEY
from eosfix.containers.gguf.read import (
    Header,
    KnownFields,
    _Reader,
    parse_header,
)
from eosfix.core.errors import RepoLoadError

FIRST_READ = 1 << 20  # a 32k-token vocabulary's whole key/value section (~0.7 MB) fits
# How the next read is sized (``_projected_end``). Tuned on every vocabulary llama-cpp-python
# 0.3.36's sdist ships (models/ggml-vocab-*.gguf: 19 files, 0.6-15.8 MB of keys) and on Qwen3's
# and Llama-3's real token lists: each is read in at most 3 requests, ending at most 5% of its
# key/value section past it (tests/containers/gguf/test_remote.py).
TRAILING = 16 << 10  # after the token arrays: the ids, flags, the template (0.3-17 kB)...
HINT_SLACK = 4 << 10  # a sibling's section size, give or take its own few keys
TOKENS_GROWTH = 1.25  # the rest of a token list: later tokens are longer (Qwen3, Llama-3: 1.2x)
REST_GROWTH = 1.1  # the rest of another string array (merges), from its mean so far
MERGE_SIZE = 1.0  # merges still to come: one per token (Qwen3; Llama-3 has 2.2), a token long
MERGES_KEY = "tokenizer.ggml.merges"
SCORES_KEY = "tokenizer.ggml.scores"
TOKEN_TYPE_KEY = "tokenizer.ggml.token_type"
# The key/values that decide where generation stops: every tokenizer key but the two that only
# tokenize (merges, scores), and the architecture (ollama's compatibility layer reads it).
_NOT_STOP = frozenset({MERGES_KEY, SCORES_KEY})


class ByteRanges(Protocol):
    """A file read by ranges: ``read_into(buf, end)`` appends to ``buf`` the file's bytes
    [len(buf), end) (fewer only at the end of the file), as they come (a header's bytes are
    held once, in the reader's buffer); ``size`` is the file's, known once the first read is
    done."""

    size: int | None

    def read_into(self, buf: bytearray, end: int) -> None: ...


def read_remote_header(
    name: str,
    source: ByteRanges,
    *,
    known: KnownFields | None = None,
    hint: Header | None = None,
) -> Header:
    """Parse the key/value section of the GGUF ``source`` reads (``name``: how errors name
    it, ``org/repo/file.gguf``), fetching as the module says. ``known``: fields of headers
    read before (their bytes compared, not walked again; this header's are added); ``hint``:
    the header of a quantisation of the same model, which sizes the one read."""
    buf = bytearray()
    source.read_into(buf, _first_end(hint))
    if source.size is None:
        raise RepoLoadError("the server did not say how large the file is", path=name)
    path = Path(name)

    def grow(r: _Reader, n: int) -> None:
        want = r.pos + n
        end = min(r.limit, max(want, _projected_end(r, n, hint)))
        source.read_into(r.buf, end)
        if len(r.buf) < want:
            raise RepoLoadError(
                f"the server sent {len(r.buf)} bytes of a {r.size}-byte file where the "
                f"header needs {want}",
                path=name,
            )

    header = parse_header(path, buf, source.size, grow=grow, known=known)
    if known is not None:
        known.learn(header, buf)
    return header


def _first_end(hint: Header | None) -> int:
    return FIRST_READ if hint is None else hint.kv_end + HINT_SLACK


def _projected_end(r: _Reader, n: int, hint: Header | None) -> int:
    """Where the key/value section probably ends, from what was parsed so far: the rest of
    the string array being read, the arrays that follow the token list (types and, for a
    SentencePiece vocabulary, scores: 4 bytes a token; for a BPE one, merges: about one per
    token, the size of a token each) and ``TRAILING`` for the keys after them. Items grow
    longer along a vocabulary (BPE adds longer merges last), so the rest of an array is
    projected at more than the mean so far (``*_GROWTH``). Meant to fall short rather than
    overshoot:
    a shortfall costs one more read, an overshoot reads tensor infos (or data) for nothing.
    The caller caps it at the file's end."""
    if hint is not None and hint.kv_end > r.pos + n:
        return hint.kv_end + HINT_SLACK
    fields = r.fields
    model = fields.get(MODEL_KEY)
    bpe = model is not None and model.value == "gpt2"
    if r.items and r.item:  # inside a string array: its rest, growing
        mean = (r.pos - r.item_start) / r.item
        grows = TOKENS_GROWTH if r.key == TOKENS_KEY else REST_GROWTH
        end = r.pos + int((r.items - r.item) * mean * grows)
        if r.key == TOKENS_KEY:
            per_token = (end - r.item_start) / r.items
            end += (
                2 * (64 + 4 * r.items)
                if not bpe
                else 64 + 4 * r.items + 64 + int(r.items * per_token * MERGE_SIZE)
            )
        return end + TRAILING
    tokens = fields.get(TOKENS_KEY)
    if tokens is not None and r.key in (TOKEN_TYPE_KEY, SCORES_KEY) and bpe:
        count = len(tokens.value)
        per_token = (tokens.end - tokens.value_start) / max(count, 1)
        return r.pos + n + 64 + int(count * per_token * MERGE_SIZE) + TRAILING  # merges to come
    return r.pos + n + TRAILING


# --- comparing the quantisations of one model -----------------------------------------------


def stop_fields(header: Header) -> dict[str, Any]:
    """The values that decide where generation stops (see the module), by key."""
    return {
        k: (f.type, f.item_type, f.value)
        for k, f in header.fields.items()
        if (k.startswith("tokenizer.") and k not in _NOT_STOP) or k == ARCH_KEY
    }


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys whose stop values differ between two files (present in one only, too)."""
    return tuple(sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)))


@dataclass(frozen=True)
class Alike:
    """Files whose stop fields are equal: ``names`` (the first one stands for them)."""

    names: tuple[str, ...]
    fields: dict[str, Any]


def group_alike(files: Sequence[tuple[str, Header]]) -> tuple[Alike, ...]:
    """The files in groups of equal stop fields, biggest group first (ties: first seen)."""
    groups: list[tuple[list[str], dict[str, Any]]] = []
    for name, header in files:
        fields = stop_fields(header)
        for names, seen in groups:
            if seen == fields:
                names.append(name)
                break
        else:
            groups.append(([name], fields))
    order = sorted(range(len(groups)), key=lambda i: -len(groups[i][0]))
    return tuple(Alike(tuple(groups[i][0]), groups[i][1]) for i in order)
