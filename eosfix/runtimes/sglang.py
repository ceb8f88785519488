"""SGLang: config.json, generation_config.json, the tokenizer's eos and ``<|eom_id|>``."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one


def _sglang(x: StopInputs) -> frozenset[int]:
    # sglang srt/configs/model_config.py _get_hf_eos_token_id: config.json + generation_config
    # sglang srt/managers/schedule_batch.py check_finished: + tokenizer eos
    # sglang srt/hf_transformers_utils.py attach_additional_stop_token_ids: + <|eom_id|>
    gen = x.generation_config_eos if x.generation_config_exists else None
    eom = x.vocab.get("<|eom_id|>")
    return ids_of(x.config_eos, gen) | one(x.tokenizer_eos_id) | one(eom)


RUNTIME = Runtime(
    name="SGLang",
    reads="config.json + generation_config.json + tokenizer eos",
    source="sgl-project/sglang srt/configs/model_config.py _get_hf_eos_token_id",
    derive=_sglang,
    note="union, plus <|eom_id|> when in the vocab",
)
