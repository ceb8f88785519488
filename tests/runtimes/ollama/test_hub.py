"""The rule of ``ollama run hf.co/...`` (eosfix.runtimes.ollama.hub): the Hub's conversion of a
chat template into ollama's stop list, which stop strings each ollama release can see, and
the row's versions. The conversion is compared with the real package in
tests/conformance/test_ollama_hub.py; these tests need no node."""

from __future__ import annotations

import json

import pytest

from eosfix.analysis.template import render
from eosfix.runtimes.ollama import hub
from eosfix.runtimes.ollama.hub import convert, params_stop, sees_control_tokens, visible_ids
from eosfix.runtimes.ollama.hubmap import TABLE
from eosfix.runtimes.rule import StopInputs
from tests.support.ggufs import CHATML, COMMAND_R, REASONING


def test_a_template_the_table_knows_by_its_first_128_characters():
    """The first entry with the same prefix wins (qwen2.5-coder sorts before qwen2.5)."""
    head = next(e[1] for e in TABLE if e[0].startswith("library/qwen2.5:"))
    model, _, _, params = next(e for e in TABLE if e[1] == head)
    assert model == "library/qwen2.5-coder:1.5b"
    got = convert(head + "{{ anything after the prefix }}", None, None, render)
    assert (got.path, got.params) == (model, params)


def test_a_template_the_table_knows_by_its_special_tokens():
    template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}<|im_end|>{% endfor %}"
    )
    got = convert(template, None, None, render)
    assert got.path.startswith("library/")
    assert set(got.stop) == {"<|im_start|>", "<|im_end|>"}


def test_a_hand_written_rule():
    got = convert("{% for m in messages %}Human: {{ m.content }}{% endfor %}", None, None, render)
    assert (got.path, got.stop) == (hub.CUSTOM_PATH, ("Human:",))


def test_the_auto_conversion_stops_on_every_special_token_and_the_user_prefix():
    got = convert(REASONING, None, None, render)
    assert got.path == hub.AUTO
    assert got.stop == ("<|turn|>", "<|turn_end|>", "<|turn|>user")


def test_nothing_for_no_template_or_one_that_always_fails():
    assert convert("", None, None, render).path == hub.NONE
    assert convert("{{ raise_exception('x') }}", None, None, render).path == hub.NONE
    assert convert("{{ 'outetts-0.2' }}", None, None, render).path == hub.ERROR


def test_known_templates_keep_their_library_params():
    assert convert(CHATML, None, None, render).stop == ("<|im_start|>", "<|im_end|>")
    cmd = convert(COMMAND_R, None, None, render)
    assert cmd.stop == ("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>")


@pytest.mark.parametrize(
    ("text", "stop"),
    [
        (None, None),
        ('{"temperature": 0.2}', None),
        ('{"stop": ["a", "b"], "top_k": 1}', ("a", "b")),
    ],
)
def test_params_stop(text, stop):
    assert params_stop(text) == stop


@pytest.mark.parametrize("text", ['["stop"]', '{"stop": "a"}', '{"stop": [1]}', "{"])
def test_a_params_document_ollama_refuses(text):
    with pytest.raises(ValueError):  # noqa: PT011 - json's and ours alike
        params_stop(text)


def test_control_tokens_are_invisible_to_stop_strings_from_0_30_0():
    assert sees_control_tokens("0.24.0")
    assert not sees_control_tokens("0.30.0")
    text_ids = {"<|end|>": 5, "<|user|>": 7, "###": 9}
    terms = {"<|end|>": 5, "### Instruction:": None}

    def control(i: int) -> bool:
        return i in (5, 7)

    stops = ["<|end|>", "<|user|>", "###"]
    assert visible_ids(stops, text_ids, terms, control, "0.24.0") == {5, 7, 9}
    assert visible_ids(stops, text_ids, terms, control, "0.32.15") == {9}


def test_the_row_is_versioned_and_applies_to_no_folder():
    assert hub.RUNTIME.rule_for(None).since == "0.30.0"
    assert hub.RUNTIME.rule_for("0.24.0").until == "0.30.0"
    with pytest.raises(ValueError, match=r"0\.6\.0"):
        hub.RUNTIME.rule_for("0.5.0")
    inputs = StopInputs(None, None, False, None, False, None, False, None, {})
    with pytest.raises(TypeError, match="GGUF files on the Hub"):
        hub.RUNTIME.derive(inputs)
    assert json.loads(json.dumps(hub.CONVERSION))  # named with its version
    assert "0.0.18" in hub.CONVERSION
