"""mlx-lm: config.json's eos, a truthy generation_config.json value over it, and since 0.32.0
the tokenizer's eos added.

Read from the mlx-lm wheels on PyPI (``mlx_lm/utils.py`` ``load_config``/``load``,
``mlx_lm/tokenizer_utils.py`` ``TokenizerWrapper``/``load``), version by version:

- 0.32.0 and later: ``load_config`` takes config.json's top-level ``eos_token_id`` and replaces
  it with generation_config.json's only when that value is truthy (``0``, ``[]`` and ``null``
  are ignored; ``[0]`` is not); ``TokenizerWrapper`` then *adds* the tokenizer's eos
  (ml-explore/mlx-lm PR #1414). Executed: tests/conformance/test_stop_sets.py.
- 0.30.2 to 0.31.3: the same ``load_config`` (PR #701), but the ids *replace* the tokenizer's
  eos; only when config.json has no ``eos_token_id`` (or ``null``) is the tokenizer's used.
- 0.20.3 to 0.30.0: config.json alone replaces the tokenizer's eos (multiple eos ids,
  ml-explore/mlx-examples PR #1141); generation_config.json is not read.
- 0.1.0 to 0.20.2: generation stops on the tokenizer's eos only (read at 0.1.0, 0.10.0, 0.19.3,
  0.20.1, 0.20.2).

No version reads ``text_config``. A model type may ship ``TOKENIZER_DEFAULTS`` ids used when no
config file sets ``eos_token_id`` (0.32.2: only ``muse_spark``); eosfix does not model them.
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
    else_tokenizer_eos,
    ids_of,
    one,
    read_as_set,
    refusing,
    truthy_over_config,
)


def _configured(x: StopInputs, *, read_generation_config: bool) -> tuple[int, ...] | None:
    # mlx_lm/utils.py load_config: `if eos_token_id := generation_config.get(...)` overrides
    return truthy_over_config(x) if read_generation_config else x.config_eos


def _union(x: StopInputs) -> frozenset[int]:
    # mlx_lm/tokenizer_utils.py TokenizerWrapper (>= 0.32.0): set(eos_token_ids or []) + eos
    return ids_of(_configured(x, read_generation_config=True)) | one(x.tokenizer_eos_id)


def _replace(x: StopInputs, *, read_generation_config: bool) -> frozenset[int]:
    # TokenizerWrapper (< 0.32.0): set(eos_token_ids) if not None else {tokenizer.eos_token_id}
    return else_tokenizer_eos(_configured(x, read_generation_config=read_generation_config), x)


def _replace_merged(x: StopInputs) -> frozenset[int]:
    return _replace(x, read_generation_config=True)


def _replace_config_only(x: StopInputs) -> frozenset[int]:
    return _replace(x, read_generation_config=False)


def _tokenizer_only(x: StopInputs) -> frozenset[int]:
    # mlx_lm/utils.py generate (< 0.20.3): `if token == tokenizer.eos_token_id`
    return one(x.tokenizer_eos_id)


_READS = "config.json (generation_config.json if truthy)"
RUNTIME = Runtime(
    name="mlx-lm",
    reads=f"{_READS} + tokenizer eos",
    source="mlx-lm mlx_lm/utils.py load_config + tokenizer_utils.py TokenizerWrapper",
    derive=_union,
    note="adds the tokenizer eos; a generation_config eos of 0, [] or null is ignored",
    since="0.32.0",
    executed="0.32.2",
    older=(
        Rule(
            derive=_replace_merged,
            reads=f"{_READS}, else tokenizer eos",
            source="mlx-lm mlx_lm/utils.py load_config (PR #701)",
            note="replaces the tokenizer eos",
            since="0.30.2",
            until="0.32.0",
        ),
        Rule(
            derive=_replace_config_only,
            reads="config.json, else tokenizer eos",
            source="mlx-lm mlx_lm/tokenizer_utils.py TokenizerWrapper (mlx-examples PR #1141)",
            note="replaces the tokenizer eos; generation_config.json not read",
            since="0.20.3",
            until="0.30.2",
        ),
        Rule(
            derive=_tokenizer_only,
            reads="tokenizer eos",
            source="mlx-lm mlx_lm/utils.py generate",
            note="stops on the tokenizer eos only",
            since="0.1.0",
            until="0.20.3",
        ),
    ),
    floor="earlier releases were not read",
    # utils.py load_config (0.32.2 lines 367-377): `except json.JSONDecodeError: pass` around
    # generation_config.json (a mark, an empty or unparsable file); config.json and the
    # tokenizer (transformers' AutoTokenizer) raise; TokenizerWrapper: set(eos) unless int
    refusals=Refusals(
        files={**refusing(CONFIG, *TOKENIZER_FILES), GENERATION_CONFIG: IGNORES},
        eos=read_as_set,
        only_if=AUTOTOKENIZER_READS,
    ),
)
