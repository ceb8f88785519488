from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosfix.core import jsonedit
from eosfix.core.errors import VerificationError
from eosfix.core.jsonedit import find_value_span, format_value_like, set_json_value

EOS = ("eos_token_id",)
TEXT_EOS = ("text_config", "eos_token_id")


def _loads(text: str) -> object:
    return json.loads(text.removeprefix("\ufeff"))


# (text, key_path, value, expected): every expected string is the exact output.
FIX_CASES = [
    pytest.param(
        '{\n  "bos_token_id": 1,\n  "eos_token_id": 2,\n  "pad_token_id": 0\n}\n',
        EOS,
        [2, 32000],
        '{\n  "bos_token_id": 1,\n  "eos_token_id": [\n    2,\n    32000\n  ],\n'
        '  "pad_token_id": 0\n}\n',
        id="2-space int becomes multi-line list",
    ),
    pytest.param(
        '{\n    "bos_token_id": 1,\n    "eos_token_id": 2\n}\n',
        EOS,
        [2, 7],
        '{\n    "bos_token_id": 1,\n    "eos_token_id": [\n        2,\n        7\n    ]\n}\n',
        id="4-space indent",
    ),
    pytest.param(
        '{\n\t"bos_token_id": 1,\n\t"eos_token_id": 2\n}\n',
        EOS,
        [2, 7],
        '{\n\t"bos_token_id": 1,\n\t"eos_token_id": [\n\t\t2,\n\t\t7\n\t]\n}\n',
        id="tab indent",
    ),
    pytest.param(
        '{\r\n  "bos_token_id": 1,\r\n  "eos_token_id": 2\r\n}\r\n',
        EOS,
        [2, 7],
        '{\r\n  "bos_token_id": 1,\r\n  "eos_token_id": [\r\n    2,\r\n    7\r\n  ]\r\n}\r\n',
        id="crlf",
    ),
    pytest.param(
        '\ufeff{\n  "eos_token_id": 2\n}\n',
        EOS,
        [2, 7],
        '\ufeff{\n  "eos_token_id": [\n    2,\n    7\n  ]\n}\n',
        id="bom kept",
    ),
    pytest.param(
        '{\n  "eos_token_id": 2\n}',
        EOS,
        [2, 7],
        '{\n  "eos_token_id": [\n    2,\n    7\n  ]\n}',
        id="no trailing newline",
    ),
    pytest.param(
        '{\n"eos_token_id": 2\n}\n',
        EOS,
        [2, 7],
        '{\n"eos_token_id": [\n2,\n7\n]\n}\n',
        id="indent 0",
    ),
    pytest.param(
        '{"eos_token_id":1,"a":2}',
        EOS,
        [1, 2],
        '{"eos_token_id":[1,2],"a":2}',
        id="one-line compact",
    ),
    pytest.param(
        '{"eos_token_id": 1, "a": 2}\n',
        EOS,
        [1, 2],
        '{"eos_token_id": [1, 2], "a": 2}\n',
        id="one-line with spaces",
    ),
    pytest.param(
        '{\n  "eos_token_id": [\n      1,\n      2\n  ],\n  "z": 0\n}\n',
        EOS,
        [1, 2, 3],
        '{\n  "eos_token_id": [\n      1,\n      2,\n      3\n  ],\n  "z": 0\n}\n',
        id="multi-line list keeps its item indent",
    ),
    pytest.param(
        '{\n  "eos_token_id": [1, 2],\n  "z": 0\n}\n',
        EOS,
        [1, 2, 3],
        '{\n  "eos_token_id": [1, 2, 3],\n  "z": 0\n}\n',
        id="inline list in pretty document stays inline",
    ),
    pytest.param(
        '{\n  "eos_token_id": [1,2],\n  "z": 0\n}\n',
        EOS,
        [1, 2, 3],
        '{\n  "eos_token_id": [1,2,3],\n  "z": 0\n}\n',
        id="inline list keeps compact separator",
    ),
    pytest.param(
        '{"a": [5, 6], "eos_token_id": [2], "z": {"b":1,"c":2}}',
        EOS,
        [2, 3],
        '{"a": [5, 6], "eos_token_id": [2, 3], "z": {"b":1,"c":2}}',
        id="one-element inline list takes the parent's separator",
    ),
    pytest.param(
        '{\n  "eos_token_id": [],\n  "z": 0\n}\n',
        EOS,
        [1, 2],
        '{\n  "eos_token_id": [\n    1,\n    2\n  ],\n  "z": 0\n}\n',
        id="empty list in pretty document goes multi-line",
    ),
    pytest.param(
        '{\n  "eos_token_id": null,\n  "z": 0\n}\n',
        EOS,
        [1, 2],
        '{\n  "eos_token_id": [\n    1,\n    2\n  ],\n  "z": 0\n}\n',
        id="null",
    ),
    pytest.param(
        '{\n  "eos_token_id": [\n    1,\n    2\n  ]\n}\n',
        EOS,
        3,
        '{\n  "eos_token_id": 3\n}\n',
        id="list replaced by int",
    ),
    pytest.param(
        '{\n  "bos_token_id": 1,\n  "pad_token_id": 0\n}\n',
        EOS,
        [2, 7],
        '{\n  "bos_token_id": 1,\n  "eos_token_id": [\n    2,\n    7\n  ],\n'
        '  "pad_token_id": 0\n}\n',
        id="absent inserted at sorted position",
    ),
    pytest.param(
        '{\n  "bos_token_id": 1,\n  "do_sample": true\n}\n',
        EOS,
        [2, 7],
        '{\n  "bos_token_id": 1,\n  "do_sample": true,\n  "eos_token_id": [\n    2,\n'
        "    7\n  ]\n}\n",
        id="absent inserted last",
    ),
    pytest.param(
        '{\n  "max_length": 5\n}\n',
        EOS,
        [2],
        '{\n  "eos_token_id": [\n    2\n  ],\n  "max_length": 5\n}\n',
        id="absent inserted first before single key",
    ),
    pytest.param(
        '{\r\n\t"a": 1\r\n}',
        EOS,
        [2, 7],
        '{\r\n\t"a": 1,\r\n\t"eos_token_id": [\r\n\t\t2,\r\n\t\t7\r\n\t]\r\n}',
        id="absent inserted crlf tab",
    ),
    pytest.param(
        '{"a":1,"z":2}',
        EOS,
        [2, 7],
        '{"a":1,"eos_token_id":[2,7],"z":2}',
        id="absent inserted in one-line compact object",
    ),
    pytest.param(
        '{"a": 1}\n',
        EOS,
        [2, 7],
        '{"a": 1, "eos_token_id": [2, 7]}\n',
        id="absent inserted in one-line object",
    ),
    pytest.param(
        "{}\n",
        EOS,
        [2, 7],
        '{"eos_token_id": [2, 7]}\n',
        id="absent in empty object",
    ),
    pytest.param(
        '{\n  "a": 1,\n  "text_config": {}\n}\n',
        TEXT_EOS,
        [2, 7],
        '{\n  "a": 1,\n  "text_config": {\n    "eos_token_id": [\n      2,\n      7\n'
        "    ]\n  }\n}\n",
        id="absent in empty nested object of pretty document",
    ),
    pytest.param(
        '{\n  "eos_token_id": 9,\n  "text_config": {\n    "eos_token_id": 1,\n'
        '    "vocab_size": 10\n  }\n}\n',
        TEXT_EOS,
        [1, 106],
        '{\n  "eos_token_id": 9,\n  "text_config": {\n    "eos_token_id": [\n      1,\n'
        '      106\n    ],\n    "vocab_size": 10\n  }\n}\n',
        id="nested under text_config",
    ),
    pytest.param(
        '{\n  "text_config": {\n    "bos_token_id": 2,\n    "vocab_size": 10\n  }\n}\n',
        TEXT_EOS,
        [1, 106],
        '{\n  "text_config": {\n    "bos_token_id": 2,\n    "eos_token_id": [\n      1,\n'
        '      106\n    ],\n    "vocab_size": 10\n  }\n}\n',
        id="absent nested under text_config",
    ),
    pytest.param(
        '{"eos_token_id": 1, "a": 0, "eos_token_id": 2}',
        EOS,
        [5, 6],
        '{"eos_token_id": 1, "a": 0, "eos_token_id": [5, 6]}',
        id="duplicate key edits the last occurrence",
    ),
    pytest.param(
        '{\n  "name": "é",\n  "eos_token_id": 1\n}\n',
        EOS,
        [1, 2],
        '{\n  "name": "é",\n  "eos_token_id": [\n    1,\n    2\n  ]\n}\n',
        id="non-ascii kept raw",
    ),
    pytest.param(
        '{\n  "name": "\\u00e9 \\"q\\" \\ud83d\\ude00",\n  "eos_token_id": 1\n}\n',
        EOS,
        [1, 2],
        '{\n  "name": "\\u00e9 \\"q\\" \\ud83d\\ude00",\n  "eos_token_id": [\n    1,\n    2\n'
        "  ]\n}\n",
        id="escaped strings stay escaped",
    ),
    pytest.param(
        '{"eos\\u005ftoken_id": 1}',
        EOS,
        [1, 2],
        '{"eos\\u005ftoken_id": [1, 2]}',
        id="escaped key is matched",
    ),
    pytest.param(
        '{"eos_token_id": true}',
        EOS,
        1,
        '{"eos_token_id": 1}',
        id="true is not 1",
    ),
]


@pytest.mark.parametrize(("text", "key_path", "value", "expected"), FIX_CASES)
def test_set_json_value_exact(text, key_path, value, expected):
    result = set_json_value(text, key_path, value)
    assert result == expected
    expected_obj = _loads(text)
    target = expected_obj
    for key in key_path[:-1]:
        target = target[key]
    target[key_path[-1]] = value
    assert _loads(result) == expected_obj
    assert set_json_value(result, key_path, value) == result


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param('{"eos_token_id": 2}\n', 2, id="int already"),
        pytest.param('{\n  "eos_token_id": [\n    1,\n    2\n  ]\n}', [1, 2], id="list already"),
        pytest.param('{"eos_token_id":[1 , 2]}', (1, 2), id="odd spacing and tuple value"),
        pytest.param('{"eos_token_id": null}', None, id="null already"),
    ],
)
def test_set_json_value_noop_returns_same_text(text, value):
    assert set_json_value(text, EOS, value) is text


@pytest.mark.parametrize(
    ("text", "key_path", "span"),
    [
        pytest.param('{"eos_token_id": 2}', EOS, (17, 18), id="int"),
        pytest.param('\ufeff{"eos_token_id": [1, 2]}', EOS, (18, 24), id="bom list"),
        pytest.param('{"a": {"b": "x\\"}"}}', ("a", "b"), (12, 18), id="nested escaped quote"),
        pytest.param('{"a": 1, "a": 22}', ("a",), (14, 16), id="duplicate takes last"),
        pytest.param('{"a": 1}', EOS, None, id="absent"),
        pytest.param('{"a": 1}', TEXT_EOS, None, id="absent parent"),
        pytest.param('{"a": -1.5e+3}', ("a",), (6, 13), id="number"),
    ],
)
def test_find_value_span(text, key_path, span):
    assert find_value_span(text, key_path) == span


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param('{"a": 01}', id="leading zero"),
        pytest.param('{"a": 1.}', id="bare dot"),
        pytest.param('{"a": .5}', id="no integer part"),
        pytest.param('{"a": 1e}', id="empty exponent"),
        pytest.param('{"a": tru}', id="bad literal"),
        pytest.param('{"a" 1}', id="missing colon"),
        pytest.param('{"a": 1,}', id="trailing comma"),
        pytest.param('{"a": [1,]}', id="trailing comma in array"),
        pytest.param('{"a": 1} x', id="extra data"),
        pytest.param('{"a": "\x01"}', id="control character"),
        pytest.param('{"a": "\\x"}', id="bad escape"),
        pytest.param('{"a": "\\u12"}', id="short unicode escape"),
        pytest.param('{"a": "x', id="unterminated string"),
        pytest.param("{a: 1}", id="unquoted key"),
        pytest.param("\ufeff\ufeff{}", id="double bom"),
    ],
)
def test_invalid_json_raises_value_error(text):
    with pytest.raises(ValueError):  # noqa: PT011 (json's own message varies)
        _loads(text)  # the scanner rejects what json.loads rejects
    with pytest.raises(ValueError, match="invalid JSON"):
        find_value_span(text, EOS)
    with pytest.raises(ValueError, match="invalid JSON"):
        set_json_value(text, EOS, [1])


@pytest.mark.parametrize(
    "text", [pytest.param("[1]", id="array"), pytest.param('"x"', id="string")]
)
def test_top_level_not_object_raises(text):
    with pytest.raises(ValueError, match="top level is not an object"):
        find_value_span(text, EOS)


def test_path_through_non_object_raises():
    with pytest.raises(ValueError, match="text_config is not a JSON object"):
        find_value_span('{"text_config": [1]}', TEXT_EOS)
    with pytest.raises(ValueError, match="not a JSON object"):
        set_json_value('{"text_config": null}', TEXT_EOS, [1])


def test_missing_parent_object_raises():
    with pytest.raises(ValueError, match="no object at text_config"):
        set_json_value('{"a": 1}', TEXT_EOS, [1])


def test_empty_key_path_raises():
    with pytest.raises(ValueError, match="at least one key"):
        set_json_value("{}", (), [1])


def test_accepts_what_json_loads_accepts():
    text = '{"a": NaN, "b": -Infinity, "c": "\\ud800", "eos_token_id": 1}'
    assert set_json_value(text, EOS, [1, 2]) == text.replace('": 1}', '": [1, 2]}')


def test_bad_edit_raises_verification_error(monkeypatch):
    monkeypatch.setattr(jsonedit, "format_value_like", lambda *a, **k: '[1, 2], "x": 1')
    with pytest.raises(VerificationError, match="changed more than eos_token_id"):
        set_json_value('{"eos_token_id": 1}', EOS, [1, 2])
    monkeypatch.setattr(jsonedit, "format_value_like", lambda *a, **k: "[1,")
    with pytest.raises(VerificationError, match="invalid JSON"):
        set_json_value('{"eos_token_id": 1}', EOS, [1, 2])


@pytest.mark.parametrize(
    ("old", "kwargs", "expected"),
    [
        pytest.param("2", {"newline": "\n"}, "[\n    1,\n    2\n  ]", id="scalar pretty"),
        pytest.param(None, {"newline": ""}, "[1, 2]", id="absent one-line"),
        pytest.param(None, {"newline": "", "item_sep": ","}, "[1,2]", id="absent compact"),
        pytest.param(
            "[\r\n\t\t9\r\n\t]", {"newline": ""}, "[\r\n\t\t1,\r\n\t\t2\r\n  ]", id="crlf"
        ),
        pytest.param("[9 ,  8]", {"newline": "\n"}, "[1 ,  2]", id="odd inline sep"),
    ],
)
def test_format_value_like(old, kwargs, expected):
    result = format_value_like([1, 2], old, indent_unit="  ", base_indent="  ", **kwargs)
    assert result == expected


def test_format_value_like_non_list():
    assert format_value_like(None, "[1]", indent_unit="  ", base_indent="", newline="\n") == "null"
    assert format_value_like([], "[1]", indent_unit="  ", base_indent="", newline="\n") == "[]"


# --- property test -----------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
_scalars |= st.floats(allow_nan=False, allow_infinity=False)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_keys = st.text(max_size=10) | st.sampled_from(["eos_token_id", "bos_token_id", "pad_token_id"])
_objects = st.dictionaries(_keys, _values, max_size=6)
_eos_values = st.none() | st.integers(0, 10**6) | st.lists(st.integers(0, 10**6), max_size=3)


@st.composite
def _documents(draw):
    """(text, key_path, parsed object): a JSON object with random, valid formatting."""
    obj = draw(_objects)
    if draw(st.booleans()):
        obj["eos_token_id"] = draw(_eos_values)
    key_path = EOS
    if draw(st.booleans()):
        outer = draw(_objects)
        outer["text_config"] = obj
        obj, key_path = outer, TEXT_EOS
    indent = draw(st.sampled_from([None, 0, 2, 4, "\t"]))
    separators = draw(st.sampled_from([(", ", ": "), (",", ":"), (",", ": ")]))
    text = json.dumps(
        obj,
        indent=indent,
        separators=separators,
        ensure_ascii=draw(st.booleans()),
        sort_keys=draw(st.booleans()),
    )
    newline = "\n"
    if indent is not None and draw(st.booleans()):
        newline = "\r\n"  # with indent every "\n" is structural: json escapes them in strings
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text += newline
    if draw(st.booleans()):
        text = "\ufeff" + text
    return text, key_path, obj


def _common_prefix_len(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_documents(), new=st.lists(st.integers(0, 2**31), max_size=4))
def test_set_json_value_property(doc, new):
    text, key_path, obj = doc
    span = find_value_span(text, key_path)
    result = set_json_value(text, key_path, new)

    expected = json.loads(json.dumps(obj))
    target = expected if key_path == EOS else expected["text_config"]
    target["eos_token_id"] = new
    assert _loads(result) == expected
    assert set_json_value(result, key_path, new) == result
    assert result.startswith("\ufeff") == text.startswith("\ufeff")
    if "\r\n" in text:
        assert "\n" not in result.replace("\r\n", "")
    if span is not None:
        start, end = span
        assert result[:start] == text[:start]
        assert result[len(result) - (len(text) - end) :] == text[end:]
    else:  # a pure insertion: the original text is a prefix + suffix of the result
        prefix = _common_prefix_len(text, result)
        suffix = _common_prefix_len(text[::-1], result[::-1])
        assert prefix + suffix >= len(text)
