"""ExLlamaV2: config.json's first eos id, else the tokenizer_config.json eos, else 2.

Read from exllamav2 0.3.2 and executed with its loader (tests/conformance/runners/
exllamav2_stop_sets.py, its CUDA extension stubbed: nothing the loader runs calls it):

- ``exllamav2/config.py`` ``ExLlamaV2Config.prepare``: config.json's top-level
  ``eos_token_id``, an int or a list of which it keeps element ``[0]`` ("TODO: Figure out a way
  to maybe use all the EOS tokens"); generation_config.json is read into
  ``config.generation_config`` but no generator uses it;
- ``exllamav2/tokenizer/tokenizer.py`` ``ExLlamaV2Tokenizer``: ``eos_token_id`` is the config's,
  else tokenizer_config.json's ``eos_token`` looked up in tokenizer.json, else 2
  (``get_default_token_id("eos_token", ..., 2)``);
- ``exllamav2/generator/streaming.py`` (``stop_tokens = {tokenizer.eos_token_id,}``) and
  ``generator/base.py`` (``stop_token = -1``) stop on that one id.

TabbyAPI, ExLlamaV2's server, unites config.json's and generation_config.json's ids
(theroyallab/tabbyAPI ``common/transformers_utils.py`` ``HFModel.eos_tokens``): not modelled.
"""

from __future__ import annotations

import math
from typing import Any

from eosfix.core.repo import CONFIG, GENERATION_CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON
from eosfix.runtimes.rule import EosRead, Refusals, Runtime, StopInputs, one, refusing

DEFAULT_EOS = 2  # tokenizer.py get_default_token_id("eos_token", self.eos_token_id, 2)


def _read_generation_eos(value: Any) -> EosRead:
    # config.py: read(gen_config, list, ...), on TypeError read(gen_config, int, ...), which
    # takes an int, a bool or an integral float and raises TypeError for anything else; the
    # ids are kept in config.generation_config, which no generator uses
    integral = type(value) is float and math.isfinite(value) and value.is_integer()
    if type(value) in (list, int, bool) or integral:
        return EosRead()
    return EosRead(fails="ExLlamaV2Config raises TypeError")


def _exllamav2(x: StopInputs) -> frozenset[int]:
    if x.config_eos:
        return frozenset(x.config_eos[:1])
    if x.tokenizer_eos_content is not None:  # the key is there: its id, or none
        return one(x.tokenizer_eos_id)
    return frozenset({DEFAULT_EOS})


RUNTIME = Runtime(
    name="ExLlamaV2",
    reads="config.json (first id), else tokenizer eos, else 2",
    source="turboderp/exllamav2 exllamav2/config.py, exllamav2/tokenizer/tokenizer.py (0.3.2)",
    derive=_exllamav2,
    note="keeps only the first id of config.json; generation_config.json is not used",
    executed="0.3.2 (loader code, CUDA extension stubbed)",
    config_only=True,
    first_id_only=True,
    # config.py (generation_config.json: lines 225-228, outside any try) and
    # tokenizer/tokenizer.py json.load() these (and the tokenizers crate reads tokenizer.json):
    # a mark, an empty or unparsable file raises (executed); special_tokens_map.json it never
    # opens
    refusals=Refusals(
        files=refusing(CONFIG, GENERATION_CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON),
        eos=_read_generation_eos,
    ),
)
