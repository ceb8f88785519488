"""ollama: ``ollama create`` from safetensors, then the llama.cpp it runs.

A folder: ``convert/tokenizer.go parseTokenizer`` keeps the tokenizer eos and takes
generation_config.json's ``eos_token_id`` only when it is a JSON list, written as
``tokenizer.ggml.eos_token_ids``; the runner's llama.cpp then builds its end-of-generation set
(``eosfix.runtimes.llamacpp``). A model in the store: that set for its GGUF blob, plus every
``stop`` string of its params layer (``PARAMETER stop``), matched on the generated text.

Modelled, not executed (no ollama binary here), from ollama/ollama at fb307609 (2026-08-21):
``convert/tokenizer.go`` ``parseTokenizer`` lines 179-205 (generation_config.json's
``*_token_id`` only when it unmarshals as a list: "value is not a list so the existing ID is
used"), ``convert/convert.go`` lines 149-157 (``tokenizer.ggml.eos_token_ids`` only when the
list is not empty); the runner's ``llama/compat/llama-ollama-compat.cpp`` rewrites stop keys at
load (lines 354-372: adds 106 to ``eos_token_ids`` for gemma3n; lines 1316-1355: a Llama-3
GGUF's eos/eot 128001 becomes 128009), which eosfix does not model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eosfix.runtimes.base import Runtime, StopInputs, ids_of
from eosfix.runtimes.llamacpp import converted_stop_ids


def _ollama(x: StopInputs) -> frozenset[int]:
    # ollama/ollama convert/tokenizer.go parseTokenizer: gen-config eos only if a JSON list
    listed = x.generation_config_eos if x.generation_config_eos_is_list else None
    # ollama/ollama convert/convert.go tokenizer.ggml.eos_token_ids -> the runner's EOG set
    return converted_stop_ids(x, extra=ids_of(listed))


def stops_on(
    eog: Iterable[int], stop_strings: Iterable[str], terminators: Mapping[str, int | None]
) -> dict[str, bool]:
    """Per terminator text: does a model stop there (an EOG id, or a ``stop`` string that is
    the terminator's text or occurs in it)?"""
    ids, stops = frozenset(eog), tuple(s for s in stop_strings if s)
    return {
        text: (token_id is not None and token_id in ids) or any(s in text for s in stops)
        for text, token_id in terminators.items()
    }


RUNTIME = Runtime(
    name="ollama",
    reads="tokenizer eos + generation_config.json list + token texts",
    source="ollama/ollama@fb307609 convert/tokenizer.go parseTokenizer lines 179-205, "
    "convert/convert.go lines 149-157",
    derive=_ollama,
    note="import from safetensors; then llama.cpp's EOG rules",
)
