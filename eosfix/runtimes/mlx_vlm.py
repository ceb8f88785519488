"""mlx-vlm: config.json's eos with generation_config.json's copied over it, united since 0.7.0
with the tokenizer's eos.

Read from the mlx-vlm wheels on PyPI (``mlx_vlm/utils.py`` ``load_config``, ``load``,
``load_processor``, ``StoppingCriteria``), version by version:

- 0.7.0 and later: ``_merge_generation_config`` copies generation_config.json's
  ``eos_token_id`` over config.json's whenever the key is present (any value, ``null`` too) in
  a non-empty file; ``resolve_eos_token_ids`` unites it with the tokenizer's eos
  (Blaizzy/mlx-vlm PR #2112). Executed: tests/conformance/test_stop_sets.py.
- 0.6.3 to 0.6.17: the same merge, but the ids *replace* the tokenizer's eos (used only when
  the merged value is ``null`` or absent).
- 0.3.10 to 0.6.2: a truthy generation_config.json value replaces config.json's (PR #650);
  the ids replace the tokenizer's eos.
- 0.2.0 to 0.3.9: config.json alone replaces the tokenizer's eos.

Only the top-level ``eos_token_id`` is read; a model type's config class may add its own
(some read ``text_config``, a few carry built-in ids), and a processor may add
``additional_eos_token_ids``: eosfix does not model those. Before 0.6.3 the value reaches the
stop set only through the model type's config class, which may drop it.
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
    Rule,
    Runtime,
    StopInputs,
    else_tokenizer_eos,
    ids_of,
    one,
    refusing,
    truthy_over_config,
)


def _merged(x: StopInputs) -> tuple[int, ...] | None:
    # mlx_vlm/utils.py _merge_generation_config: `if key in generation_config` (>= 0.6.3)
    if x.generation_config_exists and x.generation_eos_key:
        return x.generation_config_eos
    return x.config_eos


def _union(x: StopInputs) -> frozenset[int]:
    # mlx_vlm/utils.py resolve_eos_token_ids: configured ids, then the tokenizer's eos
    return ids_of(_merged(x)) | one(x.tokenizer_eos_id)


# StoppingCriteria.reset: `eos_token_ids if not None else tokenizer.eos_token_ids`
def _replace_merged(x: StopInputs) -> frozenset[int]:
    return else_tokenizer_eos(_merged(x), x)


def _replace_truthy(x: StopInputs) -> frozenset[int]:
    # mlx_vlm/utils.py load_config (PR #650): `if eos_token_id := generation_config.get(...)`
    return else_tokenizer_eos(truthy_over_config(x), x)


def _replace_config_only(x: StopInputs) -> frozenset[int]:
    return else_tokenizer_eos(x.config_eos, x)


def _read_ints(value: Any) -> EosRead:
    # utils.py resolve_eos_token_ids: an int, or the int items of a list; anything else adds
    # nothing (the key still replaces config.json's: _merge_generation_config)
    if isinstance(value, int):
        return EosRead((int(value),), False, bool(value))
    ints = tuple(int(i) for i in value if isinstance(i, int)) if type(value) is list else ()
    return EosRead(ints, type(value) is list, bool(value))


_READS = "config.json (generation_config.json over it)"
RUNTIME = Runtime(
    name="mlx-vlm",
    reads=f"{_READS} + tokenizer eos",
    source="mlx-vlm mlx_vlm/utils.py load_config + resolve_eos_token_ids",
    derive=_union,
    note="adds the tokenizer eos; a generation_config eos_token_id key wins even when null",
    since="0.7.0",
    executed="0.7.10",
    older=(
        Rule(
            derive=_replace_merged,
            reads=f"{_READS}, else tokenizer eos",
            source="mlx-vlm mlx_vlm/utils.py _merge_generation_config + StoppingCriteria",
            note="replaces the tokenizer eos",
            since="0.6.3",
            until="0.7.0",
        ),
        Rule(
            derive=_replace_truthy,
            reads="config.json (generation_config.json if truthy), else tokenizer eos",
            source="mlx-vlm mlx_vlm/utils.py load_config (PR #650)",
            note="replaces the tokenizer eos",
            since="0.3.10",
            until="0.6.3",
        ),
        Rule(
            derive=_replace_config_only,
            reads="config.json, else tokenizer eos",
            source="mlx-vlm mlx_vlm/utils.py load_processor + StoppingCriteria",
            note="replaces the tokenizer eos; generation_config.json not read",
            since="0.2.0",
            until="0.3.10",
        ),
    ),
    floor="0.1.0 stopped on the tokenizer eos only; where that changed before 0.2.0 was not read",
    # utils.py load_config (0.7.10 lines 928-934): `except json.JSONDecodeError: pass` around
    # generation_config.json (a mark, an empty or unparsable file); config.json and the
    # processor's tokenizer files (transformers' AutoTokenizer) raise
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=_read_ints,
        only_if=AUTOTOKENIZER_READS,
    ),
)
