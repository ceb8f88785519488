"""mlx-vlm: config.json merged with generation_config.json, else the tokenizer eos."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one


def _mlx_vlm(x: StopInputs) -> frozenset[int]:
    # Blaizzy/mlx-vlm mlx_vlm/utils.py _merge_generation_config (PR #650): gen-config wins
    gen = x.generation_config_eos if x.generation_config_exists else None
    eos = gen if gen is not None else x.config_eos
    # Blaizzy/mlx-vlm load_processor @9b13f522: eos_token_ids or tokenizer eos (replace)
    return ids_of(eos) if eos else one(x.tokenizer_eos_id)


RUNTIME = Runtime(
    name="mlx-vlm",
    reads="generation_config.json, else config.json, else tokenizer eos",
    source="mlx-vlm mlx_vlm/utils.py load_config @9b13f522",
    derive=_mlx_vlm,
    note="replaces the tokenizer eos (union only after PR #2112)",
)
