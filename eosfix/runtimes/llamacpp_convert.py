"""What llama.cpp's converter reads of a folder to set a GGUF's special-token keys.

gguf-py ``SpecialVocab`` (``gguf/vocab.py``) looks ``tokenizer_config.json``'s ``eos_token`` up
in tokenizer.json's ``added_tokens`` (first match) and reads the tokenizer's post-processor;
only then config.json's integer ``eos_token_id``. The folder's reader has read both parts of
tokenizer.json already (``ModelRepo.tokenizer_head``): this view reads no file. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosfix.core.repo import TOKENIZER_CONFIG, ModelRepo
from eosfix.runtimes.llamacpp import ConverterInputs


def converter_inputs(repo: ModelRepo, config: Mapping[str, Any] | None) -> ConverterInputs:
    """The folder as ``SpecialVocab`` sees it; ``config`` is config.json's object (or None)."""
    head = repo.tokenizer_head
    tok = repo.files.get(TOKENIZER_CONFIG)
    added = tuple((t.content, t.id) for t in head.added if t.id is not None) if head else ()
    return ConverterInputs(
        has_tokenizer_json=head is not None,
        added_tokens=added,
        tokenizer_config=None if tok is None else tok.data,
        config=config,
        trailing_special=head.trailing_special if head else None,
    )
