"""vLLM: the tokenizer's eos united with the generation config vLLM builds.

Read from vLLM 0.33.0 and executed with it (tests/conformance/runners/vllm_stop_sets.py: the
engine's ``InputProcessor.process_inputs`` and the scheduler's ``check_stop`` on every id):

- ``vllm/sampling_params.py`` ``update_from_generation_config(generation_config, eos)``: the
  tokenizer's ``eos_token_id`` is the request's eos, and the generation config's
  ``eos_token_id`` (int or list) joins ``stop_token_ids``: a union;
- ``vllm/config/model.py`` ``try_get_generation_config`` -> ``vllm/transformers_utils/
  config.py`` ``try_get_generation_config``: ``GenerationConfig.from_pretrained(folder)``; only
  when generation_config.json is missing, ``GenerationConfig.from_model_config(get_config())``,
  which reads the config *object*: config.json's ``eos_token_id``, else its config class's
  default (a config.json without the key stops on ``LlamaConfig``'s 2, where transformers'
  ``generate()`` stops on nothing), else its ``text_config`` object's.
"""

from __future__ import annotations

from eosfix.core.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes import config_defaults
from eosfix.runtimes.rule import (
    AUTOTOKENIZER_READS,
    IGNORES,
    TOKENIZER_FILES,
    Refusals,
    Runtime,
    StopInputs,
    ids_of,
    object_eos,
    one,
    read_as_set,
    refusing,
)


def _from_model_config(x: StopInputs) -> tuple[int, ...] | None:
    # transformers generation/configuration_utils.py from_model_config: the object's
    # non-None eos, else get_text_config(decoder=True)'s
    _, top = object_eos(x, config_defaults.VLLM)
    if top is not None:
        return top
    _, text = object_eos(x, config_defaults.VLLM, text_config=True)
    return text


def _vllm(x: StopInputs) -> frozenset[int]:
    generation = x.generation_config_eos if x.generation_config_exists else _from_model_config(x)
    return one(x.tokenizer_eos_id) | ids_of(generation)


RUNTIME = Runtime(
    name="vLLM",
    reads="tokenizer eos + generation_config.json (the config.json object if missing)",
    source="vllm-project/vllm vllm/sampling_params.py update_from_generation_config, "
    "vllm/transformers_utils/config.py try_get_generation_config (0.33.0)",
    derive=_vllm,
    note="union; without generation_config.json, config.json's class default eos joins",
    executed="0.33.0",
    # vllm/transformers_utils/config.py try_get_generation_config (lines 1283-1299):
    # GenerationConfig.from_pretrained's OSError (transformers 5.19 generation/
    # configuration_utils.py lines 1103-1107: a mark, an empty or unparsable file) -> the
    # config.json fallback; the config and the tokenizer (transformers' AutoTokenizer) raise;
    # update_from_generation_config: `{eos} if int else set(eos)`. Executed.
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=read_as_set,
        only_if=AUTOTOKENIZER_READS,
    ),
)
