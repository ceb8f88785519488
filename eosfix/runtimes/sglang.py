"""SGLang: config.json's eos, a truthy generation_config.json eos, the tokenizer's eos and the
ids of three added tokens.

Read from SGLang 0.5.23 and executed with it (tests/conformance/runners/sglang_stop_sets.py: the
scheduler's ``ModelConfig``, tokenizer and ``Req._check_token_based_finish`` on every id):

- ``srt/configs/model_config.py`` ``_get_hf_eos_token_id``: the config *object*'s
  ``eos_token_id`` (config.json's value, else its config class's default: a config.json
  without the key stops on ``LlamaConfig``'s 2), united with generation_config.json's only
  when that is truthy (``if generation_eos_ids:``: ``0`` and ``[]`` are ignored) and only when
  the file exists (``get_generation_config`` returns None without it: no config.json fallback);
- ``srt/utils/hf_transformers/common.py`` ``_patch_text_config``: a parent config without the
  attribute takes its ``text_config``'s (vision-language models);
- ``srt/managers/schedule_batch.py`` ``Req._check_token_based_finish``: plus the tokenizer's
  ``eos_token_id`` and its ``additional_stop_token_ids``, which
  ``attach_additional_stop_token_ids`` takes from ``get_added_vocab()``: ``<|eom_id|>``,
  ``<|content_model_end_sampling|>``, ``<|ifm|im_end|>``, when they are added tokens.
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

# srt/utils/hf_transformers/common.py _ADDITIONAL_STOP_TOKEN_TEXTS
ADDITIONAL_STOP_TOKEN_TEXTS = ("<|eom_id|>", "<|content_model_end_sampling|>", "<|ifm|im_end|>")


def _config_eos(x: StopInputs) -> tuple[int, ...] | None:
    has, eos = object_eos(x, config_defaults.SGLANG)
    if not has:  # _patch_text_config: the parent takes the text config's attribute
        _, eos = object_eos(x, config_defaults.SGLANG, text_config=True)
    return eos


def _generation_eos(x: StopInputs) -> tuple[int, ...] | None:
    # `if generation_eos_ids:` on the value as written: 0 and [] are falsy, [0] is not
    gen = x.generation_config_eos if x.generation_config_exists else None
    falsy = not gen or (gen == (0,) and not x.generation_config_eos_is_list)
    if x.generation_config_eos_truthy is not None and gen is not None:  # a value not ids
        falsy = not x.generation_config_eos_truthy
    return None if falsy else gen


def _sglang(x: StopInputs) -> frozenset[int]:
    added = (x.added_tokens.get(text) for text in ADDITIONAL_STOP_TOKEN_TEXTS)
    return (
        ids_of(_config_eos(x), _generation_eos(x))
        | one(x.tokenizer_eos_id)
        | frozenset(i for i in added if i is not None)
    )


RUNTIME = Runtime(
    name="SGLang",
    reads="config.json object + generation_config.json (if truthy) + tokenizer eos",
    source="sgl-project/sglang python/sglang/srt/configs/model_config.py _get_hf_eos_token_id, "
    "srt/managers/schedule_batch.py Req._check_token_based_finish (0.5.23)",
    derive=_sglang,
    note="union, plus <|eom_id|>, <|content_model_end_sampling|>, <|ifm|im_end|> when added "
    "tokens; a generation_config eos of 0 or [] is ignored",
    executed="0.5.23",
    # srt/utils/hf_transformers/common.py get_generation_config (lines 717-732): OSError (a
    # mark, an empty or unparsable file) -> no generation config; the config and the tokenizer
    # (transformers' AutoTokenizer) raise; model_config.py _get_hf_eos_token_id:
    # `{ids} if isinstance(ids, int) else set(ids)`. Executed.
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=read_as_set,
        only_if=AUTOTOKENIZER_READS,
    ),
)
