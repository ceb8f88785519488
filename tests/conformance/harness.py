"""Ask each runtime's own loading code for its stop set, and eosfix for its prediction.

A runtime's stop set is read where its generation loop reads it:

- transformers: ``from_pretrained`` (which loads generation_config.json, else builds one from
  config.json) and ``AutoTokenizer.from_pretrained`` (a chat needs it), a one-token
  ``generate()`` (which raises where the config makes generation fail), then what
  ``generate()`` does: ``_prepare_generation_config``, ``_prepare_special_tokens`` and the
  ``EosTokenCriteria`` of ``_get_stopping_criteria``, asked of every id;
- mlx-lm: what ``mlx_lm.load`` wires, ``load_config`` then
  ``load_tokenizer(path, eos_token_ids=config.get("eos_token_id"))``; the wrapper's
  ``eos_token_ids`` is what ``generate_step``'s loop compares;
- mlx-vlm: ``mlx_vlm.load`` (``strict=False``: the stop set does not depend on the weights,
  and transformers 5 names Llava's weights differently from what mlx-vlm expects), then the
  processor's ``StoppingCriteria``, reset with the model config's eos as ``generate`` does.

vLLM, SGLang and ExLlamaV2 run in virtualenvs of their own (tests/conformance/external.py,
runners/): ``build_matrix`` writes every shape in every state once, with eosfix's prediction for
every runtime, so that each of them is asked once for all folders. TGI cannot run here: its
predictions are held against the sets its cited source gives (cited.py).

eosfix's prediction is its current rule for that runtime applied to ``stop_inputs`` of the
checked folder: before the fix, and after it as planned (the patches' new text, computed
before anything is written).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eosfix import api
from eosfix.containers.folder.runtime_table import runtime_table, stop_inputs
from eosfix.runtimes import RUNTIMES, describe

STATES = ("before", "fix", "fix --config-json")


SCAN = 256  # every id below this is asked (and every id a held value equals)


def matched(values) -> frozenset[int]:
    """The token ids a runtime's ``token in values`` finds: ``2.0`` is 2, ``True`` is 1; a
    string, ``None`` or a list equals no id."""
    values = list(values)
    equal = {int(v) for v in values if isinstance(v, (int, float)) and v == int(v)}
    return frozenset(t for t in set(range(SCAN)) | equal if any(t == v for v in values))


def generate_eos_ids(model) -> frozenset[int]:
    """The ids ``model.generate()`` stops on, built the way generate() builds them: its
    ``EosTokenCriteria`` asked of every id."""
    import torch
    from transformers.generation.stopping_criteria import EosTokenCriteria, StoppingCriteriaList

    generation_config, _ = model._prepare_generation_config(None)
    model._prepare_special_tokens(generation_config, True, device="cpu")
    criteria = model._get_stopping_criteria(generation_config, StoppingCriteriaList())
    eos = [c for c in criteria if isinstance(c, EosTokenCriteria)]
    if not eos:
        return frozenset()
    held = [int(i) for i in eos[0].eos_token_id.flatten().tolist()]
    return frozenset(
        t for t in set(range(SCAN)) | set(held) if bool(eos[0](torch.tensor([[t]]), None).item())
    )


def transformers_stop_set(folder: Path) -> frozenset[int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

    # utf-8-sig: which class to load is the test's choice; the runtime reads the file itself
    config = json.loads((folder / "config.json").read_text(encoding="utf-8-sig"))
    vlm = "text_config" in config
    model = (AutoModelForImageTextToText if vlm else AutoModelForCausalLM).from_pretrained(folder)
    AutoTokenizer.from_pretrained(folder)  # a chat needs its tokenizer: it must load too
    if not vlm:  # the generation loop itself runs with this config
        model.generate(torch.tensor([[1]]), max_new_tokens=1, do_sample=False)
    return generate_eos_ids(model)


def mlx_lm_stop_set(folder: Path) -> frozenset[int]:
    from mlx_lm.utils import load_config, load_tokenizer

    config = load_config(folder)
    tokenizer = load_tokenizer(folder, eos_token_ids=config.get("eos_token_id", None))
    return matched(tokenizer.eos_token_ids)


def mlx_vlm_stop_set(folder: Path) -> frozenset[int]:
    import mlx_vlm

    model, processor = mlx_vlm.load(str(folder), strict=False)
    tokenizer = processor.tokenizer if hasattr(processor, "tokenizer") else processor
    loaded = list(tokenizer.stopping_criteria.eos_token_ids)
    # mlx_vlm/generate/dispatch.py generate(): stopping_criteria.reset(model.config.eos_token_id)
    # (the attribute exists only when a config file set eos_token_id; see test_stop_sets.py)
    if hasattr(model.config, "eos_token_id"):
        tokenizer.stopping_criteria.reset(model.config.eos_token_id)
        assert tokenizer.stopping_criteria.eos_token_ids == loaded
    return matched(loaded)


PROBES = {
    "transformers": transformers_stop_set,
    "mlx-lm": mlx_lm_stop_set,
    "mlx-vlm": mlx_vlm_stop_set,
}


@dataclass(frozen=True)
class Prediction:
    """eosfix's stop set for one runtime, and its verdict on ``<|im_end|>`` (stops or not);
    ``refused``: why eosfix says the runtime cannot load the folder or generate ("": it can)."""

    ids: frozenset[int]
    stops: bool | None  # the verdict row's value for <|im_end|>
    refused: str = ""


def predictions(
    folder: Path, runtime: str, *, config_json: bool = False
) -> tuple[Prediction, Prediction]:
    """eosfix's prediction for ``runtime`` now and after the planned fix (nothing written)."""
    result = api.check(folder, config_json=config_json)
    assert result.check is not None, result.error
    rt = describe(runtime)
    (row,) = [r for r in runtime_table(result.check, result.patches).rows if r.runtime == runtime]
    now, fixed = stop_inputs(result.check), stop_inputs(result.check, result.patches)
    return (
        Prediction(rt.current.derive(now), row.stops_before["<|im_end|>"], rt.refused(now)),
        Prediction(rt.current.derive(fixed), row.stops_after["<|im_end|>"], rt.refused(fixed)),
    )


def predict(folder: Path, runtime: str, state: str) -> Prediction:
    """eosfix's prediction for ``state`` (one of STATES); for a fix state the fix is then
    written, and it writes exactly the files it planned."""
    config_json = state == "fix --config-json"
    before, after = predictions(folder, runtime, config_json=config_json)
    if state == "before":
        return before
    planned = api.check(folder, config_json=config_json).patches
    fixed = api.fix(folder, config_json=config_json)
    assert fixed.error is None, fixed.error
    assert set(fixed.written) == {p.file for p in planned}
    return after


def predict_all(folder: Path, state: str) -> dict[str, Prediction]:
    """Every runtime's predicted set for ``state`` (one of STATES); for a fix state the fix
    is then written, exactly the files it planned."""
    config_json = state == "fix --config-json"
    result = api.check(folder, config_json=config_json)
    assert result.check is not None, result.error
    patches = result.patches if state != "before" else ()
    inputs = stop_inputs(result.check, patches)
    rows = {r.runtime: r for r in runtime_table(result.check, result.patches).rows}
    out = {}
    for rt in RUNTIMES:
        row = rows[rt.name]
        verdicts = row.stops_before if state == "before" else row.stops_after
        out[rt.name] = Prediction(
            rt.current.derive(inputs), verdicts["<|im_end|>"], rt.refused(inputs)
        )
    if state != "before":
        fixed = api.fix(folder, config_json=config_json)
        assert fixed.error is None, fixed.error
        assert set(fixed.written) == {p.file for p in result.patches}
    return out


@dataclass(frozen=True)
class Matrix:
    """Every shape in every state, as a folder (written as the state says), with eosfix's
    prediction for every runtime, made before the fix was written."""

    folders: dict[tuple[str, str], Path]  # (shape name, state) -> folder
    predicted: dict[tuple[str, str], dict[str, Prediction]]


def build_matrix(root: Path, models: Path) -> Matrix:
    from tests.conformance.shapes import SHAPES, build

    folders, predicted = {}, {}
    for state in STATES:
        for shape in SHAPES:
            key = (shape.name, state)
            folders[key] = build(shape, root / state.replace(" ", "_") / shape.name, models)
            predicted[key] = predict_all(folders[key], state)
    return Matrix(folders, predicted)
