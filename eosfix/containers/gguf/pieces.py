"""A GGUF's token ids as text, the way llama.cpp writes each token's piece.

llama.cpp turns an id into text by the vocabulary's type (``tokenizer.ggml.model``) and the
token's type (``tokenizer.ggml.token_type``; normal when the file has none):
ggml-org/llama.cpp@00ad355e ``src/llama-vocab.cpp`` ``llama_vocab::impl::token_to_piece``.
A control, unknown or user-defined token is its text; an unused one nothing. A normal token of a SentencePiece
vocabulary (``llama``) is its text with ``▁`` as a space, a byte token (``<0x0A>``) its byte;
a normal token of a byte-level BPE vocabulary (``gpt2``) is its text read through GPT-2's byte
alphabet (``llama_decode_text``, which marks a character outside it ``[UNK_BYTE_0x...]``). Other vocabulary types (``t5``, ``rwkv``, ...) are not read here: ``decode`` says
None, and the caller says the text is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from eosfix.containers.gguf.format import (
    BYTE,
    CONTROL,
    NORMAL,
    TOKENS_KEY,
    UNKNOWN,
    USER_DEFINED,
)
from eosfix.containers.gguf.tokens import TokenIds

SPM, BPE = "llama", "gpt2"
DECODED_MODELS = (SPM, BPE)
_SPACE_MARK = "\u2581"


@cache
def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte: printable Latin-1 bytes stand for
    themselves, every other byte for the next code point from 256 on, in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    out = {chr(b): b for b in kept}
    n = 0
    for b in range(256):
        if b not in out.values():
            out[chr(256 + n)] = b
            n += 1
    return out


def _bpe_bytes(text: str) -> bytes:
    """The bytes a byte-level piece stands for. A character outside the alphabet (a token the
    vocabulary got wrong) is written as llama.cpp's ``llama_decode_text`` writes it:
    ``[UNK_BYTE_0x`` + its UTF-8 in hex + the whole token's text + ``]``."""
    alphabet = _byte_alphabet()
    out = []
    for c in text:
        if c in alphabet:
            out.append(bytes([alphabet[c]]))
        else:
            out.append(b"[UNK_BYTE_0x" + c.encode("utf-8").hex().encode() + text.encode() + b"]")
    return b"".join(out)


def _spm_byte(text: str) -> bytes:
    """``<0x0A>`` -> b"\\n"; a byte token of another shape is kept as its text."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        try:
            return bytes([int(text[3:5], 16)])
        except ValueError:
            pass
    return text.encode("utf-8")


def piece(model: str, text: str, token_type: int) -> bytes:
    """The bytes llama.cpp writes for one token (``model`` one of ``DECODED_MODELS``)."""
    if token_type == NORMAL:
        if model == SPM:
            return text.replace(_SPACE_MARK, " ").encode("utf-8")
        return _bpe_bytes(text)
    if token_type == BYTE:
        return _spm_byte(text) if model == SPM else _bpe_bytes(text)
    if token_type in (UNKNOWN, CONTROL, USER_DEFINED):
        return text.encode("utf-8")
    return b""  # unused or undefined: llama.cpp writes nothing


class GgufTokens:
    """A GGUF's token list as a repo's full vocabulary (``eosfix.core.repo.Vocabulary``):
    text <-> id (``eosfix.containers.gguf.tokens.TokenIds``), and ids turned into text
    (``decode``); no encoder."""

    source = TOKENS_KEY
    available = True

    def __init__(
        self, ids: TokenIds, tokens: Sequence[str], types: Sequence[int] | None, model: str
    ) -> None:
        self._ids = ids
        self._tokens = tokens
        self._types = types
        self.model = model

    def token_to_id(self, content: str) -> int | None:
        return self._ids.get(content)

    def id_to_token(self, token_id: int) -> str | None:
        return self._ids.text(token_id)  # an empty text is [EMPTY_<id>], as llama.cpp names it

    def tokenizer(self) -> Any:
        return None  # no encoder: explain shows no tokenized probe for this container

    def decode(self, ids: Sequence[int]) -> str | None:
        if self.model not in DECODED_MODELS:
            return None
        out = []
        for i in ids:
            if 0 <= i < len(self._tokens):
                kind = (
                    self._types[i] if self._types is not None and i < len(self._types) else NORMAL
                )
                out.append(piece(self.model, self._tokens[i], kind))
        return b"".join(out).decode("utf-8", errors="replace")
