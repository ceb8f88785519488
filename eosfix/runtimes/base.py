"""What every runtime rule reads (``StopInputs``) and how a rule is described (``Runtime``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StopInputs:
    """What the repo's files say about end-of-sequence, already resolved to ids."""

    tokenizer_eos_id: int | None
    tokenizer_eos_content: str | None
    generation_config_exists: bool
    generation_config_eos: tuple[int, ...] | None
    generation_config_eos_is_list: bool
    config_eos: tuple[int, ...] | None
    config_eos_is_list: bool
    text_config_eos: tuple[int, ...] | None
    vocab: Mapping[str, int]
    # The special-token ids llama.cpp's converter would write for this folder (role -> id,
    # e.g. {"eos": 2}); None when not derived from the folder (llama.cpp then falls back to
    # the tokenizer eos and config.json's integer eos).
    gguf_special_ids: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Runtime:
    name: str
    reads: str
    source: str
    derive: Callable[[StopInputs], frozenset[int]]
    note: str = ""


def ids_of(*parts: Iterable[int] | None) -> frozenset[int]:
    return frozenset(i for part in parts if part is not None for i in part)


def one(token_id: int | None) -> frozenset[int]:
    return frozenset() if token_id is None else frozenset({token_id})


def model_config_eos(x: StopInputs) -> tuple[int, ...] | None:
    # transformers generation/configuration_utils.py from_model_config: falls back to text_config
    return x.config_eos if x.config_eos is not None else x.text_config_eos
