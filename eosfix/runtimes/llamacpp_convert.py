"""What llama.cpp's converter reads of a folder to set a GGUF's special-token keys.

gguf-py ``SpecialVocab`` (``gguf/vocab.py``) looks ``tokenizer_config.json``'s ``eos_token`` up
in tokenizer.json's ``added_tokens`` (first match) and reads the tokenizer's post-processor;
only then config.json's integer ``eos_token_id``. Only those two parts of tokenizer.json are
decoded (both sit near the top of the file); the result is cached per file version.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from eosfix.core.repo import TOKENIZER_CONFIG, TOKENIZER_JSON, ModelRepo
from eosfix.runtimes.llamacpp import ConverterInputs

_WINDOW = 4 * 1024 * 1024


def _decode_at(raw: bytes, key: bytes) -> Any:
    """The JSON value of the first ``"key":`` in ``raw``, decoding only a window around it."""
    at = raw.find(key)
    if at < 0:
        return None
    colon = raw.find(b":", at + len(key))
    for end in (colon + 1 + _WINDOW, len(raw)):
        text = raw[colon + 1 : end].decode("utf-8", "ignore").lstrip()
        try:
            return json.JSONDecoder().raw_decode(text)[0]
        except json.JSONDecodeError:
            continue
    return None


def _trailing_special(post: Any) -> str | None:
    """gguf/vocab.py: the last ``SpecialToken`` of a ``TemplateProcessing`` single template."""
    if not isinstance(post, dict):
        return None
    last = None
    for proc in post.get("processors", [post]):
        single = proc.get("single", []) if isinstance(proc, dict) else []
        if (
            proc.get("type") == "TemplateProcessing"
            and isinstance(single, list)
            and len(single) > 1
        ):
            tail = single[-1] if isinstance(single[-1], dict) else {}
            special = tail.get("SpecialToken", {})
            last = special.get("id") if isinstance(special, dict) else None
    return last if isinstance(last, str) else None


@functools.lru_cache(maxsize=64)
def _tokenizer_json(
    path: str, size: int, mtime_ns: int
) -> tuple[tuple[tuple[str, int], ...], str | None]:
    with open(path, "rb") as fh:
        raw = fh.read()
    added = _decode_at(raw, b'"added_tokens"')
    items = tuple(
        (a["content"], a["id"])
        for a in (added if isinstance(added, list) else [])
        if isinstance(a, dict)
        and isinstance(a.get("content"), str)
        and isinstance(a.get("id"), int)
    )
    return items, _trailing_special(_decode_at(raw, b'"post_processor"'))


def converter_inputs(repo: ModelRepo, config: Mapping[str, Any] | None) -> ConverterInputs:
    """The folder as ``SpecialVocab`` sees it; ``config`` is config.json's object (or None)."""
    path = repo.root / TOKENIZER_JSON
    tok = repo.files.get(TOKENIZER_CONFIG)
    added: tuple[tuple[str, int], ...] = ()
    trailing = None
    try:
        st = path.stat()
        if path.is_file():
            added, trailing = _tokenizer_json(str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        pass
    return ConverterInputs(
        has_tokenizer_json=path.is_file(),
        added_tokens=added,
        tokenizer_config=None if tok is None else tok.data,
        config=config,
        trailing_special=trailing,
    )
