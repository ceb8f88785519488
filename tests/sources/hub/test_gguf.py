"""Which files of a Hub repo are GGUF models, their quant labels, and which file llama.cpp's
``-hf`` and ollama's ``hf.co/...`` pick (eosfix.sources.hub.gguf)."""

from __future__ import annotations

import pytest

from eosfix.sources.hub.gguf import (
    is_model_file,
    llama_cpp_pick,
    model_files,
    ollama_pick,
    quant_label,
    shards,
    split_of,
)

REPO = [
    "README.md",
    "Chat-7B-IQ3_M.gguf",
    "Chat-7B-Q2_K.gguf",
    "Chat-7B-Q4_K_M.gguf",
    "Chat-7B-Q8_0.gguf",
    "Chat-7B-f16-00001-of-00002.gguf",
    "Chat-7B-f16-00002-of-00002.gguf",
    "mmproj-Chat-7B-f16.gguf",
    "Chat-7B.imatrix.gguf",
    "params",
]


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Mistral-Small-3.1-D_AU-IQ3_S-imat.gguf", "IQ3_S"),
        ("x-Q4_K_M-00001-of-00003.gguf", "Q4_K_M"),
        ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
        ("model-q4_k_m.gguf", "Q4_K_M"),
        ("model-Q4_0_4_4.gguf", "Q4_0"),  # Q4_0 comes first in the alternation
        ("model-f16.gguf", "F16"),
        ("model.gguf", None),
    ],
)
def test_quant_labels_as_the_hub_parses_them(name, label):
    assert quant_label(name) == label


def test_model_files_leave_out_projectors_imatrices_and_later_shards():
    assert model_files(REPO) == (
        "Chat-7B-IQ3_M.gguf",
        "Chat-7B-Q2_K.gguf",
        "Chat-7B-Q4_K_M.gguf",
        "Chat-7B-Q8_0.gguf",
        "Chat-7B-f16-00001-of-00002.gguf",
    )
    assert not is_model_file("mmproj-x.gguf")
    assert not is_model_file("draft/mtp-x.gguf")
    assert is_model_file("sub/x-Q8_0.gguf")


def test_an_orphan_shard_stands_for_its_split():
    names = ["m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]
    assert model_files(names) == ("m-00002-of-00003.gguf",)


def test_shards_are_named_as_llama_cpp_names_them():
    assert split_of("dir/m-00002-of-00003.gguf").no == 2
    assert shards("dir/m-00001-of-00003.gguf", 3) == (
        "dir/m-00001-of-00003.gguf",
        "dir/m-00002-of-00003.gguf",
        "dir/m-00003-of-00003.gguf",
    )


def test_llama_cpp_picks_q4_k_m_then_q8_0_then_the_first_model():
    assert llama_cpp_pick(REPO) == "Chat-7B-Q4_K_M.gguf"
    assert llama_cpp_pick([n for n in REPO if "Q4_K_M" not in n]) == "Chat-7B-Q8_0.gguf"
    assert llama_cpp_pick(["b-Q2_K.gguf", "a-IQ3_M.gguf"]) == "b-Q2_K.gguf"  # listing order
    assert llama_cpp_pick(REPO, "q2_k") == "Chat-7B-Q2_K.gguf"
    assert llama_cpp_pick(REPO, "F16") == "Chat-7B-f16-00001-of-00002.gguf"
    assert llama_cpp_pick(REPO, "Q6_K") is None


def test_ollama_picks_by_quant_label_or_file_name():
    assert ollama_pick(REPO) == "Chat-7B-Q4_K_M.gguf"
    assert ollama_pick(REPO, "latest") == "Chat-7B-Q4_K_M.gguf"
    assert ollama_pick(REPO, "iq3_m") == "Chat-7B-IQ3_M.gguf"
    assert ollama_pick(REPO, "Chat-7B-Q8_0.gguf") == "Chat-7B-Q8_0.gguf"
    assert ollama_pick(REPO, "Q6_K") is None
    assert ollama_pick(["a-Q8_0.gguf"]) is None  # no Q4_K_M: the Hub's choice is not documented


def test_the_quantisations_of_one_model_share_a_stem():
    from eosfix.sources.hub.gguf import model_stem

    assert model_stem("Chat-7B-Q4_K_M.gguf") == model_stem("chat-7b-q8_0.gguf")
    assert model_stem("Chat-7B-Q4_K_M-00001-of-00002.gguf") == model_stem("Chat-7B-Q2_K.gguf")
    assert model_stem("Chat-7B-Q4_K_M.gguf") != model_stem("Other-7B-Q4_K_M.gguf")
