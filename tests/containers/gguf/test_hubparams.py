"""What ``ollama run hf.co/...`` gets for a GGUF on the Hub and the params file a pull request
writes (eosfix.containers.gguf.hubparams): the repo's file or the Hub's conversion; strings
that cut replies taken out, missing terminators added, every other key kept."""

from __future__ import annotations

import json

from eosfix import pipeline
from eosfix.analysis.template import render
from eosfix.containers.gguf.container import HubGguf
from eosfix.containers.gguf.hubparams import (
    FROM_CONVERSION,
    FROM_FILE,
    OllamaParams,
    ollama_params,
    plan_params,
)
from eosfix.containers.gguf.read import load_gguf
from eosfix.containers.gguf.runtime_table import ollama_stops
from eosfix.runtimes.ollama.hub import AUTO
from tests.support.ggufs import chatml, harmony, reasoning


def _plan(path, repo_file=None):
    model = load_gguf(path)
    params = ollama_params(model, repo_file, render)
    result = pipeline.check_container(HubGguf(model, params), path)
    return params, plan_params(result.check, model, params, ollama_stops(model).ids), result


def _row(result):
    return next(r for r in result.runtimes.rows if r.runtime == "ollama hf.co")


def test_the_conversion_when_the_repo_has_no_params_file(tmp_path):
    params, plan, result = _plan(chatml(tmp_path / "c.gguf"))
    assert params.source == FROM_CONVERSION
    assert params.stop == ("<|im_start|>", "<|im_end|>")
    assert plan is None  # nothing to change
    assert _row(result).ok_before


def test_harmony_junk_stops_are_dropped_and_only_old_ollama_saw_them(tmp_path):
    path = harmony(tmp_path / "h.gguf", {"eos": "<|return|>"})
    params, plan, result = _plan(path)
    assert params.conversion.path == AUTO
    assert "<|channel|>" in params.stop
    assert plan.removed == ("<|message|>", "<|end|>", "<|start|>", "<|channel|>")
    assert plan.after == ("<|return|>", "tart|>user<|message|>")
    assert _row(result).ok_before  # control tokens: ollama 0.30+ never matches their text
    old = pipeline.check_container(
        HubGguf(load_gguf(path), params), path, pins={"ollama": "0.24.0"}
    )
    row = _row(old)
    assert set(row.early_before) == {"<|message|>", "<|end|>", "<|start|>", "<|channel|>"}
    assert row.ok_after


def test_a_params_file_is_edited_in_place_keeping_its_keys(tmp_path):
    path = reasoning(tmp_path / "r.gguf", {"eos": "<|endoftext|>"}, control=False)
    text = b'{"temperature": 0.6,\n "stop": ["<|think_end|>"], "num_ctx": 8192}\n'
    params, plan, result = _plan(path, text)
    assert params.source == FROM_FILE
    assert plan.old == text.decode()
    assert plan.new == '{"temperature": 0.6,\n "stop": ["<|turn_end|>"], "num_ctx": 8192}\n'
    assert (plan.removed, plan.added) == (("<|think_end|>",), ("<|turn_end|>",))
    row = _row(result)
    assert not row.ok_before
    assert row.ok_after


def test_a_params_file_ollama_refuses_is_replaced_by_a_valid_one(tmp_path):
    path = reasoning(tmp_path / "r.gguf", {"eos": "<|endoftext|>"}, control=False)
    params, plan, result = _plan(path, b'{"stop": "<|turn_end|>"}')
    assert params.problem == '"stop" must be an array of strings (ollama refuses the request)'
    assert params.stop == ()
    assert json.loads(plan.new) == {"stop": ["<|turn_end|>"]}
    assert plan.old == '{"stop": "<|turn_end|>"}'
    assert "refused" in _row(result).note


def test_the_conversions_other_params_are_kept(tmp_path):
    """A library model's params (temperature...) stay in the file a pull request writes, as
    ollama got them from the conversion."""
    path = reasoning(tmp_path / "r.gguf", {"eos": "<|endoftext|>"}, control=False)
    model = load_gguf(path)
    converted = OllamaParams('{"stop": ["<|turn|>"], "temperature": 0.1, "top_k": 64}',
                             FROM_CONVERSION)  # fmt: skip
    check = pipeline.check_container(HubGguf(model, converted), path).check
    plan = plan_params(check, model, converted, ollama_stops(model).ids)
    assert plan.old is None  # no params file in the repo: the pull request adds one
    assert plan.new == (
        '{\n  "stop": [\n    "<|turn|>",\n    "<|turn_end|>"\n  ],\n  "temperature": 0.1,\n'
        '  "top_k": 64\n}\n'
    )
