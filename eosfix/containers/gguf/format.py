"""The GGUF format as eosfix reads and writes it: every key name, the value types, the token
types.

The one place a GGUF key is named. llama.cpp's rule (``eosfix.runtimes.llamacpp``) and ollama's
(``eosfix.runtimes.ollama``) speak of a special-token id by its *slot*, the key's name between
``tokenizer.ggml.`` and ``_token_id`` (``eos``, ``eot``, ``unknown``, ``prefix``...), and of the
other fields the compatibility layer rewrites by the short names of ``FIELD_KEYS``; the reader
and the writer turn slots and fields into keys here. Names as llama.cpp defines them
(``src/llama-arch.cpp`` ``LLM_KV_*``; ``tokenizer.ggml.eos_token_ids`` is ollama's key).
"""

from __future__ import annotations

import enum

MAGIC = b"GGUF"
KEY_PREFIX = "tokenizer.ggml."
TEMPLATE_KEY = "tokenizer.chat_template"
TOKENS_KEY = "tokenizer.ggml.tokens"
TOKEN_TYPE_KEY = "tokenizer.ggml.token_type"
MODEL_KEY = "tokenizer.ggml.model"
PRE_KEY = "tokenizer.ggml.pre"
ALIGNMENT_KEY = "general.alignment"
SPLIT_COUNT_KEY = "split.count"
ARCH_KEY = "general.architecture"
EOS_IDS_KEY = "tokenizer.ggml.eos_token_ids"  # ollama's list; llama.cpp never reads it

# The other fields ollama's compatibility layer rewrites, by the names its rule uses.
FIELD_KEYS = {
    "architecture": ARCH_KEY,
    "model": MODEL_KEY,
    "pre": PRE_KEY,
    "tokens": TOKENS_KEY,
    "eos_token_ids": EOS_IDS_KEY,
}

# tokenizer.ggml.token_type values: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


def key_name(slot: str) -> str:
    """The key of a special-token id slot (``eot`` -> ``tokenizer.ggml.eot_token_id``)."""
    return f"{KEY_PREFIX}{slot}_token_id"


def id_slot(key: str) -> str | None:
    """The slot a ``tokenizer.ggml.*_token_id`` key holds (None: not such a key)."""
    if key.startswith(KEY_PREFIX) and key.endswith("_token_id"):
        return key[len(KEY_PREFIX) : -len("_token_id")]
    return None


def field_key(field: str) -> str:
    """The key of a field ollama's compatibility layer rewrites: a slot or a ``FIELD_KEYS``
    name."""
    return FIELD_KEYS.get(field) or key_name(field)
