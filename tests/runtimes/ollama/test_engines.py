"""ollama's stop rule, release by release, against hand-built GGUF keys.

Every expectation is read from ollama/ollama's source at the commit named beside it (see
docs/ollama.md), not from eosfix's output. The last test runs @huggingface/ollama-utils, the
Hub's code that picks ``params.stop`` for ``ollama run hf.co/...`` pulls, under node.
"""

from __future__ import annotations

import pytest

from eosfix.runtimes import describe, parse_pins, stop_sets
from eosfix.runtimes.llamacpp import GgufVocab, end_of_generation
from eosfix.runtimes.ollama import converted_gguf, folder_stops
from eosfix.runtimes.ollama.compat import INT32, UINT32, OllamaGguf, translate
from eosfix.runtimes.ollama.engines import (
    GO,
    RUNNER,
    SERVER,
    engine_for,
    gguf_stops,
    go_engine_architectures,
    llama_cpp_build,
)
from eosfix.runtimes.rule import StopInputs
from tests.conformance import hubjs
from tests.conftest import unavailable


def blob(
    arch: str,
    tokens: dict[str, int],
    n: int | None = None,
    *,
    model: str = "gpt2",
    pre: str = "",
    keys: dict[str, int] | None = None,
    eos_ids: tuple[int, ...] | None = None,
    ids_type: str = INT32,
    **kw: object,
) -> OllamaGguf:
    """A blob: token texts at ids (the other ids hold texts no rule matches), role -> id keys."""
    size = n if n is not None else max(tokens.values()) + 1
    vocab = GgufVocab(model, pre, size, tokens, dict(keys or {}))  # eos, eot, eom: slot = role
    return OllamaGguf(vocab, arch, eos_token_ids=eos_ids, eos_token_ids_type=ids_type, **kw)  # type: ignore[arg-type]


def ids(g: OllamaGguf, version: str | None = None) -> set[int]:
    return set(gguf_stops(g, version).ids)


# --- which engine (llm/server.go NewLlamaServer; fs/ggml KV.OllamaEngineRequired) ----------


# fs/ggml/ggml.go:277 at c28ddc0a7 (v0.24.0), the last list before the Go engine was removed
REQUIRED_0_24 = {
    "bert", "deepseek2", "deepseekocr", "gemma3", "gemma3n", "gemma4", "gptoss", "gpt-oss",
    "laguna", "llama4", "mistral3", "mllama", "nemotron_h", "nemotron_h_moe", "nemotron_h_omni",
    "nomic-bert", "olmo3", "qwen25vl", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next",
    "qwen3vl", "qwen3vlmoe", "glm4moelite", "glmocr", "lfm2", "lfm2moe",
}  # fmt: skip


def test_go_engine_architectures_by_release():
    assert go_engine_architectures("0.24.0") == REQUIRED_0_24
    assert go_engine_architectures("0.6.0") == {"gemma3"}  # ggml.go:136 at aee28501b
    assert go_engine_architectures("0.6.5") == {"gemma3", "mistral3"}
    # 3d32249c7 "use llama runner for qwen3" shipped in 0.12.5 only (18087f2ec reverted it)
    assert "qwen3" in go_engine_architectures("0.12.4")
    assert "qwen3" not in go_engine_architectures("0.12.5")
    assert "qwen3" in go_engine_architectures("0.12.6")
    assert "gemma4" not in go_engine_architectures("0.19.0")  # 96b202d34 is in 0.20.0
    assert "gemma4" in go_engine_architectures("0.20.0")


@pytest.mark.parametrize(
    ("version", "arch", "projector", "engine"),
    [
        ("0.6.0", "gemma3", False, GO),
        ("0.6.0", "mistral3", False, RUNNER),
        ("0.6.5", "mistral3", False, GO),
        ("0.24.0", "qwen3", False, GO),
        ("0.24.0", "llama", False, RUNNER),  # never listed: llama.cpp runner
        ("0.24.0", "qwen2", False, RUNNER),
        ("0.11.10", "gemma3", True, GO),
        ("0.11.11", "gemma3", True, RUNNER),  # aba157531: split vision models stay off it
        ("0.30.0", "qwen3", False, SERVER),  # 9db4bdbad: llama-server for every GGUF
        ("0.32.15", "llama", False, SERVER),
        ("0.40.0", "gemma3", False, SERVER),
    ],
)
def test_engine_for(version, arch, projector, engine):
    assert engine_for(version, arch, projector) == engine


def test_releases_before_the_engine_choice_are_refused():
    with pytest.raises(ValueError, match=r"0\.6\.0"):
        engine_for("0.5.13", "gemma3")
    with pytest.raises(ValueError, match=r"0\.6\.0"):
        describe("ollama").rule_for("0.5.13")


def test_llama_cpp_builds():
    assert llama_cpp_build("0.24.0") == "ec98e2002"  # Makefile.sync FETCH_HEAD
    assert llama_cpp_build("0.7.1") == "de4c07f93"
    assert llama_cpp_build("0.30.0") == "b9452"  # LLAMA_CPP_VERSION
    assert llama_cpp_build("0.32.15") == "b10488"


# --- the Go engine: eos_token_id + eos_token_ids, nothing else --------------------------------

QWEN = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def test_go_engine_reads_eos_and_the_int32_list_only():
    g = blob("qwen3", QWEN, 151936, keys={"eos": 151645, "eot": 151644, "eom": 151643})
    # qwen3/model.go:231-232 at c28ddc0a7: eot/eom keys and EOG token texts are not read
    assert ids(g, "0.24.0") == {151645}
    listed = g._replace(eos_token_ids=(151645, 151643))
    assert ids(listed, "0.24.0") == {151645, 151643}
    # KV.Ints (ggml.go:245) asserts *array[int32]: a UINT32 list reads as absent
    uint = listed._replace(eos_token_ids_type=UINT32)
    assert ids(uint, "0.24.0") == {151645}


def test_go_engine_without_an_eos_key_stops_on_id_0():
    # KV.Uint's default is 0 (ggml.go:191-193)
    assert ids(blob("qwen3", QWEN, 151936), "0.24.0") == {0}


def test_go_engine_gemma3_adds_eot_or_106():
    gemma = {"<eos>": 1, "<end_of_turn>": 106}
    g = blob("gemma3", gemma, 262144, model="llama", keys={"eos": 1})
    assert ids(g, "0.24.0") == {1, 106}  # gemma3/model.go:81: eot_token_id, default 106
    assert ids(g._replace(vocab=g.vocab._replace(key_ids={
        "eos": 1, "eot": 50})), "0.24.0") == {1, 50}  # fmt: skip
    gpt2 = blob("gemma3", gemma, 262144, model="gpt2", keys={"eos": 1})
    assert ids(gpt2, "0.24.0") == {1}  # :75-77: the gpt2 branch adds nothing (since 0.13.3)
    assert ids(gpt2, "0.13.2") == {1, 106}  # gemma3/model.go:68-71 at 884d26093: always


def test_go_engine_gemma4_adds_eot_or_106():
    g = blob("gemma4", {"<eos>": 1, "<turn|>": 106}, 262144, keys={"eos": 1})
    assert ids(g, "0.20.0") == {1, 106}  # gemma4/model.go:72 at de9673ac3


def test_go_engine_before_the_eos_list():
    # 0.6.x/0.7.0: two int32 fields, Is: id == EOS || id == EOT (model/process_text.go)
    gemma = blob("gemma3", {"<eos>": 1, "<end_of_turn>": 106}, 262144, keys={"eos": 7})
    assert ids(gemma, "0.6.0") == ids(gemma, "0.7.0") == {1, 106}  # hard-coded, keys unread
    mistral = blob("mistral3", {"</s>": 2}, 131072)
    assert ids(mistral, "0.6.5") == {2, 0}  # model_text.go:159: eos default 2, EOT unset: 0
    assert ids(mistral, "0.7.0") == {2, 0}  # mistral3/model.go:53,56: EOT = eos, default 0
    with_eos = blob("mistral3", {"</s>": 2}, 131072, keys={"eos": 5})
    assert ids(with_eos, "0.6.5") == {5, 0}
    assert ids(with_eos, "0.7.0") == {5}
    llama4 = blob("llama4", {"<|eot|>": 200008}, 202048, keys={"eos": 200008})
    assert ids(llama4, "0.6.7") == {200008, 0}
    assert ids(llama4, "0.7.0") == {200008}
    listed = llama4._replace(eos_token_ids=(200007,))
    assert ids(listed, "0.7.0") == {200008}  # the list arrived in 0.7.1 (333e36042)
    assert ids(listed, "0.7.1") == {200008, 200007}


# --- the llama.cpp runner (0.6.0-0.24.0): the vendored llama.cpp's texts ---------------------


def test_runner_never_reads_eos_token_ids():
    g = blob("llama", {"<|im_end|>": 5, "x": 9}, 10, keys={"eos": 5}, eos_ids=(9,))
    assert ids(g, "0.24.0") == {5}
    assert ids(g, "0.30.0") == {5}  # nor does llama-server


def test_runner_text_lists_grow_with_the_vendored_llama_cpp():
    g = blob("llama", {"<s>": 1, "</s>": 2, "_<EOT>": 7, "<|return|>": 8}, 10, keys={"eos": 1})
    # llama-vocab.cpp:1899 at aee28501b (d7cfe1ffe): no "_<EOT>"; :1933 at 88738b357 (71e90e881)
    assert 7 not in ids(g, "0.6.5")
    assert 7 in ids(g, "0.6.6")
    # "<|return|>" joined at e54d41bef (0.11.5, llama-vocab.cpp:2285 at f804e8a46)
    assert 8 not in ids(g, "0.11.4")
    assert 8 in ids(g, "0.11.5")
    # "</s>" is EOG by text in the llama.cpp eosfix models for llama-server, never vendored
    assert 2 not in ids(g, "0.24.0")
    assert 2 in ids(g, "0.30.0")


def test_runner_harmony_end_removal():
    harmony = {"<|endoftext|>": 0, "<|return|>": 1, "<|call|>": 2, "<|end|>": 3}
    g = blob("llama", harmony, 5, keys={"eos": 0})
    assert 3 in ids(g, "0.11.4")  # no <|return|>/<|call|> on the list, no workaround yet
    assert ids(g, "0.11.5") == {0, 1, 2}  # llama-vocab.cpp:2355 at f804e8a46


def test_runner_eot_found_by_several_texts_is_uncertain():
    ds = "<\uff5cend\u2581of\u2581sentence\uff5c>"
    one = blob("llama", {ds: 4}, 6, keys={"eos": 5})
    # on the eot auto-detect list (llama-vocab.cpp:2174 at c28ddc0a7), not on the EOG list
    assert ids(one, "0.24.0") == {4, 5}
    two = blob("llama", {ds: 4, "<|im_end|>": 3}, 6, keys={"eos": 5})
    stops = gguf_stops(two, "0.24.0")
    assert stops.ids == {3, 5}
    assert stops.uncertain == {4}  # llama.cpp picks one of the two in hash-map order


# --- llama-server (0.30.0 on) and the compatibility layer --------------------------------------

LLAMA3 = {"<|end_of_text|>": 128001, "<|start_header_id|>": 128006, "<|eot_id|>": 128009}


def test_compat_llama3_rewrites_eos_and_eot():
    g = blob("llama", LLAMA3, 128256, pre="llama-bpe", keys={"eos": 128001})
    t = translate(g)  # llama-ollama-compat.cpp:1316-1355 at fb3076099
    assert t.rewrites == {
        "eos": 128009,
        "eot": 128009,
        "eos_token_ids": (128009,),
    }
    assert t.gguf.key("eos") == t.gguf.key("eot") == 128009
    # both texts are EOG by text: the rewrite changes no stop id
    assert ids(g, "0.30.0") == {128001, 128009}


def test_compat_llama3_keeps_an_eot_that_is_not_128001_and_needs_a_marker():
    g = blob("llama", LLAMA3, 128256, pre="llama-bpe", keys={"eos": 128001, "eot": 128008})
    assert translate(g).gguf.key("eot") == 128008
    assert translate(g).gguf.key("eos") == 128009
    fine = blob("llama", LLAMA3, 128256, pre="llama-bpe", keys={"eos": 128009})
    assert translate(fine).rewrites == {}  # pre set and eos not 128001: no gap detected
    no_marker = blob("llama", {"<|eot_id|>": 128009}, 128256, keys={"eos": 128001})
    assert translate(no_marker).rewrites == {}
    template = no_marker._replace(chat_template="{{ '<|eot_id|>' }}")
    assert translate(template).rewrites["pre"] == "llama-bpe"  # pre missing: set


GLM = {"<|endoftext|>": 154820, "<|user|>": 154827, "<|observation|>": 154828}


def test_compat_glm4moelite_takes_eot_and_eom_from_the_list():
    g = blob("glm4moelite", GLM, 154880, keys={"eos": 154820},
             eos_ids=(154820, 154827, 154828))  # fmt: skip
    # :91-119 fix_glm4moelite_eog_token_ids, called from handle_glm4moelite (:1753)
    assert ids(g, "0.30.0") == {154820, 154827, 154828}
    assert translate(g).gguf.architecture == "deepseek2"
    assert ids(g, "0.24.0") == {154820, 154827, 154828}  # Go engine (listed since 0.14.3)
    assert ids(g, "0.14.2") == {154820}  # llama.cpp runner: neither text is EOG
    negative = g._replace(eos_token_ids=(-1, 154820, 154828))
    assert translate(negative).gguf.key("eot") == 154828  # INT32: negatives dropped first
    uint = g._replace(eos_token_ids_type=UINT32)
    assert ids(uint, "0.30.0") == {154820, 154827, 154828}
    assert ids(uint, "0.24.0") == {154820}  # the Go engine reads INT32 lists only
    kept = blob("glm4moelite", GLM, 154880, keys={"eos": 154820, "eot": 154827},
                eos_ids=(154820, 154828, 154827))  # fmt: skip
    assert translate(kept).gguf.key("eot") == 154827  # an eot already there stays
    assert translate(kept).gguf.key("eom") == 154827  # eom = list[2]


def test_compat_gemma3n_cuts_the_vocabulary_and_adds_106_to_an_unread_list():
    tokens = {"<eos>": 1, "<end_of_turn>": 106, "<|im_end|>": 110}
    shapes = {"token_embd.weight": (2048, 112), "per_layer_token_embd.weight": (8960, 108)}
    g = blob("gemma3n", tokens, 112, keys={"eos": 1}, eos_ids=(1,), tensor_shapes=shapes)
    t = translate(g)  # :307-373
    assert t.rewrites["eos_token_ids"] == (1, 106)
    assert t.gguf.vocab.n_tokens == 108
    assert t.gguf.vocab.model == "llama"
    assert ids(g, "0.30.0") == {1, 106}  # 110 is cut off; 106 is EOG by text anyway
    same = g._replace(tensor_shapes={**shapes, "token_embd.weight": (2048, 108)})
    assert translate(same).rewrites == {}  # only when the two embeddings disagree
    unknown = g._replace(tensor_shapes=None)
    assert translate(unknown).notes
    assert translate(unknown).rewrites == {}


def test_compat_gemma4_turns_the_llama_tokenizer_into_gemma4():
    g = blob("gemma4", {"<pad>": 0, "<eos>": 1, "<turn|>": 106}, 262144, model="llama")
    assert 2 in end_of_generation(g.vocab).ids  # no eos key: the llama tokenizer's default 2
    # :1079-1087: "llama" -> "gemma4", a tokenizer without default ids
    assert translate(g).rewrites == {"model": "gemma4"}
    assert ids(g, "0.30.0") == {1, 106}  # "<eos>", "<turn|>" by text; 2 gone


def test_compat_leaves_other_architectures_alone():
    g = blob("qwen3", QWEN, 151936, keys={"eos": 151645}, eos_ids=(151645, 151643))
    assert translate(g).rewrites == {}
    assert gguf_stops(g, "0.30.0").engine == SERVER


# --- a folder through ollama create ------------------------------------------------------------


def inputs(gen: tuple[int, ...] | None, is_list: bool, eos: int | None = 151645) -> StopInputs:
    return StopInputs(
        tokenizer_eos_id=eos,
        tokenizer_eos_content="<|im_end|>" if eos is not None else None,
        generation_config_exists=gen is not None,
        generation_config_eos=gen,
        generation_config_eos_is_list=is_list,
        config_eos=None,
        config_eos_is_list=False,
        text_config_eos=None,
        vocab={"<|im_end|>": 151645, "<|endoftext|>": 151643, "#": 2},
    )


def test_converter_writes_a_list_only_from_a_json_list_and_only_beside_an_eos():
    # convert/tokenizer.go:190-203, convert.go:153-156 at fb3076099
    assert converted_gguf(inputs((151645, 2), True)).eos_token_ids == (151645, 2)
    assert converted_gguf(inputs((2,), False)).eos_token_ids is None
    assert converted_gguf(inputs((151645, 2), True, eos=None)).eos_token_ids is None
    assert converted_gguf(inputs((151645, 2), True)).key("eos") == 151645


def test_folder_stops_by_release():
    x = inputs((151645, 151643, 2), True)
    # llama-server: tokenizer eos + EOG texts; the list (and its '#') never read
    assert folder_stops(x) == {151645, 151643}
    assert folder_stops(x, "0.24.0", "qwen3") == {151645, 151643, 2}  # Go engine: the list
    assert folder_stops(x, "0.24.0", "qwen2") == {151645, 151643}  # runner: texts
    assert folder_stops(x, "0.24.0") == {151645, 151643}  # both engines stop on these
    assert folder_stops(inputs((2,), True), "0.24.0") == {151645}


def test_runtime_pins():
    x = inputs((151645, 151643, 2), True)
    assert parse_pins(["ollama==0.24.0"]) == {"ollama": "0.24.0"}
    assert stop_sets(x)["ollama"] == {151645, 151643}
    rule = describe("ollama").rule_for("0.7.1")
    assert rule.since == "0.7.1"
    assert rule.until == "0.11.5"
    assert describe("ollama").rule_for("0.30.0").since == "0.30.0"
    with pytest.raises(ValueError, match=r"0\.6\.0"):
        parse_pins(["ollama==0.5.0"])


# --- @huggingface/ollama-utils: the stop strings the Hub gives hf.co pulls -------------------

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CUSTOM_TEMPLATE = (
    "{% for m in messages %}{{ '<<' + m['role'] + '>>' + m['content'] + eos_token }}{% endfor %}"
)


def convert(template: str) -> dict:
    """``convertGGUFTemplateToOllama``'s answer for a GGUF with ``template`` (the package pinned
    in tests/conformance/ollama_hub, run through ``tests.conformance.hubjs``)."""
    why = hubjs.missing()
    if why is not None:
        unavailable(why, requirement="node")
    gguf = {"chat_template": template, "bos_token": "<s>", "eos_token": "</s>"}
    (r,) = hubjs.ask({"convert": [gguf]})["convert"]
    return {"model": r["model"], "stop": r["ollama"].get("params", {}).get("stop"),
            "template": r["ollama"]["template"]}  # fmt: skip


def test_ollama_utils_stop_strings():
    chatml = convert(CHATML_TEMPLATE)
    assert chatml["stop"] == ["<|im_start|>", "<|im_end|>"]
    # src/chat-template.ts: a template is matched on its first 128 characters, in the order of
    # chat-template-automap.ts, where dolphin-llama3 (Llama 3's template, ChatML prompts) comes
    # before llama3: a Llama 3 template gets ChatML stop strings and a ChatML Go template
    llama3 = convert(LLAMA3_TEMPLATE)
    assert llama3["model"] == "library/dolphin-llama3:8b"
    assert llama3["stop"] == ["<|im_start|>", "<|im_end|>"]
    assert "<|im_start|>" in llama3["template"]
    # no entry, no custom rule: every special-looking token of the converted Go template, then
    # the user turn's opening text
    custom = convert(CUSTOM_TEMPLATE)
    assert custom["model"] == "auto-conversion"
    assert custom["stop"] == ["<system>", "<user>", "<assistant>", "<<user>>"]
