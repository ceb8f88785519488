"""transformers ``generate()``: generation_config.json alone, config.json only when it is missing."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, model_config_eos


def _transformers(x: StopInputs) -> frozenset[int]:
    # transformers generation/utils.py: generation_config.json alone; no eos there = no eos stop
    if x.generation_config_exists:
        return ids_of(x.generation_config_eos)
    # transformers generation/utils.py: OSError -> GenerationConfig from config.json
    return ids_of(model_config_eos(x))


RUNTIME = Runtime(
    name="transformers",
    reads="generation_config.json (config.json if missing)",
    source="transformers generation/utils.py _prepare_special_tokens",
    derive=_transformers,
    note="a generation_config.json without eos_token_id never stops on eos",
)
