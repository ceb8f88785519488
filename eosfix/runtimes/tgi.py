"""text-generation-inference: two paths, two rules.

Cited, not executed (TGI's server is not on PyPI), from huggingface/text-generation-inference
at db931fcf (v3.3.7 and one CI commit; in maintenance mode since), files under
``server/text_generation_server/``; tests/conformance/test_cited_runtimes.py holds the stop set
these lines give on every conformance shape, and checks eosfix's prediction against it:

- ``TGI`` (``models/flash_causal_lm.py`` ``FlashCausalLM.__init__``, the GPU path of most
  architectures, VLMs included): the tokenizer (lines 1232-1238), then
  ``GenerationConfig.from_pretrained`` in a ``try`` whose ``except Exception: pass`` swallows a
  missing file (lines 1239-1247); only an ``eos_token_id`` list (or set) becomes
  ``tokenizer._eos_token_ids`` (lines 1243-1245). ``utils/tokens.py``
  ``StoppingCriteria.from_pb`` takes that over the tokenizer's ``eos_token_id`` (line 200;
  called at ``flash_causal_lm.py`` lines 333-335), and ``StoppingCriteria.__init__`` makes
  ``None`` no id, an int one id, keeps a set (lines 150-160); a step stops on an id of it
  (lines 175-176). So a list replaces the tokenizer's eos, an int is ignored;
- ``TGI-transformers`` (``models/causal_lm.py`` ``CausalLM.fallback``, a CPU, tokenizer at lines
  612-618, criteria at lines 109-111; ``models/transformers_flash_causal_lm.py``
  ``TransformersFlashCausalLM.__init__``, architectures TGI runs through transformers,
  tokenizer at lines 129-135, ``FlashCausalLM.__init__`` skipped at lines 217-227): no
  generation config is read, the tokenizer's ``eos_token_id`` only (``tokens.py`` line 200).
"""

from __future__ import annotations

from typing import Any

from eosfix.core.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes.rule import (
    AUTOTOKENIZER_READS,
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


def _tgi(x: StopInputs) -> frozenset[int]:
    # flash_causal_lm.py line 1243: isinstance(generation_config.eos_token_id, (list, set))
    if x.generation_config_exists and x.generation_config_eos_is_list:
        return ids_of(x.generation_config_eos)
    # utils/tokens.py line 200 (from_pb): getattr(tokenizer, "_eos_token_ids", eos)
    return one(x.tokenizer_eos_id)


def _tokenizer_only(x: StopInputs) -> frozenset[int]:
    return one(x.tokenizer_eos_id)


def _read_tgi(value: Any) -> EosRead:
    # flash_causal_lm.py lines 1239-1247, `try: ... except Exception: pass`: only a list (or set)
    # becomes `set(generation_config.eos_token_id)`; a list inside it raises there: ignored
    if type(value) is not list:
        return EosRead()
    read = read_as_set(value)
    return EosRead() if read.fails else read


_SOURCE = "huggingface/text-generation-inference@db931fcf server/text_generation_server/"
_CITED, _CRITERIA = "TGI db931fcf: ", "tokens.py:150-160,200"
_STOPPING = "utils/tokens.py StoppingCriteria (lines 150-160, 175-176, from_pb line 200)"
RUNTIME = Runtime(
    name="TGI",
    reads="tokenizer eos, or generation_config.json if a list",
    source=f"{_SOURCE}models/flash_causal_lm.py FlashCausalLM.__init__ (lines 1232-1247), "
    + _STOPPING,
    derive=_tgi,
    note="flash models (FlashCausalLM): a list replaces the tokenizer eos; an int is ignored",
    cited=f"{_CITED}flash_causal_lm.py:1232-1247, {_CRITERIA}",
    # the tokenizer, the try around GenerationConfig.from_pretrained (`except Exception:
    # pass`: a mark, an empty or unparsable file), the config (1232-1251)
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=_read_tgi,
        only_if=AUTOTOKENIZER_READS,
    ),
)
RUNTIME_TRANSFORMERS = Runtime(
    name="TGI-transformers",
    reads="tokenizer eos",
    source=f"{_SOURCE}models/causal_lm.py CausalLM.fallback (lines 612-618), "
    "models/transformers_flash_causal_lm.py TransformersFlashCausalLM.__init__ (lines 129-135, "
    f"217-227), {_STOPPING}",
    derive=_tokenizer_only,
    note="CPU and transformers-backed models (CausalLM): generation_config.json is not read",
    cited=f"{_CITED}causal_lm.py:612-618, transformers_flash_causal_lm.py:129-135, {_CRITERIA}",
    remedy="it stops only on the tokenizer's eos_token",
    # the tokenizer, then the model (causal_lm.py lines 612-626)
    refusals=Refusals(files=refusing(CONFIG, *TOKENIZER_FILES), only_if=AUTOTOKENIZER_READS),
)
