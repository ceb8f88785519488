"""Which token ids each runtime stops on, derived from a repo's files (pure, table-like).

One module per runtime holds its rule, the source it was read from and the notes; every rule
cites ../shared/notes/runtimes.md (sections A.2-A.13, D). ``RUNTIMES`` is the table order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.runtimes import (
    candle,
    exllamav2,
    llamacpp,
    mlx_lm,
    mlx_vlm,
    ollama,
    sglang,
    tgi,
    transformers,
    vllm,
)
from eosfix.runtimes.base import Runtime, StopInputs
from eosfix.runtimes.llamacpp import EOG_TEXTS

__all__ = [
    "EOG_TEXTS", "RUNTIMES", "Runtime", "RuntimeVerdict", "StopInputs", "apply_config_eos",
    "apply_generation_config_eos", "compare", "describe", "stop_sets",
]  # fmt: skip

RUNTIMES: tuple[Runtime, ...] = (
    transformers.RUNTIME,
    vllm.RUNTIME,
    sglang.RUNTIME,
    tgi.RUNTIME,
    llamacpp.RUNTIME,
    ollama.RUNTIME,
    mlx_lm.RUNTIME,
    mlx_vlm.RUNTIME,
    candle.RUNTIME,
    exllamav2.RUNTIME,
)


def describe(runtime_name: str) -> Runtime:
    for rt in RUNTIMES:
        if rt.name.lower() == runtime_name.lower():
            return rt
    raise KeyError(runtime_name)


def stop_sets(inputs: StopInputs) -> dict[str, frozenset[int]]:
    return {rt.name: rt.derive(inputs) for rt in RUNTIMES}


@dataclass(frozen=True)
class RuntimeVerdict:
    runtime: str
    reads: str
    before: frozenset[int]
    after: frozenset[int]
    stops_before: dict[int, bool]
    stops_after: dict[int, bool]

    @property
    def ok_before(self) -> bool:
        return all(self.stops_before.values())

    @property
    def ok_after(self) -> bool:
        return all(self.stops_after.values())


def compare(
    before: StopInputs, after: StopInputs, terminator_ids: Sequence[int]
) -> tuple[RuntimeVerdict, ...]:
    verdicts = []
    for rt in RUNTIMES:
        b, a = rt.derive(before), rt.derive(after)
        verdicts.append(RuntimeVerdict(
            rt.name, rt.reads, b, a,
            {t: t in b for t in terminator_ids}, {t: t in a for t in terminator_ids},
        ))  # fmt: skip
    return tuple(verdicts)


def apply_generation_config_eos(inputs: StopInputs, new_eos: Sequence[int]) -> StopInputs:
    """Inputs after generation_config.json's eos_token_id is written as a list (file created)."""
    return dataclasses.replace(
        inputs,
        generation_config_exists=True,
        generation_config_eos=tuple(new_eos),
        generation_config_eos_is_list=True,
    )


def apply_config_eos(inputs: StopInputs, new_eos: Sequence[int]) -> StopInputs:
    """Inputs after writing the list to generation_config.json AND config.json.

    config.json's ``text_config.eos_token_id`` is rewritten only when it was set.
    """
    ids = tuple(new_eos)
    return dataclasses.replace(
        apply_generation_config_eos(inputs, ids),
        config_eos=ids,
        config_eos_is_list=True,
        text_config_eos=ids if inputs.text_config_eos is not None else None,
    )
