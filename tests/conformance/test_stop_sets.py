"""Every executed runtime rule against the runtime itself: for each repo shape, the stop set the
runtime's own loading code computes equals eosfix's prediction, before ``fix`` and after
``fix`` / ``fix --config-json`` (predicted from the planned patches, then written and loaded).
"""

from __future__ import annotations

import importlib.metadata

import pytest

from eosfix import api
from eosfix.runtimes import describe
from tests.conformance.harness import PROBES, STATES, predict
from tests.conformance.shapes import IM_END, PARIS, SHAPES, SPECIAL, build, refused_unfixed

pytestmark = pytest.mark.slow

# The runtime's distribution on PyPI, and the extra that installs it.
PACKAGES = {
    "transformers": ("transformers", "verify"),
    "mlx-lm": ("mlx_lm", "runtimes"),
    "mlx-vlm": ("mlx_vlm", "runtimes"),
}
# Shapes where the runtime itself fails before it has a stop set (asserted, not skipped).
RUNTIME_ERRORS = {
    # transformers generation/utils.py _prepare_special_tokens: pad = eos_token_tensor[0]
    ("transformers", "gen-empty-list", "before"): IndexError,
}
# What a runtime raises where eosfix says it cannot load the folder (a byte-order mark or a
# file that is not JSON: json's JSONDecodeError, a ValueError, or transformers' OSError "not a
# valid JSON file") or cannot generate (an eos_token_id that is not ids).
REFUSALS = {"cannot load": (ValueError, OSError), "cannot generate": (TypeError, RuntimeError)}


def _require(runtime: str) -> None:
    module, extra = PACKAGES[runtime]
    pytest.importorskip(
        module, reason=f"{runtime} is not installed (pip install 'eosfix[{extra}]')"
    )


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
@pytest.mark.parametrize("runtime", sorted(PROBES))
def test_runtime_stop_set_is_what_eosfix_predicts(runtime, shape, state, models, tmp_path):
    _require(runtime)
    folder = build(shape, tmp_path / shape.name, models)
    predicted = predict(folder, runtime, state)
    error = RUNTIME_ERRORS.get((runtime, shape.name, state))
    if predicted.refused:  # eosfix: it cannot load the folder or generate with it
        kind = next(k for k in REFUSALS if predicted.refused.startswith(k))
        error = REFUSALS[kind]
    if error is not None:
        with pytest.raises(error):
            PROBES[runtime](folder)
        assert predicted.ids == frozenset()  # eosfix: no stop id at all
        return
    actual = PROBES[runtime](folder)
    assert actual == predicted.ids, f"{runtime} {shape.name} {state}"
    assert predicted.stops == (SPECIAL[IM_END] in actual)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_after_fix_every_executed_runtime_stops_at_the_turn_end_and_nowhere_else(
    shape, models, tmp_path
):
    """Whatever the shape, after the default ``fix`` transformers, mlx-lm and mlx-vlm each
    stop on <|im_end|> (the VLM whose eos sits only under text_config included: transformers
    stopped there before, mlx-lm and mlx-vlm did not), and on no id a reply contains."""
    for runtime in PROBES:
        _require(runtime)
    folder = build(shape, tmp_path / shape.name, models)
    result = api.fix(folder)
    assert result.error is None, result.error
    if refused_unfixed(shape):  # a file fix does not write that every loader refuses:
        (f,) = [f for f in result.check.findings if f.code in ("EOS017", "EOS020")]
        assert not f.fixable  # named, not fixed
        for probe in PROBES.values():
            with pytest.raises(REFUSALS["cannot load"]):
                probe(folder)
        return
    for runtime, probe in PROBES.items():
        actual = probe(folder)
        assert SPECIAL[IM_END] in actual, f"{runtime} {shape.name}"
        assert PARIS not in actual, f"{runtime} {shape.name}"


@pytest.mark.parametrize("shape_name", ["text-config", "config-only", "gen-int"])
def test_a_generation_config_reader_that_misses_is_a_fixable_finding(shape_name, models, tmp_path):
    """transformers stops on <|im_end|> in these shapes; a runtime that reads
    generation_config.json does not (mlx-lm and mlx-vlm: executed here; TGI: cited, in
    test_cited_runtimes.py), and writing the file fixes it: EOS015, not a caveat."""
    (shape,) = [s for s in SHAPES if s.name == shape_name]
    folder = build(shape, tmp_path / shape.name, models)
    result = api.check(folder)
    assert result.check is not None
    assert "EOS015" in [f.code for f in result.check.findings]
    assert result.check.status.value == "fixable"
    assert [p.file for p in result.patches] == ["generation_config.json"]


def test_a_word_stop_id_cuts_in_every_executed_runtime_until_fixed(models, tmp_path):
    """generation_config lists ``Paris``: each runtime stops on it (EOS012); after ``fix``
    none does, and <|im_end|> still stops them."""
    (shape,) = [s for s in SHAPES if s.name == "gen-ordinary"]
    folder = build(shape, tmp_path / shape.name, models)
    for runtime in PROBES:
        _require(runtime)
    assert all(PARIS in probe(folder) for probe in PROBES.values())
    result = api.check(folder)
    assert result.check is not None
    (finding,) = [f for f in result.check.findings if f.code == "EOS012"]
    assert f"'Paris' ({PARIS}), an ordinary text token" in finding.message
    assert api.fix(folder).written == ("generation_config.json",)
    for probe in PROBES.values():
        actual = probe(folder)
        assert PARIS not in actual
        assert SPECIAL[IM_END] in actual


@pytest.mark.parametrize("runtime", sorted(PROBES))
def test_the_executed_version_is_the_installed_one(runtime):
    """The text and JSON say "executed with <runtime> <version>": that is the version here."""
    _require(runtime)
    distribution = PACKAGES[runtime][0].replace("_", "-")
    rt = describe(runtime)
    assert rt.executed == importlib.metadata.version(distribution)
    assert rt.rule_for(rt.executed) == rt.current


def test_mlx_vlm_generate_raises_when_no_config_sets_eos(models, tmp_path):
    """As the README says: mlx-vlm 0.7.10's ``generate()`` resets its stopping criteria with
    ``model.config.eos_token_id``, which a Llama-type model config has only when a config file
    sets it; ``stream_generate`` keeps the loaded criteria (the tokenizer's eos)."""
    _require("mlx-vlm")
    import mlx_vlm

    (shape,) = [s for s in SHAPES if s.name == "tokenizer-eos-only"]
    folder = build(shape, tmp_path / shape.name, models)
    model, processor = mlx_vlm.load(str(folder), strict=False)
    assert processor.stopping_criteria.eos_token_ids == [SPECIAL[IM_END]]
    with pytest.raises(AttributeError, match="eos_token_id"):
        mlx_vlm.generate(model, processor, "What is", max_tokens=1)
