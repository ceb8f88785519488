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
holds the list eosfix writes, which the flash path takes whole. Before these files were
removed from the tree, TGI's own code (copied at ``COMMIT``, run with transformers 4.51.3 on
2026-12-04) gave exactly these sets on all 20 shapes in all three states.
"""

from __future__ import annotations

from tests.conformance.shapes import ENDOFTEXT, IM_END, NO_TOKEN, PARIS, SPECIAL

COMMIT = "db931fcf42da018a3657580c64bf2720f167f9ab"
E, I = SPECIAL[ENDOFTEXT], SPECIAL[IM_END]  # the tokenizer eos of most shapes; the turn end
NONE: frozenset[int] = frozenset()

Sets = tuple[frozenset[int], frozenset[int], frozenset[int]]  # before, fix, fix --config-json


def _sets(before: set[int], fixed: set[int], with_config_json: set[int]) -> Sets:
    return frozenset(before), frozenset(fixed), frozenset(with_config_json)


def _always(ids: set[int]) -> Sets:
    return _sets(ids, ids, ids)


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
}

CITED: dict[str, dict[str, Sets]] = {"TGI": FLASH, "TGI-transformers": TRANSFORMERS}
