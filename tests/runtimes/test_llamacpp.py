"""llama.cpp's rules one by one, and the converter's eos against gguf-py's own SpecialVocab."""

from __future__ import annotations

import json
import logging

import pytest

from eosfix.containers.folder.inputs import converter_inputs
from eosfix.containers.folder.read import load_repo
from eosfix.runtimes.llamacpp import (
    ConverterInputs,
    GgufVocab,
    converter_special_ids,
    end_of_generation,
)
from tests.conftest import CORPUS, SAMPLES, copy_repo


def vocab(tokens, model="gpt2", **keys):
    return GgufVocab.from_tokens(model, "", tokens, keys)


def eog(tokens, **kw):
    return end_of_generation(vocab(tokens, **kw))


def test_tokenizer_defaults_apply_without_keys_and_are_disabled_out_of_range():
    words = [f"w{i}" for i in range(20)]
    assert eog(words, model="gpt2").ids == {11}  # gpt2: bos = eos = 11
    assert eog(words, model="llama").ids == {2}  # SentencePiece: eos 2
    assert eog(words[:5], model="gpt2").ids == set()  # 11 is out of range: disabled
    assert eog(words, model="no_vocab").ids == set()


def test_keys_override_defaults_and_out_of_range_keys_are_ignored():
    words = [f"w{i}" for i in range(20)]
    assert eog(words, model="llama", eos=7).ids == {7}
    assert eog(words, model="llama", eos=99).ids == {2}  # bad key: the default stays
    assert eog(words, eos=3, eot=4, eom=5).ids == {3, 4, 5}


def test_text_list_and_forced_ids():
    words = ["a", "<|im_end|>", "<|eot_id|>", "</s>", "<turn|>", "<|user|>"]
    assert eog(words, eos=0).ids == {0, 1, 2, 3, 4}  # <|user|> is on no list


def test_gpt_oss_end_is_dropped_and_solar_open_too():
    harmony = ["<|endoftext|>", "<|return|>", "<|end|>", "<|call|>"]
    assert eog(harmony, eos=1).ids == {0, 1, 3}
    assert eog(harmony[:3], eos=1).ids == {0, 1, 2}  # without <|call|>, <|end|> stays
    solar = ["x", "<|end|>", "<|calls|>", "<|flush|>"]
    assert eog(solar, eos=0).ids == {0, 2, 3}
    # even when eot names it explicitly, the workaround drops it
    assert 2 not in eog(harmony, eos=1, eot=2).ids


def test_gemma4_and_plamo_keep_s_as_text():
    gemma = ["<eos>", "</s>", "<|tool_response>"]
    assert eog(gemma, eos=0).ids == {0, 2}
    plamo = ["<|plamo:unk|>", "</s>", "<|plamo:eos|>"]
    assert eog(plamo, model="plamo2").ids == {2}  # default eos 2 is <|plamo:eos|>
    assert eog(["x", "</s>"], eos=0).ids == {0, 1}  # paddleocr: </s> ends generation


def test_fim_ids_by_text_one_candidate_certain_several_uncertain():
    one = eog(["x", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"], eos=0)
    assert one.ids == {0, 1, 2, 3}
    two = eog(["x", "<|fim_pad|>", "<PAD>"], eos=0)
    assert two.ids == {0}
    assert two.uncertain == {1, 2}
    keyed = eog(["x", "<|fim_pad|>", "<PAD>"], eos=0, fim_pad=2)
    assert keyed.ids == {0, 2}
    assert not keyed.uncertain


def test_empty_token_text_is_renamed_like_llama_cpp():
    v = vocab(["", "<|im_end|>"], eos=1)
    assert v.text_ids == {"[EMPTY_0]": 0, "<|im_end|>": 1}


# --- the converter's eos: compared with gguf-py's SpecialVocab on the same folders -----------


def _special_vocab(folder):
    gguf = pytest.importorskip("gguf", reason="pip install 'eosfix[verify]' (the gguf package)")
    logging.getLogger("gguf").setLevel(logging.ERROR)
    sv = gguf.SpecialVocab(folder, load_merges=False)
    return {k: v for k, v in sv.special_token_ids.items() if k in ("eos", "eot", "eom")}


def _ours(folder):
    repo = load_repo(folder)
    cfg = repo.files.get("config.json")
    return converter_special_ids(converter_inputs(repo, cfg.data if cfg else None))


def _folders():
    out = [p for p in sorted(SAMPLES.iterdir()) if p.is_dir()]
    if CORPUS.is_dir():
        out += [p for p in sorted(CORPUS.iterdir()) if (p / "expect.json").is_file()]
    return out


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: p.name)
def test_converter_eos_matches_special_vocab_on_real_folders(folder):
    assert _ours(folder) == _special_vocab(folder)


def _write(folder, files):
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data))
    return folder


ADDED = [{"id": 5, "content": "<|end|>", "special": True},
         {"id": 6, "content": "<|eot|>", "special": True}]  # fmt: skip
CASES = {
    "eos from tokenizer.json added tokens": {
        "tokenizer.json": {"added_tokens": ADDED, "model": {}},
        "tokenizer_config.json": {"eos_token": "<|eot|>"},
        "config.json": {"eos_token_id": 5},
    },
    "eos as an AddedToken dict": {
        "tokenizer.json": {"added_tokens": ADDED},
        "tokenizer_config.json": {"eos_token": {"content": "<|end|>"}},
    },
    "no tokenizer.json: config.json int": {
        "tokenizer_config.json": {"eos_token": "<|eot|>"},
        "config.json": {"eos_token_id": 6},
    },
    "config.json list is ignored": {"config.json": {"eos_token_id": [5, 6]}},
    "text_config eos": {"config.json": {"text_config": {"eos_token_id": 6}}},
    "eos not an added token: config.json int": {
        "tokenizer.json": {"added_tokens": ADDED},
        "tokenizer_config.json": {"eos_token": "</s>"},
        "config.json": {"eos_token_id": 2},
    },
    "sep stands in for a missing eos": {
        "tokenizer.json": {"added_tokens": ADDED},
        "tokenizer_config.json": {"sep_token": "<|end|>"},
    },
    "TemplateProcessing trailing token becomes eos, old eos eot": {
        "tokenizer.json": {"added_tokens": ADDED, "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "<|end|>"}}],
            "pair": []}},
        "tokenizer_config.json": {"eos_token": "<|eot|>"},
    },
    "empty tokenizer_config": {
        "tokenizer.json": {"added_tokens": ADDED},
        "tokenizer_config.json": {},
        "config.json": {"eos_token_id": 5},
    },
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_converter_eos_matches_special_vocab(tmp_path, name):
    folder = _write(tmp_path / "repo", CASES[name])
    assert _ours(folder) == _special_vocab(folder)


def test_converter_prediction_reaches_the_runtime_table(tmp_path):
    from eosfix import api
    from eosfix.containers.folder.runtime_table import runtime_table

    folder = copy_repo(SAMPLES / "glm-next-turn-opener", tmp_path / "glm")
    result = api.check(folder)
    row = next(r for r in runtime_table(result.check).rows if r.runtime == "llama.cpp")
    assert row.stops_before == {"<|user|>": False, "<|observation|>": False}


def test_converter_inputs_without_files():
    x = ConverterInputs(False, (), None, None)
    assert converter_special_ids(x) == {}


@pytest.mark.parametrize(
    "name",
    ["config.json", "tokenizer_config.json", "tokenizer.json", "generation_config.json",
     "special_tokens_map.json"],
)  # fmt: skip
def test_a_byte_order_mark_stops_the_converter_where_eosfix_says(name, tmp_path):
    """gguf-py's SpecialVocab json.load()s config.json, tokenizer_config.json and
    tokenizer.json: a mark there stops the conversion (llama.cpp's ``Refusals``), in any other
    file it is not read."""
    from eosfix.runtimes import describe
    from eosfix.runtimes.rule import FAILS

    folder = copy_repo(SAMPLES / "ordinary-stop-id", tmp_path / "m")
    if not (folder / name).exists():
        (folder / name).write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (folder / name).write_bytes(b"\xef\xbb\xbf" + (folder / name).read_bytes())
    refused = describe("llama.cpp").refusals.files.get(name) == FAILS
    if refused:
        with pytest.raises(ValueError, match="BOM"):
            _special_vocab(folder)
    else:
        _special_vocab(folder)
