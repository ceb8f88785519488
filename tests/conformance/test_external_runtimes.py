"""vLLM, SGLang and ExLlamaV2, each run in its own virtualenv
(tests/conformance/venvs.py), against eosfix's rule: for every shape, the stop set the runtime's
own code computes equals eosfix's prediction, before ``fix``, after ``fix`` and after
``fix --config-json`` (predicted from the planned patches, then written and asked).

Without the virtualenvs these tests skip, naming the command that makes them; with
``$EOSFIX_REQUIRE_RUNTIME_VENVS`` set (CI) they fail instead.
"""

from __future__ import annotations

import pytest

from eosfix.runtimes import describe
from tests.conformance.external import EXTERNAL
from tests.conformance.harness import STATES
from tests.conformance.shapes import (
    CONTENT_END,
    ENDOFTEXT,
    EOM,
    IFM_IM_END,
    IM_END,
    PARIS,
    SHAPES,
    SPECIAL,
    refused_unfixed,
)

pytestmark = pytest.mark.slow

# A runtime that cannot load a shape at all, whatever its eos ids: (runtime, shape) -> the
# start of the error its runner reports (asserted, never skipped).
RUNTIME_ERRORS = {
    # exllamav2 architecture.py: no Llava (its weights have no model.norm.*)
    ("ExLlamaV2", "text-config"): "ValueError:  ## Could not find model.norm.* in model",
}
EOS, ID = SPECIAL[ENDOFTEXT], SPECIAL[IM_END]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
@pytest.mark.parametrize("runtime", sorted(EXTERNAL))
def test_runtime_stop_set_is_what_eosfix_predicts(runtime, shape, state, matrix, answers):
    actual = answers(runtime).sets[matrix.folders[shape.name, state]]
    predicted = matrix.predicted[shape.name, state][runtime]
    error = RUNTIME_ERRORS.get((runtime, shape.name))
    if error is not None:
        assert isinstance(actual, str), actual
        assert actual.startswith(error)
        return
    if predicted.refused:  # eosfix: it cannot load the folder or generate with it
        assert isinstance(actual, str), f"{runtime} {shape.name} {state}: {actual}"
        assert predicted.ids == frozenset()
        return
    assert not isinstance(actual, str), f"{runtime} {shape.name} {state}: {actual}"
    assert actual == predicted.ids, f"{runtime} {shape.name} {state}"
    assert predicted.stops == (ID in actual)


@pytest.mark.parametrize("runtime", sorted(EXTERNAL))
def test_the_executed_version_is_the_one_in_the_virtualenv(runtime, answers):
    """The text and JSON say "executed with <runtime> <version>": that is what ran."""
    answer = answers(runtime)
    executed = describe(runtime).executed
    assert executed is not None
    assert executed.split()[0] == answer.version


def _sets(answers, runtime, shape, matrix):
    return [answers(runtime).sets[matrix.folders[shape, state]] for state in STATES]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_after_fix_every_generation_config_reader_stops_at_the_turn_end(shape, matrix, answers):
    """vLLM and SGLang read generation_config.json: after the default fix each stops on
    <|im_end|>, whatever the shape (TGI's flash path too: test_cited_runtimes.py). None stops
    on a word of a reply after ``fix --config-json``; after the default fix SGLang still does
    where config.json lists one (it unites config.json's ids: eosfix names --config-json for
    it)."""
    if refused_unfixed(shape):  # a file fix does not write that the tokenizer refuses:
        for runtime in ("vLLM", "SGLang"):  # it still cannot load the model
            before, fixed, _ = _sets(answers, runtime, shape.name, matrix)
            assert isinstance(before, str), (runtime, shape.name)
            assert isinstance(fixed, str), (runtime, shape.name)
        return
    for runtime in ("vLLM", "SGLang"):
        _, fixed, with_config = _sets(answers, runtime, shape.name, matrix)
        assert ID in fixed, f"{runtime} {shape.name}"
        assert ID in with_config, f"{runtime} {shape.name}"
        assert PARIS not in with_config, f"{runtime} {shape.name}"
        cut = PARIS in fixed
        listed = shape.config.get("eos_token_id")
        assert cut == (runtime == "SGLang" and isinstance(listed, list) and PARIS in listed)
        if cut:
            row = matrix.predicted[shape.name, "fix"][runtime]
            assert PARIS in row.ids


def test_the_cases_the_earlier_rules_got_wrong(matrix, answers):
    """What the runtimes do where eosfix's earlier rules said otherwise (each a shape; the
    fifth, TGI's transformers path, is cited: test_cited_runtimes.py)."""
    # 1. config.json without eos_token_id: LlamaConfig's default 2 joins vLLM's and SGLang's
    #    sets (transformers' generate() stops on nothing there: tests/conformance/test_stop_sets)
    for runtime in ("vLLM", "SGLang"):
        assert _sets(answers, runtime, "config-no-eos", matrix)[0] == {EOS, ID}
    # 2. ExLlamaV2 without a config.json eos: tokenizer_config.json's eos_token, not nothing
    assert _sets(answers, "ExLlamaV2", "tokenizer-eos-only", matrix)[0] == {ID}
    # 3. SGLang stops on <|eom_id|>, <|content_model_end_sampling|> and <|ifm|im_end|> when
    #    they are added tokens, special or not
    added = matrix.folders["added-stop-texts", "before"]
    ids = {t: i for i, t in enumerate(_added_tokens(added)) if t in (EOM, CONTENT_END, IFM_IM_END)}
    assert len(ids) == 3
    assert _sets(answers, "SGLang", "added-stop-texts", matrix)[0] == {EOS, *ids.values()}
    assert _sets(answers, "vLLM", "added-stop-texts", matrix)[0] == {EOS}
    # 4. SGLang ignores a generation_config eos of 0 (`if generation_eos_ids:`); vLLM does not
    assert _sets(answers, "SGLang", "gen-zero-config-im-end", matrix)[0] == {ID}
    assert _sets(answers, "vLLM", "gen-zero-config-im-end", matrix)[0] == {EOS, ID}


def _added_tokens(folder) -> list[str]:
    """Token text at each id, from tokenizer.json (added tokens after the vocabulary)."""
    import json

    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    texts = dict(data["model"]["vocab"]) | {t["content"]: t["id"] for t in data["added_tokens"]}
    out = [""] * (max(texts.values()) + 1)
    for text, token_id in texts.items():
        out[token_id] = text
    return out
