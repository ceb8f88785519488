"""A GGUF's token list held as its bytes (``Strings``) and llama.cpp's text -> id over it
(``TokenIds``): the same answers as a list of str and the dict llama.cpp builds, in memory
proportional to the header's bytes."""

from __future__ import annotations

import gc
import struct
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from eosfix.containers.gguf.pieces import GgufTokens
from eosfix.containers.gguf.read import model_from_header, read_header
from eosfix.containers.gguf.remote import read_remote_header
from eosfix.containers.gguf.tokens import TokenIds
from eosfix.runtimes.llamacpp import GgufVocab
from tests.support.ggufs import BASE, Bytes, big_vocab_header, chatml_pairs, kv, raw_gguf

TOKENS = "tokenizer.ggml.tokens"


def token_list(raws: list[bytes]) -> bytes:
    """A ChatML GGUF whose token list is ``raws`` (bytes, as a file may hold them)."""
    items = b"".join(struct.pack("<Q", len(r)) + r for r in raws)
    return raw_gguf(
        chatml_pairs(**{TOKENS: kv(TOKENS, 9, struct.pack("<IQ", 8, len(raws)) + items)})
    )


def as_llama_cpp(texts: list[str]) -> dict[str, int]:
    """llama.cpp's token_to_id, as eosfix built it before: an empty text is [EMPTY_<id>]."""
    return {(t or f"[EMPTY_{i}]"): i for i, t in enumerate(texts)}


def strings_of(raws: list[bytes]):
    return read_remote_header("x.gguf", Bytes(token_list(raws))).value(TOKENS)


texts = st.lists(
    st.one_of(
        st.binary(max_size=12),  # undecodable bytes too: kept by surrogateescape
        st.sampled_from([b"", b"<|im_end|>", b"[EMPTY_0]", b"[EMPTY_3]", "\u0120a".encode()]),
    ),
    max_size=60,
)


@given(texts)
def test_the_token_list_reads_as_its_texts_and_finds_ids_as_llama_cpp(raws):
    tokens = strings_of(raws)
    decoded = [r.decode("utf-8", "surrogateescape") for r in raws]
    assert list(tokens) == decoded
    assert [tokens[i] for i in range(-len(raws), len(raws))] == decoded + decoded
    ids = tokens.ids()
    expected = as_llama_cpp(decoded)
    if len(expected) < len(decoded):  # a text twice: the first pair, as llama.cpp's abort
        seen: dict[str, int] = {}
        for i, t in enumerate(t or f"[EMPTY_{i}]" for i, t in enumerate(decoded)):
            if t in seen:
                assert ids.duplicate == (seen[t], i)
                break
            seen[t] = i
        return
    assert ids.duplicate is None
    assert dict(ids.items()) == expected
    assert list(ids) == list(expected)
    for text, token_id in expected.items():
        assert ids.get(text) == token_id
        assert ids.text(token_id) == text
    for absent in ("", "\ud800", "<|absent|>", "[EMPTY_99]"):
        if absent not in expected:
            assert absent not in ids
            assert ids.get(absent) is None
    assert ids.text(len(raws)) is None
    assert ids.text(-1) is None


def test_a_table_of_colliding_hashes_still_finds_every_text(monkeypatch):
    """Texts in one slot (the table's probing, and the tags beside the ids) are told apart by
    their bytes: every text of a list built with a hash that sends all to one slot is found."""
    raws = [f"t{i}".encode() for i in range(200)]
    tokens = strings_of(raws)
    monkeypatch.setattr("builtins.hash", lambda b: 1 << 40)  # one slot, one tag for all
    ids = TokenIds(tokens)
    assert ids.duplicate is None
    assert [ids.get(r.decode()) for r in raws] == list(range(200))
    assert ids.get("t200") is None


def test_the_vocabulary_of_a_model_answers_both_ways():
    header = read_remote_header("x.gguf", Bytes(token_list([*(t.encode() for t in BASE), b""])))
    vocab = model_from_header(header).repo.vocabulary
    assert isinstance(vocab, GgufTokens)
    assert vocab.token_to_id("a") == BASE.index("a")
    assert vocab.id_to_token(BASE.index("a")) == "a"
    assert vocab.id_to_token(len(BASE)) == f"[EMPTY_{len(BASE)}]"  # as llama.cpp names it
    assert vocab.id_to_token(len(BASE) + 1) is None


def test_an_ids_text_is_the_one_a_dict_over_the_list_gives():
    """The runtimes ask a GGUF's vocabulary for an id's text (ollama's Llama 3 check): the
    list answers directly what a scan of llama.cpp's text -> id dict would find."""
    texts = [*BASE, "", "<|eot_id|>"]
    header = read_remote_header("x.gguf", Bytes(token_list([t.encode() for t in texts])))
    vocab = model_from_header(header).vocab
    as_dict = GgufVocab.from_tokens(vocab.model, vocab.pre, texts, vocab.key_ids)
    for token_id in (-1, 0, BASE.index("a"), len(BASE), len(BASE) + 1, len(texts)):
        assert vocab.token_text(token_id) == as_dict.token_text(token_id), token_id
    assert vocab.token_text(len(BASE)) == f"[EMPTY_{len(BASE)}]"


def test_a_large_token_list_is_held_in_about_its_bytes(tmp_path):
    """A header of 100,000 tokens, its model built: what stays allocated, and the most that
    was, is within twice the header's size (a str and a dict entry a token took five times
    it), so a 4M-token header costs about its 108 MB, not 600."""
    path = tmp_path / "m.gguf"
    path.write_bytes(big_vocab_header(100_000))
    size = path.stat().st_size
    gc.collect()
    tracemalloc.start()
    try:
        model = model_from_header(read_header(path))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert model.vocab.text_ids.get("tok000000099999") == len(BASE) + 99_999
    assert held < 2 * size, (held, size)
    assert peak < 2 * size, (peak, size)
