"""mlx-lm: config.json's eos replaced by a truthy generation_config.json value."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one


def _gen_truthy(x: StopInputs) -> bool:
    gen = x.generation_config_eos if x.generation_config_exists else None
    return bool(gen) and (x.generation_config_eos_is_list or gen != (0,))


def _mlx_lm(x: StopInputs) -> frozenset[int]:
    # ml-explore/mlx-lm mlx_lm/utils.py load_config (PR #701): truthy gen-config eos overrides
    eos = x.generation_config_eos if _gen_truthy(x) else x.config_eos
    # ml-explore/mlx-lm mlx_lm/tokenizer_utils.py TokenizerWrapper: replaces tokenizer eos
    return ids_of(eos) if eos is not None else one(x.tokenizer_eos_id)


RUNTIME = Runtime(
    name="mlx-lm",
    reads="generation_config.json, else config.json, else tokenizer eos",
    source="mlx-lm mlx_lm/utils.py load_config (PR #701)",
    derive=_mlx_lm,
    note="replaces the tokenizer eos; before PR #701 config.json only",
)
