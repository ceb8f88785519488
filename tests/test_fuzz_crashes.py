"""Inputs that crash a careless reader of model repos: each is reported (an error line or a
verdict), never a crash (exit 3). Keep each one.

They come from ``fuzz/fuzz_eosfix.py`` and from hardening against hostile input; a new crash
saved under fuzz/crashes/ gets a case here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosfix import api
from eosfix.core.jsonedit import find_value_span, set_json_value
from tests.support.invariants import contradictions, template_repo

_TURNS = "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}"

CRASHES = {
    # ZeroDivisionError escaped run_generation_prompt (it caught only a few error types).
    "zero-division-in-generation-prompt": _TURNS + "{% if add_generation_prompt %}{{ 1 / 0 }}"
    "{% endif %}",
    # RecursionError escaped run_generation_prompt.
    "recursion-in-generation-prompt": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}"
    + _TURNS
    + "{% if add_generation_prompt %}{{ f(0) }}{% endif %}",
    # RecursionError escaped compile_template (the Jinja parser recursed too deep).
    "deeply-nested-expression": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    "deeply-nested-list": "{{ " + "[" * 5000 + "]" * 5000 + " }}",
}


def _repo(tmp_path: Path, template: str) -> Path:
    (tmp_path / "chat_template.jinja").write_text(template)
    tok = {
        "eos_token": "<|im_end|>",
        "added_tokens_decoder": {"2": {"content": "<|im_end|>", "special": True}},
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tok))
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": 1}\n')
    return tmp_path


@pytest.mark.parametrize("template", list(CRASHES.values()), ids=list(CRASHES))
def test_template_crash_is_a_finding_or_an_error(tmp_path, template):
    result = api.check(_repo(tmp_path, template))
    if result.error is not None:
        assert "chat_template.jinja" in str(result.error)
    else:
        assert result.check is not None


@pytest.mark.parametrize("template", list(CRASHES.values()), ids=list(CRASHES))
def test_no_report_on_a_crash_template_contradicts_itself(tmp_path, template):
    """``tests.support.invariants``, on a repo with each crash template."""
    work = tmp_path / "work"
    work.mkdir()
    repo = template_repo(tmp_path / "repo", template, eos="<|im_end|>")
    assert contradictions(repo, work) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"eos_token_id": 1e999}',  # json.loads gives inf: the span is still replaced
        '{"eos_token_id": -0}',
        '\ufeff{"a": "\\ud800", "eos_token_id": [1]}',  # a lone surrogate escape
        '{"eos_token_id": [1,\r\n2]}',
        '{"text_config": {}, "text_config": {"eos_token_id": 3}}',  # duplicate keys
        # Comma-first layout: the inserted list was indented with "," (VerificationError).
        '{"0":{"":null,"0":{"":null,"0":null}}\n,"":null}',
        '{"a": 1\n, "b": 2\n}',
    ],
)
def test_set_json_value_odd_documents(text):
    for path in (("eos_token_id",), ("text_config", "eos_token_id")):
        try:
            new = set_json_value(text, path, [5, 6])
        except ValueError:
            continue
        assert set_json_value(new, path, [5, 6]) == new


# --- arbitrary formatting: whitespace anywhere JSON allows it ----------------------------

_ws = st.text(alphabet=" \t\r\n", max_size=3)
_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=5)
_values = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _formatted(draw, value):
    """``value`` as JSON text with random whitespace between every pair of tokens."""
    if isinstance(value, dict):
        members = [
            draw(_ws) + json.dumps(k) + draw(_ws) + ":" + draw(_formatted(v))
            for k, v in value.items()
        ]
        return draw(_ws) + "{" + ",".join(members) + draw(_ws) + "}" + draw(_ws)
    if isinstance(value, list):
        items = [draw(_formatted(v)) for v in value]
        return draw(_ws) + "[" + ",".join(items) + draw(_ws) + "]" + draw(_ws)
    return draw(_ws) + json.dumps(value, ensure_ascii=draw(st.booleans())) + draw(_ws)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    obj=st.dictionaries(st.text(max_size=6), _values, max_size=5),
    eos=st.none() | st.integers(0, 10**6) | st.lists(st.integers(0, 10**6), max_size=3),
    new=st.lists(st.integers(0, 2**31), max_size=4),
)
def test_set_json_value_any_whitespace(data, obj, eos, new):
    if data.draw(st.booleans()):
        obj["eos_token_id"] = eos
    text = data.draw(_formatted(obj))
    result = set_json_value(text, ("eos_token_id",), new)
    assert json.loads(result) == {**json.loads(text), "eos_token_id": new}
    assert set_json_value(result, ("eos_token_id",), new) == result
    span = find_value_span(text, ("eos_token_id",))
    if span is not None:  # only the value's span changed, every other byte is kept
        assert result[: span[0]] == text[: span[0]]
        assert result[len(result) - (len(text) - span[1]) :] == text[span[1] :]
    elif obj:  # a pure insertion: the original is a prefix plus a suffix of the result
        # (into an empty object, "{ }", the whitespace inside the braces is not kept)
        n = next(
            (i for i, (a, b) in enumerate(zip(text, result, strict=False)) if a != b), len(text)
        )
        assert result.endswith(text[n:])
