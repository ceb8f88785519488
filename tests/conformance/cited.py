"""The stop sets TGI's code gives on every conformance shape, read from its source, not run.

TGI's Python server is not on PyPI (``text-generation`` and ``tgi`` there hold only its HTTP
client), so its two rules (eosfix/runtimes/tgi.py) are cited, and what the cited lines do on
each shape of tests/conformance/shapes.py is written down here: test_cited_runtimes.py
requires eosfix's prediction to be that exact set. Read at huggingface/text-generation-inference
``COMMIT`` (v3.3.7 and one CI commit), under ``server/text_generation_server/``, with the
transformers 4.51.3 TGI pins (``server/requirements_cuda.txt`` line 354):

- the flash path, ``models/flash_causal_lm.py`` ``FlashCausalLM.__init__``: the tokenizer
  (lines 1232-1238), then ``GenerationConfig.from_pretrained`` in a ``try`` (lines 1239-1242);
  without generation_config.json it raises OSError, which ``except Exception: pass`` swallows
  (lines 1246-1247). Only a list or set ``eos_token_id`` becomes ``tokenizer._eos_token_ids``
  (lines 1243-1245): an int, ``null`` or an absent key (both None) leave the tokenizer's eos;
- the transformers path, ``models/causal_lm.py`` ``CausalLM.fallback`` (the tokenizer, lines
  612-618) and ``models/transformers_flash_causal_lm.py`` ``TransformersFlashCausalLM.__init__``
  (the tokenizer, lines 129-135; ``FlashCausalLM.__init__`` skipped, lines 217-227): no
  generation config is read, and what follows sets only the pad token (causal_lm.py lines
  630-640, transformers_flash_causal_lm.py lines 150-160);
- both: ``utils/tokens.py`` ``StoppingCriteria.from_pb`` takes ``tokenizer._eos_token_ids``,
  else ``tokenizer.eos_token_id`` (line 200; called at flash_causal_lm.py lines 333-335 and
  causal_lm.py lines 109-111); ``StoppingCriteria.__init__`` makes None no id, an int one id,
  and keeps a set (lines 150-160); ``__call__`` stops on an id of it (lines 175-176).

The tokenizer's ``eos_token_id`` is the id of tokenizer_config.json's ``eos_token`` (None
without one: ``config-only``); ``fix`` never changes it. After ``fix``, generation_config.json
holds the list eosfix writes, which the flash path takes whole.

What JSON readers refuse: transformers 4.51.3 reads each file with ``json.load`` or
``json.loads`` of its UTF-8 text (``configuration_utils.py`` ``_dict_from_json_file``,
``models/auto/tokenization_auto.py`` ``get_tokenizer_config``), which raise on a byte-order
mark. The tokenizer is loaded outside any ``try``, and so is the model's config
(``flash_causal_lm.py`` lines 1249-1251; ``causal_lm.py`` lines 619-626 and
``transformers_flash_causal_lm.py`` lines 137-146, ``AutoModelForCausalLM.from_pretrained``):
a mark there and TGI cannot build the model (``Fails``). A mark in generation_config.json, or
a value ``set()`` cannot take (``[[0, 2]]``: a list is unhashable), raises inside the ``try``
and is ignored. A list becomes a set as it is, and ``last_token in`` it finds 2 for ``2.0``
and no id for ``"2"`` or ``None``; ``"2"``, ``2.0`` and ``true`` are not lists: ignored. A
file that is not JSON at all (empty, NUL bytes, cut short) raises the same way: ignored inside
the ``try``, and fatal where the tokenizer reads it (special_tokens_map.json, which transformers
4.51.3 opens only when tokenizer_config.json has no ``added_tokens_decoder``,
``tokenization_utils_base.py`` lines 2222-2237).

TGI's own code at ``COMMIT``, run with transformers 4.51.3 on 2026-12-04, gave these sets on all 30 shapes in all three states, but
for ``config-bom`` before ``fix --config-json``: that run executed only the statements that
load the tokenizer and the generation config, not the config's, so it reported the sets the
tokenizer and generation config give where the lines cited above fail.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.conformance.shapes import ENDOFTEXT, IM_END, NO_TOKEN, PARIS, SPECIAL

COMMIT = "db931fcf42da018a3657580c64bf2720f167f9ab"
E, I = SPECIAL[ENDOFTEXT], SPECIAL[IM_END]  # the tokenizer eos of most shapes; the turn end


@dataclass(frozen=True)
class Fails:
    """TGI cannot build the model: reading ``file`` raises outside any ``try``."""

    file: str


Cited = frozenset[int] | Fails
Sets = tuple[Cited, Cited, Cited]  # before, fix, fix --config-json
CONFIG_BOM, TOKENIZER_CONFIG_BOM = Fails("config.json"), Fails("tokenizer_config.json")
STM_EMPTY = Fails("special_tokens_map.json")


def _sets(before: set[int] | Fails, fixed: set[int] | Fails, with_config_json: set[int]) -> Sets:
    def cited(value: set[int] | Fails) -> Cited:
        return value if isinstance(value, Fails) else frozenset(value)

    return cited(before), cited(fixed), cited(with_config_json)


def _always(ids: set[int] | Fails) -> Sets:
    return _sets(ids, ids, ids) if not isinstance(ids, Fails) else (ids, ids, ids)


# FlashCausalLM: a generation_config.json list replaces the tokenizer's eos.
FLASH: dict[str, Sets] = {
    # no generation_config.json (OSError, swallowed): the tokenizer's eos; after fix, the list
    "tokenizer-eos-only": _always({I}),
    "gen-file-absent": _sets({E}, {E, I}, {E, I}),
    "config-only": _sets(set(), {I}, {I}),  # no tokenizer eos either: None, no id
    "text-config": _sets({E}, {E, I}, {E, I}),
    "tokenizer-differs": _sets({I}, {E, I}, {E, I}),
    "config-no-eos": _sets({E}, {E, I}, {E, I}),
    # an int is not a list: ignored, the tokenizer's eos
    "gen-int": _sets({E}, {E, I}, {E, I}),
    "gen-zero": _sets({I}, {E, I}, {E, I}),
    "seed": _sets({E}, {E, I}, {E, I}),
    "gen-zero-config-im-end": _sets({I}, {E, I}, {E, I}),
    "added-stop-texts": _sets({E}, {E, I}, {E, I}),
    # null, the key absent, {}: None, ignored
    "gen-null": _sets({E}, {E, I}, {E, I}),
    "gen-key-absent": _sets({E}, {E, I}, {E, I}),
    "gen-empty-object": _sets({E}, {E, I}, {E, I}),
    # a list replaces the tokenizer's eos, whatever it holds ([]: no id at all)
    "gen-list": _always({E, I}),
    "gen-zero-list": _sets({E}, {E, I}, {E, I}),
    "gen-empty-list": _sets(set(), {E, I}, {E, I}),
    "gen-ordinary": _sets({I, PARIS}, {I}, {I}),
    "gen-no-token": _sets({I, NO_TOKEN}, {I}, {I}),
    "config-ordinary": _always({I}),
    # a byte-order mark: generation_config.json's is swallowed by the try; config.json's
    # (rewritten only by --config-json) and tokenizer_config.json's are not
    "gen-bom": _sets({E}, {E, I}, {E, I}),
    "config-bom": _sets(CONFIG_BOM, CONFIG_BOM, {E, I}),
    "tokenizer-config-bom": _always(TOKENIZER_CONFIG_BOM),
    # not ids: a string, a float or true is not a list (ignored); a list is taken as a set
    "gen-string": _sets({E}, {I}, {I}),
    "gen-string-item": _sets({E}, {E, I}, {E, I}),  # {0, "2"}: 2 is not "2"
    "gen-float": _sets({E}, {I}, {I}),
    "gen-float-item": _always({E, I}),  # {0, 2.0}: 2 == 2.0
    "gen-true": _sets({E}, {E, I}, {E, I}),
    "gen-null-item": _always({I}),  # {2, None}
    "gen-nested": _sets({E}, {E, I}, {E, I}),  # set([[0, 2]]) raises in the try: ignored
    # not JSON at all: generation_config.json raises in the try (ignored) until fix writes it
    # anew; special_tokens_map.json is read by the tokenizer, outside any try, only without an
    # added_tokens_decoder (transformers 4.51.3 tokenization_utils_base.py lines 2222-2237)
    "gen-invalid": _sets({E}, {E, I}, {E, I}),
    "gen-nul": _sets({E}, {E, I}, {E, I}),
    "gen-zero-bytes": _sets({E}, {E, I}, {E, I}),
    "stm-zero-bytes": _always(STM_EMPTY),
    "stm-zero-bytes-decoder": _always({E, I}),
}

# CausalLM.fallback and TransformersFlashCausalLM: the tokenizer's eos, in every state.
TRANSFORMERS: dict[str, Sets] = {
    "tokenizer-eos-only": _always({I}),
    "gen-int": _always({E}),
    "gen-list": _always({E}),
    "gen-zero": _always({I}),
    "gen-zero-list": _always({I}),
    "gen-empty-list": _always({E}),
    "gen-null": _always({E}),
    "gen-key-absent": _always({E}),
    "gen-empty-object": _always({E}),
    "gen-file-absent": _always({E}),
    "config-only": _always(set()),
    "text-config": _always({E}),
    "tokenizer-differs": _always({I}),
    "seed": _always({E}),
    "gen-ordinary": _always({E}),
    "gen-no-token": _always({E}),
    "config-ordinary": _always({E}),
    "config-no-eos": _always({E}),
    "gen-zero-config-im-end": _always({I}),
    "added-stop-texts": _always({E}),
    "gen-bom": _always({E}),
    "config-bom": _sets(CONFIG_BOM, CONFIG_BOM, {E}),  # the model's config
    "tokenizer-config-bom": _always(TOKENIZER_CONFIG_BOM),
    "gen-string": _always({E}),
    "gen-string-item": _always({E}),
    "gen-float": _always({E}),
    "gen-float-item": _always({E}),
    "gen-true": _always({E}),
    "gen-null-item": _always({E}),
    "gen-nested": _always({E}),
    "gen-invalid": _always({E}),
    "gen-nul": _always({E}),
    "gen-zero-bytes": _always({E}),
    "stm-zero-bytes": _always(STM_EMPTY),
    "stm-zero-bytes-decoder": _always({E}),
}

CITED: dict[str, dict[str, Sets]] = {"TGI": FLASH, "TGI-transformers": TRANSFORMERS}
