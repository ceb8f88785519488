"""What the runtimes read from a folder's files, resolved to ids (``StopInputs``).

Shared by the folder's EOS015 check (would writing generation_config.json make a runtime
stop?) and its per-runtime verdict table. ``known``: token text -> id of what the analysis
resolved (the terminators), for the runtimes that look tokens up by text. llama.cpp's
converter reads the folder too (gguf-py ``SpecialVocab``, ``gguf/vocab.py``):
``tokenizer_config.json``'s ``eos_token`` looked up in tokenizer.json's ``added_tokens`` (first
match) and the tokenizer's post-processor, only then config.json's integer ``eos_token_id``;
the folder's reader has read both parts of tokenizer.json already
(``ModelRepo.tokenizer_head``), so ``converter_inputs`` reads no file. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosfix.core.models import eos_tuple, well_formed_eos
from eosfix.core.repo import TOKENIZER_CONFIG, ModelRepo, TokenInfo
from eosfix.runtimes import StopInputs
from eosfix.runtimes.llamacpp import ConverterInputs, converter_special_ids
from eosfix.runtimes.rule import Layout, Malformed


def token_ids(
    repo: ModelRepo, known: Mapping[str, int | None], eos: TokenInfo | None
) -> dict[str, int]:
    """Token text -> id for what the runtimes look up by text (added tokens, terminators)."""
    vocab = {c: info.id for c, info in repo.added_tokens.items() if info.id is not None}
    for content, token_id in known.items():
        if token_id is not None:
            vocab.setdefault(content, token_id)
    if eos is not None and eos.id is not None:
        vocab.setdefault(eos.content, eos.id)
    return vocab


def eos_value(data: Mapping[str, Any] | None) -> tuple[tuple[int, ...] | None, bool]:
    """(ids, written as a list) of an object's ``eos_token_id``; (None, False) if unusable."""
    raw = None if data is None else data.get("eos_token_id")
    return (eos_tuple(raw), isinstance(raw, list)) if well_formed_eos(raw) else (None, False)


def inputs_from_files(
    gen: Mapping[str, Any] | None,
    cfg: Mapping[str, Any] | None,
    repo: ModelRepo,
    known: Mapping[str, int | None],
    eos: TokenInfo | None,
    bom: frozenset[str] = frozenset(),
    unreadable: frozenset[str] = frozenset(),
) -> StopInputs:
    """StopInputs from generation_config.json / config.json objects (``None``: file absent,
    or not JSON at all); ``bom``: the files that start with a byte-order mark; ``unreadable``:
    the files that are not JSON at all."""
    gen_eos, gen_list = eos_value(gen)
    raw = None if gen is None else gen.get("eos_token_id")
    malformed = None if raw is None or well_formed_eos(raw) else Malformed(raw)
    cfg_eos, cfg_list = eos_value(cfg)
    text_config = cfg.get("text_config") if cfg is not None else None
    text = text_config if isinstance(text_config, dict) else None
    text_eos, _ = eos_value(text)
    return StopInputs(
        tokenizer_eos_id=eos.id if eos is not None else None,
        tokenizer_eos_content=eos.content if eos is not None else None,
        generation_config_exists=gen is not None,
        generation_config_eos=gen_eos,
        generation_config_has_eos_key=gen is not None and "eos_token_id" in gen,
        generation_config_eos_is_list=gen_list,
        config_eos=cfg_eos,
        config_eos_is_list=cfg_list,
        text_config_eos=text_eos,
        vocab=token_ids(repo, known, eos),
        gguf_special_ids=converter_special_ids(converter_inputs(repo, cfg)),
        added_tokens={c: i.id for c, i in repo.added_tokens.items() if i.id is not None},
        config_model_type=_model_type(cfg),
        config_has_eos_key=cfg is not None and "eos_token_id" in cfg,
        text_config_present=text is not None,
        text_config_model_type=_model_type(text),
        text_config_has_eos_key=text is not None and "eos_token_id" in text,
        bom=bom,
        unreadable=unreadable,
        layout=layout(repo),
        generation_config_eos_malformed=malformed,
    )


def layout(repo: ModelRepo) -> Layout:
    """What in the folder decides whether a runtime opens a file: an ``added_tokens_decoder``
    in tokenizer_config.json (transformers then never opens special_tokens_map.json)."""
    tok = repo.tokenizer_config
    return Layout(added_tokens_decoder=tok is not None and tok.added_tokens_decoder is not None)


def _model_type(data: Mapping[str, Any] | None) -> str | None:
    value = None if data is None else data.get("model_type")
    return value if isinstance(value, str) else None


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
