"""ollama: ``ollama create`` from safetensors, then the llama.cpp it vendors."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one
from eosfix.runtimes.llamacpp import _eog


def _ollama(x: StopInputs) -> frozenset[int]:
    # ollama/ollama convert/tokenizer.go parseTokenizer: gen-config eos only if a JSON list
    listed = x.generation_config_eos if x.generation_config_eos_is_list else None
    # ollama/ollama convert/convert.go tokenizer.ggml.eos_token_ids -> vendored llama.cpp EOG
    return _eog(x.vocab, one(x.tokenizer_eos_id) | ids_of(listed))


RUNTIME = Runtime(
    name="ollama",
    reads="tokenizer eos + generation_config.json list + token texts",
    source="ollama convert/tokenizer.go parseTokenizer",
    derive=_ollama,
    note="import from safetensors; then the vendored llama.cpp EOG rules",
)
