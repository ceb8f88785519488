"""Per-runtime stop sets (../shared/notes/runtimes.md A.13 scenarios and corner cases)."""

from __future__ import annotations

import itertools
import re

import pytest

from eosfix.runtimes import (
    EOG_TEXTS,
    RUNTIMES,
    StopInputs,
    apply_generation_config_eos,
    describe,
    parse_pins,
    stop_sets,
)

A, B = 151643, 151645  # <|endoftext|>, <|im_end|>
CHATML = {"<|endoftext|>": A, "<|im_start|>": 151644, "<|im_end|>": B}
ALL = {rt.name for rt in RUNTIMES}


def make(**kw) -> StopInputs:
    base = {
        "tokenizer_eos_id": A,
        "tokenizer_eos_content": "<|endoftext|>",
        "generation_config_exists": True,
        "generation_config_eos": (A,),
        "generation_config_eos_is_list": False,
        "config_eos": (A,),
        "config_eos_is_list": False,
        "text_config_eos": None,
        "vocab": CHATML,
    }
    base.update(kw)
    return StopInputs(**base)


def stopping_on(inputs: StopInputs, token: int) -> set[str]:
    return {name for name, ids in stop_sets(inputs).items() if token in ids}


def test_runtime_names_and_describe():
    assert [rt.name for rt in RUNTIMES] == [
        "transformers", "vLLM", "SGLang", "TGI", "TGI-transformers", "llama.cpp", "ollama",
        "mlx-lm", "mlx-vlm", "candle", "ExLlamaV2",
    ]  # fmt: skip
    assert describe("vllm").name == "vLLM"
    assert all(rt.reads and rt.source for rt in RUNTIMES)
    with pytest.raises(KeyError):
        describe("nope")


@pytest.mark.parametrize("b_text", ["<|im_end|>", "<|turn_end|>"])
def test_a_turn_end_only_the_tokenizer_names_stops_the_runtimes_that_read_its_eos(b_text):
    # tokenizer eos B, generation_config A (int), config.json A (runtimes.md A.13)
    inputs = make(tokenizer_eos_id=B, tokenizer_eos_content=b_text,
                  vocab={"<|endoftext|>": A, b_text: B})  # fmt: skip
    # mlx-lm >= 0.32.0 and mlx-vlm >= 0.7.0 add the tokenizer's eos to the configured ids
    assert stopping_on(inputs, B) == {
        "vLLM", "SGLang", "TGI", "TGI-transformers", "llama.cpp", "ollama", "mlx-lm", "mlx-vlm"
    }  # fmt: skip
    sets = stop_sets(inputs)
    assert sets["transformers"] == {A}
    assert sets["mlx-lm"] == sets["mlx-vlm"] == {A, B}
    assert sets["candle"] == sets["ExLlamaV2"] == {A}
    # mlx-lm before 0.32.0 and mlx-vlm before 0.7.0 replace the tokenizer's eos with the
    # configured ids: they run on past the turn end
    older = stop_sets(inputs, {"mlx-lm": "0.31.3", "mlx-vlm": "0.6.17"})
    assert older["mlx-lm"] == older["mlx-vlm"] == {A}


def test_llama_cpp_and_ollama_stop_on_im_end_by_its_text_whatever_the_eos_id():
    inputs = make(tokenizer_eos_id=A)  # even with the wrong GGUF eos, <|im_end|> is EOG by text
    assert B in stop_sets(inputs)["llama.cpp"]
    assert B in stop_sets(inputs)["ollama"]
    assert B not in stop_sets(inputs)["vLLM"]


def test_the_fixed_list_stops_every_runtime_that_reads_generation_config():
    after = apply_generation_config_eos(make(), [A, B])
    yes = {"transformers", "vLLM", "SGLang", "TGI", "mlx-lm", "mlx-vlm", "ollama", "llama.cpp"}
    assert stopping_on(after, B) == yes
    assert stopping_on(after, A) == ALL  # TGI's list replaces but still holds the tokenizer eos


def test_a_glm_user_turn_opener_in_the_list_is_no_stop_for_llama_cpp_or_ollama():
    eot, user = 151329, 151336
    vocab = {"<|endoftext|>": eot, "<|user|>": user, "<|assistant|>": 151337}
    before = make(tokenizer_eos_id=eot, generation_config_eos=(eot,), config_eos=(eot,),
                  vocab=vocab)  # fmt: skip
    after = apply_generation_config_eos(before, [eot, user])
    # ollama: llama-server reads no eos_token_ids (tests/runtimes/ollama/test_engines.py)
    assert stopping_on(after, user) == {"transformers", "vLLM", "SGLang", "TGI", "mlx-lm",
                                        "mlx-vlm"}  # fmt: skip
    assert stopping_on(before, user) == set()


def test_missing_generation_config_falls_back_to_config_json():
    inputs = make(generation_config_exists=False, generation_config_eos=None,
                  tokenizer_eos_id=B, config_eos=(A, 7), config_eos_is_list=True)  # fmt: skip
    sets = stop_sets(inputs)
    assert sets["transformers"] == {A, 7}
    assert sets["vLLM"] == {A, 7, B}
    assert sets["TGI"] == {B}
    assert sets["mlx-lm"] == {A, 7, B}  # config.json's ids and the tokenizer's eos
    assert stop_sets(inputs, {"mlx-lm": "0.31.3"})["mlx-lm"] == {A, 7}
    assert sets["ExLlamaV2"] == {A}
    assert sets["llama.cpp"] >= {A, B}  # tokenizer eos B; the config list is ignored anyway


def test_missing_generation_config_falls_back_to_text_config():
    inputs = make(generation_config_exists=False, generation_config_eos=None, config_eos=None,
                  text_config_eos=(1, 106), tokenizer_eos_id=1, vocab={"<eos>": 1})  # fmt: skip
    sets = stop_sets(inputs)
    assert sets["transformers"] == {1, 106}
    assert sets["vLLM"] == {1, 106}
    assert sets["candle"] == set()  # top-level config.json only, no </s>
    assert sets["mlx-lm"] == {1}  # top-level only, falls back to tokenizer eos


def test_generation_config_without_eos_disables_transformers_stop():
    inputs = make(generation_config_eos=None)
    sets = stop_sets(inputs)
    assert sets["transformers"] == set()
    assert sets["vLLM"] == {A}
    assert sets["mlx-lm"] == {A}  # config.json value kept when gen-config eos is absent


@pytest.mark.parametrize(("is_list", "expected"), [(False, {B}), (True, {A, 7})])
def test_tgi_only_honours_a_list(is_list, expected):
    inputs = make(tokenizer_eos_id=B, generation_config_eos=(A, 7) if is_list else (A,),
                  generation_config_eos_is_list=is_list)  # fmt: skip
    assert stop_sets(inputs)["TGI"] == expected


def test_ollama_stops_on_the_tokenizer_eos_whatever_generation_config_says():
    vocab = {"<|x|>": 5, "<|y|>": 6}
    as_int = make(tokenizer_eos_id=5, generation_config_eos=(6,), vocab=vocab)
    as_list = as_int._replace(generation_config_eos_is_list=True)
    # ollama create writes the list as eos_token_ids; llama-server (>= 0.30.0) never reads it
    assert stop_sets(as_int)["ollama"] == stop_sets(as_list)["ollama"] == {5}
    assert stop_sets(as_list)["llama.cpp"] == {5}  # never reads generation_config.json


def test_gpt_oss_end_removed_from_llama_cpp_eog():
    vocab = {"<|endoftext|>": 199999, "<|return|>": 200002, "<|end|>": 200007,
             "<|call|>": 200012}  # fmt: skip
    inputs = make(tokenizer_eos_id=200002, vocab=vocab)
    assert stop_sets(inputs)["llama.cpp"] == {199999, 200002, 200012}
    phi = make(tokenizer_eos_id=199999, vocab={"<|endoftext|>": 199999, "<|end|>": 200007})
    assert 200007 in stop_sets(phi)["llama.cpp"]  # without <|return|>+<|call|> it stays
    solar = make(tokenizer_eos_id=1, vocab={"<|end|>": 2, "<|calls|>": 3, "<|flush|>": 4})
    assert stop_sets(solar)["llama.cpp"] == {1, 3, 4}


def test_llama_cpp_config_int_fallback_and_list_ignored():
    as_int = make(tokenizer_eos_id=None, config_eos=(9,), vocab={})
    as_list = make(tokenizer_eos_id=None, config_eos=(9, 10), config_eos_is_list=True, vocab={})
    assert stop_sets(as_int)["llama.cpp"] == {9}
    assert stop_sets(as_list)["llama.cpp"] == set()
    assert "<|eot_id|>" in EOG_TEXTS
    assert "<\uff5cend\u2581of\u2581sentence\uff5c>" in EOG_TEXTS


def test_exllamav2_keeps_first_config_id_only():
    inputs = make(config_eos=(B, A), config_eos_is_list=True)
    assert stop_sets(inputs)["ExLlamaV2"] == {B}
    assert stop_sets(inputs)["candle"] == {A, B}
    # exllamav2 tokenizer.py: no config.json eos -> tokenizer_config.json's eos_token, else 2
    assert stop_sets(make(config_eos=None))["ExLlamaV2"] == {A}
    no_eos = make(config_eos=None, tokenizer_eos_id=None, tokenizer_eos_content=None)
    assert stop_sets(no_eos)["ExLlamaV2"] == {2}


def test_sglang_unions_everything_and_eom():
    vocab = {"<|end_of_text|>": 128001, "<|eom_id|>": 128008, "<|eot_id|>": 128009}
    inputs = make(tokenizer_eos_id=128009, generation_config_eos=(128001,),
                  config_eos=(128002,), vocab=vocab, added_tokens=vocab)  # fmt: skip
    assert stop_sets(inputs)["SGLang"] == {128001, 128002, 128008, 128009}
    # only an added token counts (get_added_vocab()), and the other two texts too
    assert 128008 not in stop_sets(inputs._replace(added_tokens={}))["SGLang"]
    more = {"<|content_model_end_sampling|>": 5, "<|ifm|im_end|>": 6}
    assert stop_sets(inputs._replace(added_tokens=more))["SGLang"] >= {5, 6}


def test_sglang_ignores_a_falsy_generation_config_eos():
    for gen, is_list, joins in [((0,), False, False), ((), True, False), ((0,), True, True)]:
        inputs = make(tokenizer_eos_id=B, config_eos=(B,), generation_config_eos=gen,
                      generation_config_eos_is_list=is_list)  # fmt: skip
        assert (0 in stop_sets(inputs)["SGLang"]) == joins, gen
        assert 0 in stop_sets(inputs)["vLLM"] or gen == ()


def test_config_class_default_joins_vllm_and_sglang():
    """config.json without eos_token_id: the config object holds its class's default
    (LlamaConfig: 2); transformers' generate() reads the file and stops on nothing."""
    inputs = make(generation_config_exists=False, generation_config_eos=None, config_eos=None,
                  config_model_type="llama", tokenizer_eos_id=0)  # fmt: skip
    sets = stop_sets(inputs)
    assert sets["vLLM"] == sets["SGLang"] == {0, 2}
    assert sets["transformers"] == set()
    null = inputs._replace(config_has_eos_key=True)  # "eos_token_id": null
    assert stop_sets(null)["vLLM"] == stop_sets(null)["SGLang"] == {0}
    unknown = inputs._replace(config_model_type="custom-code")
    assert stop_sets(unknown)["vLLM"] == {0}
    # a vision-language config: the text_config object's default
    vlm = make(generation_config_exists=False, generation_config_eos=None, config_eos=None,
               config_model_type="llava", text_config_present=True,
               text_config_model_type="llama", tokenizer_eos_id=0)  # fmt: skip
    assert stop_sets(vlm)["vLLM"] == stop_sets(vlm)["SGLang"] == {0, 2}


def test_tgi_transformers_reads_the_tokenizer_eos_only():
    inputs = make(tokenizer_eos_id=B, generation_config_eos=(A, 7),
                  generation_config_eos_is_list=True, config_eos=(A,))  # fmt: skip
    sets = stop_sets(inputs)
    assert sets["TGI"] == {A, 7}
    assert sets["TGI-transformers"] == {B}


def test_mlx_lm_and_mlx_vlm_union_with_tokenizer_eos():
    inputs = make(tokenizer_eos_id=B, generation_config_eos=(0,), config_eos=(A,))
    assert stop_sets(inputs)["mlx-lm"] == {A, B}  # int 0 is falsy: config.json kept
    assert stop_sets(inputs)["mlx-vlm"] == {0, B}  # the key is present: it wins
    none = make(tokenizer_eos_id=B, generation_config_eos=None, config_eos=None)
    assert stop_sets(none)["mlx-lm"] == stop_sets(none)["mlx-vlm"] == {B}


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.32.2", {A, B}), ("0.32.0", {A, B}), ("0.31.3", {A}), ("0.30.2", {A}),
     ("0.30.0", {A}), ("0.20.3", {A}), ("0.20.2", {B}), ("0.19", {B}), ("0.1.0", {B})],
)  # fmt: skip
def test_mlx_lm_rule_by_version(version, expected):
    # tokenizer eos B, generation_config.json 0 (falsy: never read), config.json A
    inputs = make(tokenizer_eos_id=B, generation_config_eos=(0,), config_eos=(A,))
    assert stop_sets(inputs, {"mlx-lm": version})["mlx-lm"] == expected


def test_mlx_lm_reads_a_truthy_generation_config_from_0_30_2():
    inputs = make(tokenizer_eos_id=B, generation_config_eos=(0,),
                  generation_config_eos_is_list=True, config_eos=(A,))  # fmt: skip
    assert stop_sets(inputs, {"mlx-lm": "0.30.2"})["mlx-lm"] == {0}  # [0] is truthy
    assert stop_sets(inputs, {"mlx-lm": "0.30.0"})["mlx-lm"] == {A}  # config.json only
    empty = inputs._replace(config_eos=(), config_eos_is_list=True,
                                generation_config_eos=None)  # fmt: skip
    assert stop_sets(empty, {"mlx-lm": "0.31.3"})["mlx-lm"] == set()  # [] replaces: no stop
    assert stop_sets(empty)["mlx-lm"] == {B}


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.7.10", {B}), ("0.7.0", {B}), ("0.6.17", {B}), ("0.6.3", {B}), ("0.6.2", {A}),
     ("0.3.10", {A}), ("0.3.9", {A}), ("0.2.0", {A})],
)  # fmt: skip
def test_mlx_vlm_null_generation_config_by_version(version, expected):
    # generation_config.json "eos_token_id": null copied over config.json's A from 0.6.3 on
    inputs = make(tokenizer_eos_id=B, generation_config_eos=None, config_eos=(A,),
                  generation_config_has_eos_key=True)  # fmt: skip
    assert stop_sets(inputs, {"mlx-vlm": version})["mlx-vlm"] == expected


def test_candle_falls_back_to_slash_s():
    inputs = make(config_eos=None, vocab={"</s>": 2})
    assert stop_sets(inputs)["candle"] == {2}


def test_apply_generation_config_creates_file():
    before = make(generation_config_exists=False, generation_config_eos=None, config_eos=None)
    after = apply_generation_config_eos(before, [A, B])
    assert after.generation_config_exists
    assert after.generation_config_eos == (A, B)
    assert after.generation_config_eos_is_list
    assert after.config_eos is None


def test_the_list_in_both_files_covers_candle_and_exllamav2():
    """generation_config.json and config.json (top level and text_config) written as one list,
    as ``fix --config-json`` does: every runtime stops on every id of it, but TGI's
    transformers path, which reads the tokenizer's eos (A) alone."""
    after = apply_generation_config_eos(make(text_config_eos=(A,)), [B, A])._replace(
        config_eos=(B, A), config_eos_is_list=True, text_config_eos=(B, A),
    )  # fmt: skip
    assert stopping_on(after, B) == ALL - {"TGI-transformers"}


def test_stop_sets_before_and_after_the_list():
    before = make()
    after = apply_generation_config_eos(before, [A, B])
    now, then = stop_sets(before), stop_sets(after)
    assert list(now) == [rt.name for rt in RUNTIMES]
    assert now["transformers"] == {A}
    assert then["transformers"] == {A, B}
    assert B in now["llama.cpp"]  # <|im_end|> by text
    assert B not in then["candle"]  # config.json only
    assert B not in then["ExLlamaV2"]


def test_transformers_text_config_fallback_from_4_28():
    inputs = make(generation_config_exists=False, generation_config_eos=None, config_eos=None,
                  text_config_eos=(B,))  # fmt: skip
    assert stop_sets(inputs)["transformers"] == {B}
    assert stop_sets(inputs, {"transformers": "4.28.0"})["transformers"] == {B}
    assert stop_sets(inputs, {"transformers": "4.27.4"})["transformers"] == set()


def test_parse_pins():
    assert parse_pins(["mlx-lm==0.19", "Transformers == 4.30"]) == {
        "mlx-lm": "0.19", "transformers": "4.30"
    }  # fmt: skip
    assert parse_pins([]) == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mlx-lm", "expected NAME==VERSION"),
        ("mlx-lm==", "expected NAME==VERSION"),
        ("nope==1.0", "unknown runtime 'nope' (known: transformers, vLLM,"),
        ("mlx-lm==0.32.x", "'0.32.x' is not a version like 0.32.2"),
        ("mlx-lm==0.0.14", "eosfix models mlx-lm 0.1.0 and later: earlier releases were not read"),
        ("transformers==4.25.1", "eosfix models transformers 4.26.0 and later: earlier versions"),
        ("mlx-vlm==0.1.27", "eosfix models mlx-vlm 0.2.0 and later"),
        ("vLLM==0.6.0", "vLLM's rule is not versioned"),
    ],
)
def test_parse_pins_refuses(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_pins([spec])


def test_only_rules_a_test_runs_say_executed():
    """transformers, mlx-lm, mlx-vlm (tests/conformance/), vLLM, SGLang and ExLlamaV2
    (tests/conformance/, each in its own virtualenv) and llama.cpp (tests/
    test_gguf_llamacpp.py, at a commit: its rule is not versioned) are run; TGI's two paths
    are cited (tests/conformance/test_cited_runtimes.py holds their sets as data); the rest
    modelled. No rule is both."""
    executed = {rt.name for rt in RUNTIMES if rt.executed is not None}
    cited = {rt.name for rt in RUNTIMES if rt.cited is not None}
    assert executed == ALL - {"ollama", "candle", "TGI", "TGI-transformers"}
    assert cited == {"TGI", "TGI-transformers"}


def test_rule_ranges_are_contiguous_and_named():
    for rt in RUNTIMES:
        rules = rt.rules
        assert rules[0] == rt.current
        assert rt.rule_for(None) == rt.current
        if not rt.versioned:
            assert rules[0].versions_str == "not established"
            continue
        assert rules[0].versions_str == f">= {rt.since}"
        for newer, older in itertools.pairwise(rules):
            assert older.until == newer.since, rt.name  # no gap, no overlap
            assert rt.rule_for(older.since) == older
            assert rt.rule_for(newer.since) == newer
        assert all(r.source and r.reads for r in rules)


def test_versioned_runtimes():
    assert {rt.name for rt in RUNTIMES if rt.versioned} >= {"transformers", "mlx-lm", "mlx-vlm"}
    assert describe("mlx-lm").rule_for("0.31.3").versions_str == "0.30.2 to < 0.32.0"
    assert describe("mlx-lm").rule_for("1.0").versions_str == ">= 0.32.0"
