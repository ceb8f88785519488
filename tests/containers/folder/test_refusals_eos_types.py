"""generation_config.json's eos_token_id of the wrong type ("248044", [248044, "248046"],
248044.0, true, [248044, null], nested lists; and -1, an id no token has): the field eosfix
exists to repair is checked, what each runtime does with the value is said (executed in
tests/conformance), and ``fix`` writes the list of ints it names, changing only the value."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from tests.conftest import SAMPLES, copy_repo, run_in

GEN = "generation_config.json"
VALUES = {  # what the value is -> (as written, the list fix writes)
    "a string": ('"248044"', "[248044, 248046]"),
    "a list with a string": ('[248044, "248046"]', "[248044, 248046]"),
    "a float": ("248044.0", "[248044, 248046]"),
    "true": ("true", "[248046]"),  # names no id: only the terminator is added
    "a list with null": ("[248044, null]", "[248044, 248046]"),
    "a nested list": ("[[248044, 248046]]", "[248044, 248046]"),
    "-1": ("-1", "[248046]"),  # an id no token has: removed (EOS013)
}


def _sample(tmp_path, value):
    folder = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    path = folder / GEN
    path.write_text(path.read_text().replace('"eos_token_id": 248044', f'"eos_token_id": {value}'))
    return folder, path


@pytest.mark.parametrize("what", sorted(VALUES))
def test_fix_writes_the_ids_the_value_names_changing_only_the_value(
    tmp_path, what, capsys, monkeypatch
):
    value, fixed = VALUES[what]
    _, path = _sample(tmp_path, value)
    before = path.read_text()
    code, out, err = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1, err
    assert "could not be checked" not in out + err
    assert f"  fix           eos_token_id -> {fixed}" in out
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 1
    after = path.read_text()
    start = before.index('"eos_token_id": ') + len('"eos_token_id": ')
    end = start + len(value)
    assert after.startswith(before[:start])  # only the value changes
    assert after.endswith(before[end:])
    assert json.loads(after) == {**json.loads(before), "eos_token_id": json.loads(fixed)}
    assert run_in(capsys, monkeypatch, tmp_path, "check", "m")[0] == 0


@pytest.mark.parametrize("what", sorted(set(VALUES) - {"-1"}))
def test_a_value_that_is_not_ids_is_eos018_saying_what_each_runtime_does(tmp_path, what):
    value, _ = VALUES[what]
    folder, _ = _sample(tmp_path, value)
    result = api.check(folder)
    by_code = {f.code: f for f in result.check.findings}
    f = by_code["EOS018"]
    assert (f.file, f.fixable) == (GEN, True)
    written = json.dumps(json.loads(value))
    assert f.message.startswith(f"eos_token_id {written} is not a token id or a list of ids:")
    assert f.message.endswith(
        (
            "fix writes the ids it names, [248044], as a list of ints",
            "fix writes the ids it names, [248044, 248046], as a list of ints",
            "it names no id, and fix writes none of it",
        )
    )


def test_eos018_names_each_runtime_by_what_it_does_with_a_string(tmp_path):
    folder, _ = _sample(tmp_path, '"248044"')
    (f,) = [f for f in api.check(folder).check.findings if f.code == "EOS018"]
    assert f.message == (
        'eos_token_id "248044" is not a token id or a list of ids: transformers and ExLlamaV2 '
        "cannot run it (generate() raises TypeError; ExLlamaV2Config raises TypeError), vLLM, "
        "SGLang, mlx-lm and mlx-vlm hold it but no token equals it, TGI and ollama ignore it; "
        "fix writes the ids it names, [248044], as a list of ints"
    )


def test_true_is_read_as_id_1_by_python_runtimes(tmp_path):
    folder, _ = _sample(tmp_path, "true")
    result = api.check(folder)
    (f,) = [f for f in result.check.findings if f.code == "EOS018"]
    assert "transformers, vLLM, SGLang, mlx-lm and mlx-vlm read it as [1]" in f.message
    assert f.message.endswith("it names no id, and fix writes none of it")


def test_minus_one_is_an_id_no_token_has(tmp_path):
    folder, _ = _sample(tmp_path, "-1")
    codes = [f.code for f in api.check(folder).check.findings]
    assert "EOS013" in codes
    assert "EOS018" not in codes


def test_an_object_is_still_refused_in_one_line(tmp_path, capsys, monkeypatch):
    _sample(tmp_path, '{"id": 2}')
    code, _, err = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 2
    assert "eos_token_id: expected a token id" in err


def test_json_output_keeps_the_value_as_written_and_validates(tmp_path, capsys, monkeypatch):
    from tests.support.schemas import CHECK, valid

    _sample(tmp_path, '[248044, "248046"]')
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "--format", "json", "m")
    assert code == 1
    document = json.loads(out)
    valid(CHECK, document)
    assert document["repos"][0]["eos_token_id"] == [248044, "248046"]
