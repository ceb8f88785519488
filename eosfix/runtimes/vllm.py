"""vLLM: the tokenizer's eos united with what transformers reads."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, one
from eosfix.runtimes.transformers import _transformers


def _vllm(x: StopInputs) -> frozenset[int]:
    # vllm-project/vllm vllm/sampling_params.py update_from_generation_config: union
    return one(x.tokenizer_eos_id) | _transformers(x)


RUNTIME = Runtime(
    name="vLLM",
    reads="tokenizer eos + generation_config.json (config.json if missing)",
    source="vllm-project/vllm vllm/sampling_params.py @00388f65",
    derive=_vllm,
    note="union",
)
