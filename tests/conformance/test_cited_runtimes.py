"""TGI's two paths, cited (tests/conformance/cited.py: the sets its source gives, as data),
against eosfix's rule: for every shape, before ``fix``, after ``fix`` and after
``fix --config-json`` (predicted from the planned patches, then written, as for the runtimes
that run), eosfix predicts exactly the set TGI's cited lines give.
"""

from __future__ import annotations

import pytest

from eosfix.runtimes import RUNTIMES, describe
from tests.conformance.cited import CITED, COMMIT, FLASH, TRANSFORMERS
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
    with_list = {
        s.name for s in SHAPES if isinstance((s.generation or {}).get("eos_token_id"), list)
    }
    assert len(with_list) == 6
    for state in range(len(STATES)):
        differ = {name for name in FLASH if FLASH[name][state] != TRANSFORMERS[name][state]}
        assert differ == (with_list if state == 0 else set(FLASH) - {"tokenizer-eos-only"})
    for name, (before, fixed, with_config_json) in TRANSFORMERS.items():
        assert before == fixed == with_config_json, name
    for name, (_, fixed, with_config_json) in FLASH.items():
        assert ID in fixed & with_config_json, name
        assert PARIS not in fixed | with_config_json, name
