"""TGI's two paths, cited (tests/conformance/cited.py: the sets its source gives, as data),
against eosfix's rule: for every shape, before ``fix``, after ``fix`` and after
``fix --config-json`` (predicted from the planned patches, then written, as for the runtimes
that run), eosfix predicts exactly the set TGI's cited lines give.
"""

from __future__ import annotations

import pytest

from eosfix.runtimes import RUNTIMES, describe
from tests.conformance.cited import CITED, COMMIT, FLASH, TRANSFORMERS, Fails
from tests.conformance.harness import STATES
from tests.conformance.shapes import IM_END, PARIS, SHAPES, SPECIAL

ID = SPECIAL[IM_END]


@pytest.mark.slow
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
@pytest.mark.parametrize("runtime", sorted(CITED))
def test_cited_stop_set_is_what_eosfix_predicts(runtime, shape, state, matrix):
    cited = CITED[runtime][shape.name][STATES.index(state)]
    predicted = matrix.predicted[shape.name, state][runtime]
    if isinstance(cited, Fails):  # TGI cannot build the model: eosfix says so, naming the file
        assert cited.file in predicted.refused, f"{runtime} {shape.name} {state}"
        assert predicted.ids == frozenset()
        return
    assert not predicted.refused, f"{runtime} {shape.name} {state}: {predicted.refused}"
    assert predicted.ids == cited, f"{runtime} {shape.name} {state}"
    assert predicted.stops == (ID in cited)


def test_every_cited_rule_has_a_set_for_every_shape_and_state():
    """A rule that says "cited at" has its data here, and a new shape needs its cited sets."""
    assert set(CITED) == {rt.name for rt in RUNTIMES if rt.cited is not None}
    for runtime, sets in CITED.items():
        assert set(sets) == {s.name for s in SHAPES}, runtime
        assert all(len(states) == len(STATES) for states in sets.values()), runtime


def test_the_rules_cite_the_commit_the_sets_were_read_at():
    for runtime in CITED:
        rt = describe(runtime)
        assert rt.executed is None, runtime
        assert rt.cited is not None, runtime
        assert rt.cited.startswith(f"TGI {COMMIT[:8]}: "), runtime
        assert f"huggingface/text-generation-inference@{COMMIT[:8]} " in rt.source, runtime


def test_the_two_paths_differ_where_generation_config_holds_a_list():
    """The transformers path reads the tokenizer's eos only, whatever ``fix`` writes; the flash
    path differs from it on the shapes whose generation_config.json holds a list, and after
    ``fix`` (which writes a list) on every shape but the one whose tokenizer eos is the list
    written. After either fix the flash path stops on <|im_end|> and never on a word."""
    read = {s.name for s in SHAPES if not s.refused}  # what JSON readers refuse: below
    with_list = {
        s.name
        for s in SHAPES
        if s.name in read and isinstance((s.generation or {}).get("eos_token_id"), list)
    }
    assert len(with_list) == 6
    for state in range(len(STATES)):
        differ = {name for name in read if FLASH[name][state] != TRANSFORMERS[name][state]}
        assert differ == (with_list if state == 0 else read - {"tokenizer-eos-only"})
    for name in read:
        before, fixed, with_config_json = TRANSFORMERS[name]
        assert before == fixed == with_config_json, name
    for name, (_, fixed, with_config_json) in FLASH.items():
        for ids in (fixed, with_config_json):
            if not isinstance(ids, Fails):
                assert ID in ids, name
                assert PARIS not in ids, name


def test_a_byte_order_mark_fails_where_tgi_reads_outside_its_try():
    """config.json (the model's config) and tokenizer_config.json fail both paths until a fix
    rewrites the file; generation_config.json's mark is swallowed by the flash path's try."""
    for sets in (FLASH, TRANSFORMERS):
        assert sets["config-bom"][:2] == (Fails("config.json"),) * 2
        assert not isinstance(sets["config-bom"][2], Fails)  # fix --config-json rewrites it
        assert sets["tokenizer-config-bom"] == (Fails("tokenizer_config.json"),) * 3
    assert not any(isinstance(c, Fails) for c in FLASH["gen-bom"])
