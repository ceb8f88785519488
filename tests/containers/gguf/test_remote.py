"""A GGUF header read by byte ranges (eosfix.containers.gguf.remote) is the header the local
reader reads, in at most three reads of about its key/value section, with the same bounds
against hostile headers; quantisations of one model share their token arrays and are
compared on their stop fields."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from eosfix.containers.gguf import remote
from eosfix.containers.gguf.read import (
    KnownFields,
    load_gguf,
    model_from_header,
    read_header,
)
from eosfix.containers.gguf.remote import (
    differences,
    group_alike,
    read_remote_header,
    stop_fields,
)
from eosfix.core.errors import RepoLoadError
from tests.support.ggufs import (
    BASE,
    chatml,
    chatml_pairs,
    command_r,
    glm,
    harmony,
    kv,
    raw_gguf,
    write_gguf,
)


class Ranges:
    """A file in memory read by ranges, counting reads; ``pad`` zeros stand for tensor data."""

    def __init__(self, data: bytes, pad: int = 0) -> None:
        self.data, self.pad = data, pad
        self.size: int | None = None
        self.reads: list[tuple[int, int]] = []

    def read_into(self, buf: bytearray, end: int) -> None:
        start = len(buf)
        self.size = len(self.data) + self.pad
        self.reads.append((start, end))
        end = min(end, self.size)
        buf += self.data[start:end] + bytes(max(0, end - max(start, len(self.data))))

    @property
    def fetched(self) -> int:
        return max(b for _, b in self.reads) if self.reads else 0


def _values(header):
    return {k: (f.type, f.item_type, f.value, f.start, f.end) for k, f in header.fields.items()}


@pytest.mark.parametrize("make", [chatml, glm, command_r], ids=["chatml", "glm", "command-r"])
def test_remote_header_is_the_local_one(tmp_path, make):
    path = make(tmp_path / "m.gguf", tensor=bytes(range(256)) * 16)
    local = read_header(path)
    source = Ranges(path.read_bytes(), pad=1 << 30)
    header = read_remote_header("org/repo/m.gguf", source)
    assert _values(header) == _values(local)
    assert (header.kv_end, header.n_tensors, header.file_size) == (
        local.kv_end,
        local.n_tensors,
        local.file_size + (1 << 30),
    )
    assert len(source.reads) == 1  # a small vocabulary: one read
    model = model_from_header(header)
    assert model.repo.templates == load_gguf(path).repo.templates
    assert model.vocab.text_ids == load_gguf(path).vocab.text_ids
    assert model.tensor_shapes is None  # tensor infos are never read


@pytest.mark.package_index  # the vocabularies come from the llama-cpp-python sdist
def test_every_shipped_vocabulary_in_at_most_three_reads(ggml_vocab_files):
    """Real key/value sections of 0.6-15.8 MB: at most 3 reads, ending at most 5% past the
    section (a one-read file may end up to the first read's size past it)."""
    for path in ggml_vocab_files:
        data = path.read_bytes()
        local = read_header(path)
        source = Ranges(data, pad=1 << 30)
        header = read_remote_header(path.name, source)
        assert _values(header) == _values(local), path.name
        assert len(source.reads) <= 3, (path.name, source.reads)
        over = source.fetched - local.kv_end
        assert over >= 0, path.name
        if len(source.reads) > 1:
            assert over <= 0.05 * local.kv_end, (path.name, over)
        else:
            assert source.fetched == remote.FIRST_READ


def test_known_fields_never_cost_a_vocabulary_a_read(ggml_vocab_files):
    """With every shipped vocabulary's fields known (other models', and its own as another
    file of the same tokenizer holds them), each is read in no more reads than alone: a known
    field is fetched with the rest of its header's section, and another model's is passed over
    on the bytes at hand (the files a repo's threads read meanwhile never add a request)."""
    known = KnownFields(per_key=32, max_fields=1024, max_bytes=1 << 30)
    for path in ggml_vocab_files:
        known.learn(read_header(path), path.read_bytes())
    for path in ggml_vocab_files:
        data = path.read_bytes()
        alone = Ranges(data, pad=1 << 30)
        read_remote_header(path.name, alone)
        source = Ranges(data, pad=1 << 30)
        header = read_remote_header(path.name, source, known=known)
        assert _values(header) == _values(read_header(path)), path.name
        assert len(source.reads) <= len(alone.reads), (path.name, alone.reads, source.reads)
    assert known.reused > 0


def test_a_quantisation_of_the_same_model_is_one_read_and_shares_its_arrays(tmp_path):
    a = command_r(tmp_path / "a.gguf", kv={"general.file_type": 15})
    b = command_r(tmp_path / "b.gguf", kv={"general.file_type": 7})
    known = KnownFields()
    known.MIN_BYTES = 64  # the test's vocabulary is small
    first = read_remote_header("org/r/a.gguf", Ranges(a.read_bytes(), 1 << 20), known=known)
    source = Ranges(b.read_bytes(), 1 << 20)
    second = read_remote_header("org/r/b.gguf", source, known=known, hint=first)
    assert len(source.reads) == 1
    assert source.fetched == first.kv_end + remote.HINT_SLACK
    assert known.reused >= 2  # the token list and the token types
    tokens = "tokenizer.ggml.tokens"
    assert second.fields[tokens].value is first.fields[tokens].value
    assert _values(second) == _values(read_header(b))
    assert stop_fields(first) == stop_fields(second)


def test_known_fields_are_taken_only_where_the_bytes_are_the_same(tmp_path):
    a = write_gguf(tmp_path / "a.gguf", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    b = write_gguf(tmp_path / "b.gguf", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                   control=False)  # fmt: skip
    known = KnownFields()
    known.MIN_BYTES = 64
    read_remote_header("a", Ranges(a.read_bytes()), known=known)
    second = read_remote_header("b", Ranges(b.read_bytes()), known=known)
    types = "tokenizer.ggml.token_type"
    assert second.fields[types].value == read_header(b).fields[types].value
    assert second.fields[types].value[-1] == 4  # user-defined, not the first file's 3


def test_a_hostile_count_is_refused_before_anything_more_is_fetched():
    count = 1 << 40
    tokens = kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, count))
    data = raw_gguf(chatml_pairs(**{"tokenizer.ggml.tokens": tokens}))
    source = Ranges(data, pad=100 << 30)  # claims a 100 GB file
    with pytest.raises(RepoLoadError) as err:
        read_remote_header("org/repo/evil.gguf", source)
    assert str(err.value).startswith("org/repo/evil.gguf: ")
    assert "GGUF header larger than" in str(err.value) or "array claims" in str(err.value)
    assert source.reads == [(0, remote.FIRST_READ)]


def test_a_string_longer_than_the_limit_is_refused_without_fetching_it():
    huge = kv("tokenizer.chat_template", 8, struct.pack("<Q", 64 << 20))
    data = raw_gguf(chatml_pairs(**{"tokenizer.chat_template": huge}))
    source = Ranges(data, pad=1 << 30)
    with pytest.raises(RepoLoadError, match="limit"):
        read_remote_header("org/repo/t.gguf", source)
    assert source.fetched <= remote.FIRST_READ


def test_a_header_cut_short_is_one_line_naming_the_file(tmp_path):
    data = chatml(tmp_path / "m.gguf").read_bytes()
    cut = data[: read_header(tmp_path / "m.gguf").kv_end - 40]
    with pytest.raises(RepoLoadError) as err:
        read_remote_header("org/repo/m.gguf", Ranges(cut))
    text = str(err.value)
    assert text.startswith("org/repo/m.gguf: truncated GGUF header")
    assert "\n" not in text


def test_not_a_gguf_and_an_empty_file_are_named():
    with pytest.raises(RepoLoadError, match="not a GGUF file"):
        read_remote_header("org/r/x.gguf", Ranges(b"<html>not found</html>"))
    with pytest.raises(RepoLoadError, match="not a GGUF file"):
        read_remote_header("org/r/x.gguf", Ranges(b""))


def test_quantisations_are_grouped_by_their_stop_fields(tmp_path):
    ids = {"bos": "<BOS_TOKEN>", "eos": "<EOS_TOKEN>"}
    same = [command_r(tmp_path / f"q{n}.gguf", kv={"general.file_type": n}) for n in (2, 7, 15)]
    older = write_gguf(tmp_path / "old.gguf", ["<PAD>", "<BOS_TOKEN>", "<EOS_TOKEN>",
                       "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
                       "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>"],
                       template="{{ messages[0]['content'] }}", ids=ids)  # fmt: skip
    files = [(p.name, read_header(p)) for p in (older, *same)]
    groups = group_alike(files)
    assert [g.names for g in groups] == [("q2.gguf", "q7.gguf", "q15.gguf"), ("old.gguf",)]
    assert differences(groups[0].fields, groups[1].fields) == ("tokenizer.chat_template",)


def test_the_harmony_file_reads_whole_through_ranges(tmp_path):
    path = harmony(tmp_path / "h.gguf", {"eos": "<|return|>"})
    header = read_remote_header("h", Ranges(path.read_bytes(), 1 << 24))
    assert header.value("tokenizer.chat_template") == read_header(path).value(
        "tokenizer.chat_template"
    )
    assert len(BASE) < len(header.value("tokenizer.ggml.tokens"))


def test_first_read_keeps_small_files_to_one_request(tmp_path):
    path = chatml(tmp_path / "s.gguf")
    source = Ranges(Path(path).read_bytes())
    read_remote_header("s", source)
    assert source.reads == [(0, remote.FIRST_READ)]


def test_a_known_field_costs_no_read_where_the_bytes_at_hand_differ(tmp_path, monkeypatch):
    """A field known from another model is compared on the bytes already fetched before more
    are asked for: a file of another vocabulary reads what it would have read anyway."""
    monkeypatch.setattr(remote, "FIRST_READ", 200)  # the first read ends inside the tokens
    normal = [f"tok{i}" for i in range(400)]
    a = write_gguf(tmp_path / "a.gguf", ["<|im_end|>"], normal=normal)
    b = write_gguf(tmp_path / "b.gguf", ["<|im_end|>"], normal=[f"other{i}" for i in range(40)])
    alone = Ranges(b.read_bytes())
    read_remote_header("b", alone)
    known = KnownFields()
    known.MIN_BYTES = 64
    read_remote_header("a", Ranges(a.read_bytes()), known=known)
    source = Ranges(b.read_bytes())
    read_remote_header("b", source, known=known)
    assert source.reads == alone.reads
    assert known.reused == 0
