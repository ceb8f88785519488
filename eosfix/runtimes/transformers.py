"""transformers ``generate()``: generation_config.json alone, config.json only when it is missing.

``from_pretrained`` loads ``GenerationConfig.from_pretrained(repo)``; on ``OSError`` (no
generation_config.json) it builds one from config.json (``generation/utils.py``
``adjust_generation_fn``). ``generate()`` then stops on that config's ``eos_token_id`` alone
(``_prepare_special_tokens``, ``EosTokenCriteria``); the tokenizer's eos plays no part.
Read from the transformers wheels on PyPI:

- 4.28.0 and later: the config.json fallback also takes ``text_config``'s eos when the top
  level has none (``GenerationConfig.from_model_config``). Executed:
  tests/conformance/test_stop_sets.py.
- 4.26.0 to 4.27.x: the same, without ``text_config`` (only ``decoder``/``generator``).

Before 4.26.0 there was no generation_config.json: ``generate()`` read the model config's eos.
"""

from __future__ import annotations

from eosfix.core.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes.rule import (
    AUTOTOKENIZER_READS,
    IGNORES,
    TOKENIZER_FILES,
    Refusals,
    Rule,
    Runtime,
    StopInputs,
    ids_of,
    model_config_eos,
    read_as_tensor,
    refusing,
)


def _transformers(x: StopInputs) -> frozenset[int]:
    # transformers generation/utils.py: generation_config.json alone; no eos there = no eos stop
    if x.generation_config_exists:
        return ids_of(x.generation_config_eos)
    # transformers generation/utils.py adjust_generation_fn: OSError -> from config.json
    return ids_of(model_config_eos(x))


def _top_level_fallback(x: StopInputs) -> frozenset[int]:
    if x.generation_config_exists:
        return ids_of(x.generation_config_eos)
    return ids_of(x.config_eos)


RUNTIME = Runtime(
    name="transformers",
    reads="generation_config.json (config.json if missing)",
    source="transformers generation/utils.py _prepare_special_tokens",
    derive=_transformers,
    note="a generation_config.json without eos_token_id never stops on eos",
    since="4.28.0",
    executed="5.24.0",
    older=(
        Rule(
            derive=_top_level_fallback,
            reads="generation_config.json (config.json top level if missing)",
            source="transformers generation/configuration_utils.py from_model_config",
            note="the config.json fallback ignores text_config",
            since="4.26.0",
            until="4.28.0",
        ),
    ),
    floor="earlier versions had no generation_config.json (generate() read the model config)",
    # 5.24: generation/configuration_utils.py lines 1101-1105 turn a generation_config.json
    # json cannot parse (a mark, empty, NUL bytes, cut short) into OSError ("not a valid JSON
    # file"), which generation/utils.py lines 562-584 answer with config.json; AutoConfig and
    # AutoTokenizer raise JSONDecodeError (special_tokens_map.json only without an
    # added_tokens_decoder: AUTOTOKENIZER_READS); _prepare_special_tokens:
    # torch.tensor(eos_token_id, dtype=torch.long). Executed: tests/conformance/test_stop_sets.py
    # (the BOM, unreadable-file and malformed-eos shapes).
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=read_as_tensor,
        only_if=AUTOTOKENIZER_READS,
    ),
)
