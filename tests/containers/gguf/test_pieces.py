"""A GGUF's ids read as text, piece by piece, as llama.cpp writes them (its own pieces are
compared on every shipped vocabulary in tests/runtimes/test_llamacpp_real.py)."""

from __future__ import annotations

from eosfix.containers.gguf.format import BYTE, CONTROL, NORMAL, USER_DEFINED
from eosfix.containers.gguf.pieces import piece
from eosfix.containers.gguf.read import load_gguf
from tests.support.ggufs import BASE, write_gguf


def test_sentencepiece_pieces_turn_the_space_mark_and_byte_tokens_into_text():
    assert piece("llama", "\u2581Paris", NORMAL) == b" Paris"
    assert piece("llama", "<0x0A>", BYTE) == b"\n"
    assert piece("llama", "<|im_end|>", CONTROL) == b"<|im_end|>"
    assert piece("llama", "\u2581x", 5) == b""  # unused


def test_byte_level_pieces_read_through_the_byte_alphabet():
    assert piece("gpt2", "\u0120Paris", NORMAL) == b" Paris"
    assert piece("gpt2", "\u010a", NORMAL) == b"\n"
    assert piece("gpt2", "\u00c3\u00a9", NORMAL) == "é".encode()
    assert piece("gpt2", "\u0120<tool>", USER_DEFINED) == "\u0120<tool>".encode()
    # outside the alphabet: llama.cpp's mark, the character's UTF-8 in hex, the token's text
    assert piece("gpt2", "\u200d", NORMAL) == b"[UNK_BYTE_0xe2808d\xe2\x80\x8d]"


def test_a_gguf_decodes_a_reply_and_says_none_for_a_vocabulary_it_does_not_read(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", ["<|im_end|>"], normal=["\u0120Paris"])
    vocab = load_gguf(path).repo.vocabulary
    assert vocab is not None
    paris, end = len(BASE), len(BASE) + 1
    assert (
        vocab.decode([BASE.index("A"), paris, BASE.index("\u010a"), end]) == "A Paris\n<|im_end|>"
    )
    other = write_gguf(tmp_path / "t5.gguf", ["<|im_end|>"], model="t5")
    vocab = load_gguf(other).repo.vocabulary
    assert vocab is not None
    assert vocab.decode([0]) is None
