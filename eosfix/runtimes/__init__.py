"""Which token ids each runtime stops on, derived from a repo's files (pure, table-like).

One module per runtime holds its rules (the current one and, where the runtime's behaviour
changed, the rules of older versions with the range each holds for), the source each was
read from and the notes; rules cite ../shared/notes/runtimes.md (sections A.2-A.13, D) or the
runtime's own releases. ``RUNTIMES`` is the table order. ``Pins`` maps a runtime name to the
version a user asked about (``--runtime mlx-lm==0.31.3``); a runtime not pinned gets its
current rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from eosfix.core.repo import GENERATION_CONFIG
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
from eosfix.runtimes.llamacpp import EOG_TEXTS
from eosfix.runtimes.rule import Rule, Runtime, StopInputs

__all__ = [
    "EOG_TEXTS", "RUNTIMES", "Pins", "Rule", "Runtime", "StopInputs",
    "apply_generation_config_eos", "describe", "parse_pins", "rule_for", "stop_sets",
]  # fmt: skip

Pins = Mapping[str, str]  # runtime name (as in RUNTIMES) -> version

RUNTIMES: tuple[Runtime, ...] = (
    transformers.RUNTIME,
    vllm.RUNTIME,
    sglang.RUNTIME,
    tgi.RUNTIME,
    tgi.RUNTIME_TRANSFORMERS,
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


def rule_for(rt: Runtime, pins: Pins | None) -> Rule:
    """The rule a verdict uses: the pinned version's, else the current one."""
    return rt.rule_for((pins or {}).get(rt.name))


def parse_pins(specs: Iterable[str]) -> dict[str, str]:
    """``["mlx-lm==0.31.3"]`` -> ``{"mlx-lm": "0.31.3"}``; ValueError naming the bad spec."""
    pins: dict[str, str] = {}
    for spec in specs:
        name, sep, version = (part.strip() for part in spec.partition("=="))
        if not sep or not name or not version:
            raise ValueError(f"{spec!r}: expected NAME==VERSION, e.g. mlx-lm==0.31.3")
        try:
            rt = describe(name)
        except KeyError:
            known = ", ".join(r.name for r in RUNTIMES)
            raise ValueError(f"{spec!r}: unknown runtime {name!r} (known: {known})") from None
        try:
            rt.rule_for(version)
        except ValueError as exc:
            raise ValueError(f"{spec!r}: {exc}") from None
        pins[rt.name] = version
    return pins


def stop_sets(inputs: StopInputs, pins: Pins | None = None) -> dict[str, frozenset[int]]:
    return {rt.name: rule_for(rt, pins).derive(inputs) for rt in RUNTIMES}


def apply_generation_config_eos(inputs: StopInputs, new_eos: Sequence[int]) -> StopInputs:
    """Inputs after generation_config.json's eos_token_id is written as a list (the file
    created, or written whole in place of one no JSON reader parses; without a byte-order
    mark)."""
    return inputs._replace(
        generation_config_exists=True,
        generation_config_eos=tuple(new_eos),
        generation_config_has_eos_key=True,
        generation_config_eos_is_list=True,
        generation_config_eos_malformed=None,
        generation_config_eos_truthy=None,
        bom=inputs.bom - {GENERATION_CONFIG},
        unreadable=inputs.unreadable - {GENERATION_CONFIG},
    )
