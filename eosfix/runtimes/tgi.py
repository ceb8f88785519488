"""text-generation-inference: the tokenizer's eos, replaced by a generation_config.json list."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one


def _tgi(x: StopInputs) -> frozenset[int]:
    # text-generation-inference flash_causal_lm.py: only a list replaces the tokenizer eos
    if x.generation_config_exists and x.generation_config_eos_is_list:
        return ids_of(x.generation_config_eos)
    # text-generation-inference utils/tokens.py: getattr(tokenizer, "_eos_token_ids", eos)
    return one(x.tokenizer_eos_id)


RUNTIME = Runtime(
    name="TGI",
    reads="tokenizer eos, or generation_config.json if a list",
    source="huggingface/text-generation-inference flash_causal_lm.py @db931fcf",
    derive=_tgi,
    note="a list replaces the tokenizer eos; an int is ignored",
)
