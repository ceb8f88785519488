"""What transformers stops on in a folder today, and the list ``fix`` writes.

transformers reads generation_config.json alone; only a missing file falls back to
config.json (its ``eos_token_id``, else ``text_config.eos_token_id``). The list written keeps
the existing ids first, in their order. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from eosfix.analysis.terminators import Terminator
from eosfix.core.models import eos_tuple
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, ModelRepo, TokenInfo
from eosfix.decide.stops import StopConfig


def current_stop_config(repo: ModelRepo) -> StopConfig:
    """transformers reads generation_config.json alone; only a missing file falls back."""
    if repo.generation_config is not None:  # a value that is not ids: the ids it names
        gen = repo.generation_config
        return StopConfig(gen.eos_ids, GENERATION_CONFIG, gen.eos_token_id)
    if repo.config is not None:
        if repo.config.eos_token_id is not None:
            raw = repo.config.eos_token_id
            return StopConfig(eos_tuple(raw), CONFIG, raw)
        if repo.config.text_config is not None and repo.config.text_config.eos_token_id is not None:
            raw = repo.config.text_config.eos_token_id
            return StopConfig(eos_tuple(raw), f"{CONFIG} text_config", raw)
    return StopConfig(None, "none", None)


def propose_eos(
    current: tuple[int, ...] | None,
    eos: TokenInfo | None,
    terminators: Iterable[Terminator],
    remove: Collection[int] = (),
    *,
    always: bool = False,
    rewrite: bool = False,
) -> tuple[int, ...] | None:
    """The list to write, or None when it would not change what transformers stops on.

    Existing ids first in their order (transformers pads with the first; ExLlamaV2 keeps only
    the first), minus ``remove`` (ids that cut a reply or are no token), then the tokenizer's
    eos when a terminator is added (TGI and mlx-lm before 0.32 replace it with the list),
    then each missing terminator id. ``always``: the list even when nothing changes (a
    runtime that reads generation_config.json needs it written as a list); ``rewrite``: the
    list even when the ids are complete, without adding the tokenizer's eos (the value is
    not ids: EOS018).
    """
    before = list(current or ())
    have = [i for i in before if i not in remove]
    missing = [t.id for t in terminators if t.id is not None and t.id not in have]
    if not missing and have == before and not always:
        return tuple(dict.fromkeys(have)) if rewrite else None
    extra = [eos.id] if eos is not None and eos.id is not None and (missing or always) else []
    return tuple(dict.fromkeys([*have, *extra, *missing]))
