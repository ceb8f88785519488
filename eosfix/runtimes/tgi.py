"""text-generation-inference: two paths, two rules.

Read from TGI v3.3.7 (huggingface/text-generation-inference db931fcf, in maintenance mode since
then) and executed with its own code (vendored in tests/conformance/vendor/; TGI's server is not
on PyPI) and the transformers 4.51.3 it pins (tests/conformance/runners/tgi_stop_sets.py):

- ``TGI`` (``server/text_generation_server/models/flash_causal_lm.py`` ``FlashCausalLM.__init__``,
  the GPU path of most architectures, VLMs included): the tokenizer, then
  ``GenerationConfig.from_pretrained``; only an ``eos_token_id`` list (or set) becomes
  ``tokenizer._eos_token_ids``, which ``StoppingCriteria.from_pb`` (``utils/tokens.py``) takes
  over the tokenizer's ``eos_token_id``: a list replaces the tokenizer's eos, an int is
  ignored;
- ``TGI-transformers`` (``models/causal_lm.py`` ``CausalLM.fallback`` and
  ``models/transformers_flash_causal_lm.py`` ``TransformersFlashCausalLM.__init__``: a CPU, and
  architectures TGI runs through transformers): the tokenizer's ``eos_token_id`` only.
"""

from __future__ import annotations

from typing import Any

from eosfix.core.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes.rule import (
    IGNORES,
    TOKENIZER_FILES,
    EosRead,
    Refusals,
    Runtime,
    StopInputs,
    ids_of,
    one,
    read_as_set,
    refusing,
)

TGI_VERSION = "3.3.7"
EXECUTED = f"{TGI_VERSION} (db931fcf server code, transformers 4.51.3)"


def _tgi(x: StopInputs) -> frozenset[int]:
    # flash_causal_lm.py: isinstance(generation_config.eos_token_id, (list, set))
    if x.generation_config_exists and x.generation_config_eos_is_list:
        return ids_of(x.generation_config_eos)
    # utils/tokens.py StoppingCriteria.from_pb: getattr(tokenizer, "_eos_token_ids", eos)
    return one(x.tokenizer_eos_id)


def _tokenizer_only(x: StopInputs) -> frozenset[int]:
    return one(x.tokenizer_eos_id)


def _read_tgi(value: Any) -> EosRead:
    # flash_causal_lm.py, inside `try: ... except Exception: pass`: only a list (or set)
    # becomes `set(generation_config.eos_token_id)`; a list inside it raises there: ignored
    if type(value) is not list:
        return EosRead()
    read = read_as_set(value)
    return EosRead() if read.fails else read


_SOURCE = "huggingface/text-generation-inference@db931fcf server/text_generation_server/"
RUNTIME = Runtime(
    name="TGI",
    reads="tokenizer eos, or generation_config.json if a list",
    source=f"{_SOURCE}models/flash_causal_lm.py FlashCausalLM, utils/tokens.py StoppingCriteria",
    derive=_tgi,
    note="flash models (FlashCausalLM): a list replaces the tokenizer eos; an int is ignored",
    executed=EXECUTED,
    # the tokenizer, then the try around GenerationConfig.from_pretrained, then the config
    refusals=Refusals(
        bom={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES}, eos=_read_tgi
    ),
)
RUNTIME_TRANSFORMERS = Runtime(
    name="TGI-transformers",
    reads="tokenizer eos",
    source=f"{_SOURCE}models/causal_lm.py CausalLM.fallback, "
    "models/transformers_flash_causal_lm.py, utils/tokens.py StoppingCriteria",
    derive=_tokenizer_only,
    note="CPU and transformers-backed models (CausalLM): generation_config.json is not read",
    executed=EXECUTED,
    remedy="it stops only on the tokenizer's eos_token",
    refusals=Refusals(bom=refusing(CONFIG, *TOKENIZER_FILES)),  # tokenizer, then the model
)
