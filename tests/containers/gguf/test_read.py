"""The GGUF header reader: what it reads, and every hostile header as one bounded error."""

from __future__ import annotations

import struct
import time
import tracemalloc
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosfix import api
from eosfix.cli import main
from eosfix.containers.gguf.read import (
    MAX_HEADER_BYTES,
    first_shard,
    iter_gguf_files,
    load_gguf,
    read_header,
)
from eosfix.core.errors import RepoLoadError
from tests.support.ggufs import (
    BASE,
    CHATML,
    chatml,
    chatml_pairs,
    glm,
    i32_array_kv,
    kv,
    raw_gguf,
    s,
    str_array_kv,
    str_kv,
    u32_kv,
    write_gguf,
)
from tests.support.realmodel import require_smollm2_gguf


def test_reads_what_the_gguf_writer_wrote(tmp_path):
    path = write_gguf(
        tmp_path / "m.gguf",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"],
        template=CHATML,
        named={"tool_use": CHATML + "{# tools #}"},
        ids={"eos": "<|endoftext|>", "bos": "<|im_start|>"},
        tensor=bytes(range(128)) * 4,
    )
    model = load_gguf(path)
    repo = model.repo
    assert [(t.name, t.file) for t in repo.templates] == [
        ("default", "tokenizer.chat_template"),
        ("tool_use", "tokenizer.chat_template.tool_use"),
    ]
    assert repo.special_tokens == {"bos_token": "<|im_start|>", "eos_token": "<|endoftext|>"}
    n = len(BASE)
    assert repo.added_tokens["<|im_end|>"].id == n + 2
    assert repo.added_tokens["<|im_end|>"].special is True
    assert "a" not in repo.added_tokens  # ordinary tokens come from the token table
    assert repo.resolve("a").id == BASE.index("a")
    assert repo.resolve("a").source == "tokenizer.ggml.tokens"
    assert model.specials.get("eos") == n
    assert model.vocab.key_ids == {"eos": n, "bos": n + 1}  # by slot
    assert model.header.n_tensors == 1


def test_user_defined_tokens_are_added_but_not_special(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", ["<|x|>"], template=CHATML, control=False)
    info = load_gguf(path).repo.added_tokens["<|x|>"]
    assert (info.special, info.id) == (False, len(BASE))


def test_header_only_matches_gguf_readers_full_load():
    gguf = pytest.importorskip("gguf")
    path = require_smollm2_gguf()
    header = read_header(path)
    full = gguf.GGUFReader(path)
    assert set(header.fields) == {k for k in full.fields if not k.startswith("GGUF.")}
    for key, f in header.fields.items():
        if f.value is None:  # skipped arrays (merges): same length as gguf's
            assert f.item_type is not None
            continue
        value = list(f.value) if isinstance(f.value, array) else f.value
        assert value == full.fields[key].contents(), key
    assert header.n_tensors == len(full.tensors)


def test_v2_is_read_like_v3(tmp_path):
    v3 = raw_gguf(chatml_pairs())
    (tmp_path / "v2.gguf").write_bytes(raw_gguf(chatml_pairs(), version=2))
    (tmp_path / "v3.gguf").write_bytes(v3)
    a, b = load_gguf(tmp_path / "v2.gguf"), load_gguf(tmp_path / "v3.gguf")
    assert a.header.version == 2
    assert a.repo.templates == b.repo.templates
    assert a.vocab.text_ids == b.vocab.text_ids


HOSTILE = {
    "wrong magic": (raw_gguf(chatml_pairs(), magic=b"GGML"), "not a GGUF file"),
    "v1": (raw_gguf(chatml_pairs(), version=1), "GGUF v1 is not supported"),
    "v4": (raw_gguf(chatml_pairs(), version=4), "unsupported GGUF version 4"),
    "big-endian": (raw_gguf(chatml_pairs(), version=3 << 24), "big-endian"),
    "truncated": (raw_gguf(chatml_pairs())[:-40], "truncated GGUF header"),
    "truncated array": (raw_gguf(chatml_pairs())[:700], "array claims 99 items, more than"),
    "2^60 keys": (raw_gguf([], n_kv=1 << 60), "claims 1152921504606846976 key/value pairs"),
    "2^40-byte string": (
        raw_gguf([struct.pack("<Q", 1 << 40) + b"k" + bytes(64)]),
        "key 0 is 1099511627776 bytes long",
    ),
    "2^40-byte value": (
        raw_gguf([s("general.name") + struct.pack("<IQ", 8, 1 << 40)]),
        "general.name needs 1099511627776 bytes",
    ),
    "2^60-item array": (
        raw_gguf([s("x") + struct.pack("<IIQ", 9, 4, 1 << 60)]),
        "x: array claims 1152921504606846976 items",
    ),
    "nested array": (raw_gguf([s("x") + struct.pack("<IIQ", 9, 9, 1)]), "nested arrays"),
    "unknown type": (
        raw_gguf([s("x") + struct.pack("<I", 77) + bytes(64)]),
        "x: unknown GGUF value type 77",
    ),
    "duplicate key": (raw_gguf([u32_kv("a", 1), u32_kv("a", 2)]), "duplicate key 'a'"),
    "empty key": (raw_gguf([u32_kv("", 1)]), "key 0 is empty"),
    "eos as INT32": (
        raw_gguf(
            chatml_pairs(
                **{
                    "tokenizer.ggml.eos_token_id": kv(
                        "tokenizer.ggml.eos_token_id", 5, struct.pack("<i", 3)
                    )
                }
            )
        ),
        "tokenizer.ggml.eos_token_id has type INT32, llama.cpp needs UINT32",
    ),
    "tokens as INT32 array": (
        raw_gguf(
            chatml_pairs(**{"tokenizer.ggml.tokens": i32_array_kv("tokenizer.ggml.tokens", [1, 2])})
        ),
        "tokenizer.ggml.tokens has type ARRAY of INT32, llama.cpp needs ARRAY of STRING",
    ),
    "token types as strings": (
        raw_gguf(
            chatml_pairs(
                **{"tokenizer.ggml.token_type": str_array_kv("tokenizer.ggml.token_type", ["3"])}
            )
        ),
        "tokenizer.ggml.token_type has type ARRAY of STRING, llama.cpp needs ARRAY of INT32",
    ),
    "too few token types": (
        raw_gguf(
            chatml_pairs(
                **{"tokenizer.ggml.token_type": i32_array_kv("tokenizer.ggml.token_type", [1])}
            )
        ),
        "tokenizer.ggml.token_type has 1 entries for 99 tokens",
    ),
    "template as UINT32": (
        raw_gguf(chatml_pairs(**{"tokenizer.chat_template": u32_kv("tokenizer.chat_template", 7)})),
        "tokenizer.chat_template has type UINT32, llama.cpp needs STRING",
    ),
    "template not UTF-8": (
        raw_gguf(
            chatml_pairs(
                **{"tokenizer.chat_template": kv("tokenizer.chat_template", 8, s(b"\xff\xfe"))}
            )
        ),
        "tokenizer.chat_template: not valid UTF-8",
    ),
    "duplicate token text": (
        raw_gguf(
            chatml_pairs(
                **{
                    "tokenizer.ggml.tokens": str_array_kv(
                        "tokenizer.ggml.tokens",
                        [*BASE[:-1], "a", "<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                    )
                }
            )
        ),
        "'a' is both token 64 and 95 (llama.cpp aborts on duplicate token texts)",
    ),
    "no vocabulary": (
        raw_gguf(chatml_pairs(**{"tokenizer.ggml.tokens": b"", "tokenizer.ggml.token_type": b""})),
        "no tokenizer.ggml.tokens",
    ),
    "no tokenizer model": (
        raw_gguf(chatml_pairs(**{"tokenizer.ggml.model": b""})),
        "no tokenizer.ggml.model",
    ),
    "empty file": (b"", "empty file"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_header_is_one_bounded_error_and_nothing_written(tmp_path, name, capsys):
    data, expected = HOSTILE[name]
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    tracemalloc.start()
    start = time.process_time()  # CPU time: what the header costs, whatever the machine's load
    with pytest.raises(RepoLoadError) as info:
        load_gguf(path)
    elapsed = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert expected in str(info.value)
    assert str(info.value).startswith(f"{path}: ")
    assert elapsed < 2
    assert peak < 32 * 1024 * 1024
    assert main(["fix", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert expected in err
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]


def test_header_larger_than_the_limit_is_refused_quickly(tmp_path):
    # Valid shape, but one string value bigger than any real header: refused, not walked.
    big = MAX_HEADER_BYTES + 10
    path = tmp_path / "big.gguf"
    with open(path, "wb") as fh:
        fh.write(raw_gguf([s("general.name") + struct.pack("<IQ", 8, big)]))
        fh.truncate(big + 100)  # sparse: the bytes "exist"
    start = time.process_time()  # CPU time, as above
    with pytest.raises(RepoLoadError, match="header larger than"):
        load_gguf(path)
    assert time.process_time() - start < 2


def test_template_that_is_not_jinja_is_an_error_naming_file_and_key(tmp_path, capsys):
    path = tmp_path / "m.gguf"
    path.write_bytes(
        raw_gguf(
            chatml_pairs(
                **{
                    "tokenizer.chat_template": str_kv(
                        "tokenizer.chat_template", "{% for m in messages %}{{ m.content }"
                    )
                }
            )
        )
    )
    result = api.check(path)
    assert result.error is not None
    assert str(result.error).startswith(f"{path}/tokenizer.chat_template: ")
    before = path.read_bytes()
    assert main(["fix", str(path)]) == 2
    assert path.read_bytes() == before
    assert capsys.readouterr().err.count("\n") == 1


def test_split_files_are_read_from_the_first_shard(tmp_path):
    first = chatml(tmp_path / "m-00001-of-00002.gguf")
    second = tmp_path / "m-00002-of-00002.gguf"
    second.write_bytes(raw_gguf([u32_kv("split.no", 1)]))
    assert first_shard(second) == first
    assert load_gguf(second).path == first
    assert list(iter_gguf_files(tmp_path)) == [first]
    orphan = tmp_path / "x-00002-of-00003.gguf"
    orphan.write_bytes(b"")
    with pytest.raises(RepoLoadError, match=r"its metadata is in x-00001-of-00003\.gguf"):
        load_gguf(orphan)


def test_folder_of_ggufs_and_nested_model_folders(tmp_path):
    chatml(tmp_path / "a" / "chatml.gguf") if (tmp_path / "a").mkdir() is None else None
    (tmp_path / "b" / "c").mkdir(parents=True)
    glm(tmp_path / "b" / "c" / "glm.gguf")
    found = [p.relative_to(tmp_path).as_posix() for p in iter_gguf_files(tmp_path)]
    assert found == ["a/chatml.gguf", "b/c/glm.gguf"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(0, 4000),
)
def test_corrupted_headers_fail_cleanly(tmp_path, edits, cut):
    """Any byte-level corruption: a clean check or one error naming the file, never a crash."""
    data = bytearray(raw_gguf(chatml_pairs()))
    for at, value in edits:
        data[at % len(data)] = value
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(bytes(data[: max(cut, 24)]))
    result = api.check(path)
    if result.error is not None:
        assert str(result.error).startswith(str(path))
