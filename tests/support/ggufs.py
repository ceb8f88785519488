"""GGUF files written by the tests with the ``gguf`` package's writer (llama.cpp's gguf-py).

Each case is a small vocabulary laid out like the real model family, a chat template, and the
special-token keys a converter would write. Ids sit at the end of a block of ordinary byte
tokens so the files look like real vocabularies to llama.cpp (``vocab_only`` loads them).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
GLM = Path(__file__).parents[2] / "sample_repos/glm-next-turn-opener/chat_template.jinja"
COMMAND_R = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + "
    "message['content'] + '<|END_OF_TURN_TOKEN|>' }}"
    "{% elif message['role'] == 'system' %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + "
    "message['content'] + '<|END_OF_TURN_TOKEN|>' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' + "
    "message['content'] + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
)
# Byte-level BPE pieces for every printable ASCII character, newline and space.
BASE = [chr(c) for c in range(33, 127)] + ["\u010a", "\u0120"]


def write_gguf(
    path: Path,
    specials: Sequence[str],
    *,
    template: str | None = None,
    named: Mapping[str, str] | None = None,
    ids: Mapping[str, str | int] | None = None,
    control: bool = True,
    tensor: bytes = b"",
    model: str = "gpt2",
    normal: Sequence[str] = (),
    arch: str = "llama",
    eos_token_ids: Sequence[str] | None = None,
    eos_token_ids_type: str = "INT32",
    shards: int = 1,
    kv: Mapping[str, int | str] | None = None,
) -> Path:
    """A GGUF: byte tokens, ``normal`` text tokens, then ``specials``; ``ids`` maps a role
    (eos, eot...) to a token; ``arch`` is ``general.architecture``; ``eos_token_ids`` (tokens)
    is written as ollama's converter writes it, an array of ``eos_token_ids_type``; ``shards``
    > 1: split as llama.cpp's gguf-split does (``NAME-00001-of-0000N.gguf``..., one
    ``tensor`` each, ``split.count`` in every shard): the first shard's path is returned;
    ``kv``: more keys, written first (``general.file_type`` of a quantisation: an int is a
    u32)."""
    gguf = pytest.importorskip("gguf", reason="pip install 'eosfix[verify]' (the gguf package)")
    import numpy as np

    tokens = [*BASE, *normal, *specials]
    types = [1] * (len(BASE) + len(normal)) + [3 if control else 4] * len(specials)
    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=1 if shards > 1 else 0)
    for key, value in (kv or {}).items():
        w.add_uint32(key, value) if isinstance(value, int) else w.add_string(key, value)
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 a"])
    for role, token in (ids or {}).items():  # a token, or an id as it is (past the list...)
        getattr(w, f"add_{role}_token_id")(token if isinstance(token, int) else tokens.index(token))
    if eos_token_ids is not None:
        item = gguf.GGUFValueType[eos_token_ids_type]
        listed = [tokens.index(t) for t in eos_token_ids]
        w.add_key_value(
            "tokenizer.ggml.eos_token_ids", listed, gguf.GGUFValueType.ARRAY, sub_type=item
        )
    if template is not None:
        w.add_chat_template(template)
    for name, source in (named or {}).items():
        w.add_chat_template(
            [{"name": "default", "template": template or ""}, {"name": name, "template": source}]
        )
    for n in range(shards if shards > 1 else 1 if tensor else 0):
        name = "weights" if shards == 1 else f"weights.{n}"
        w.add_tensor(name, np.frombuffer(tensor or bytes(64), dtype=np.int8).copy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if shards > 1:
        return path.with_name(f"{path.stem}-00001-of-{shards:05d}.gguf")
    return path


def chatml(path: Path, **kw: object) -> Path:
    """The seed's case: ChatML turns, eos ``<|endoftext|>`` (unless ``ids`` says otherwise)."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    ids = kw.pop("ids", None) or {"eos": "<|endoftext|>"}
    return write_gguf(path, specials, template=CHATML, ids=ids, **kw)  # type: ignore[arg-type]


GLM_SPECIALS = [
    "<|endoftext|>",
    "[gMASK]",
    "<sop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
]


def glm(path: Path, ids: Mapping[str, str] | None = None, **kw: object) -> Path:
    """GLM-4: replies have no closing token; eot/eom unset unless ``ids`` says otherwise."""
    return write_gguf(
        path, GLM_SPECIALS, template=GLM.read_text(), ids=ids or {"eos": "<|endoftext|>"}, **kw
    )  # type: ignore[arg-type]


COMMAND_R_SPECIALS = [
    "<PAD>",
    "<BOS_TOKEN>",
    "<EOS_TOKEN>",
    "<|START_OF_TURN_TOKEN|>",
    "<|END_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
]


def command_r(path: Path, **kw: object) -> Path:
    """Command-R: turns end with ``<|END_OF_TURN_TOKEN|>``, outside llama.cpp's name list."""
    return write_gguf(
        path,
        COMMAND_R_SPECIALS,
        template=COMMAND_R,
        ids={"bos": "<BOS_TOKEN>", "eos": "<EOS_TOKEN>"},
        **kw,
    )  # type: ignore[arg-type]


# --- hand-built headers, for what the gguf writer refuses to write --------------------------


def s(text: str | bytes) -> bytes:
    """A GGUF string: u64 length + bytes."""
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def u32_kv(key: str, value: int) -> bytes:
    return kv(key, 4, struct.pack("<I", value))


def str_kv(key: str, value: str) -> bytes:
    return kv(key, 8, s(value))


def str_array_kv(key: str, items: Sequence[str]) -> bytes:
    return kv(key, 9, struct.pack("<IQ", 8, len(items)) + b"".join(s(i) for i in items))


def i32_array_kv(key: str, items: Sequence[int]) -> bytes:
    return kv(key, 9, struct.pack("<IQ", 5, len(items)) + struct.pack(f"<{len(items)}i", *items))


def raw_gguf(
    pairs: Sequence[bytes | bytearray],
    *,
    version: int = 3,
    n_kv: int | None = None,
    magic: bytes = b"GGUF",
) -> bytes:
    """A header with no tensors: magic, version, counts, then the given key/value pairs."""
    count = len(pairs) if n_kv is None else n_kv
    return b"".join([magic, struct.pack("<IQQ", version, 0, count), *pairs])


def chatml_pairs(**override: bytes | bytearray) -> list[bytes | bytearray]:
    """The key/values of a small ChatML GGUF; ``override`` replaces one by key name."""
    tokens = [*BASE, "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    pairs = {
        "general.architecture": str_kv("general.architecture", "llama"),
        "tokenizer.ggml.model": str_kv("tokenizer.ggml.model", "gpt2"),
        "tokenizer.ggml.tokens": str_array_kv("tokenizer.ggml.tokens", tokens),
        "tokenizer.ggml.token_type": i32_array_kv(
            "tokenizer.ggml.token_type", [1] * len(BASE) + [3, 3, 3]
        ),
        "tokenizer.ggml.eos_token_id": u32_kv("tokenizer.ggml.eos_token_id", len(BASE)),
        "tokenizer.chat_template": str_kv("tokenizer.chat_template", CHATML),
    }
    pairs.update(override)
    return [v for v in pairs.values() if v]


class Bytes:
    """A file in memory, read by ranges (``eosfix.containers.gguf.remote.ByteRanges``)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.size = data, len(data)

    def read_into(self, buf: bytearray, end: int) -> None:
        buf += self.data[len(buf) : end]


def big_vocab_header(tokens: int, extra_keys: int = 0) -> bytes:
    """A ChatML GGUF header with ``tokens`` more plain tokens (``tok000000000000``... a large
    vocabulary: 4M of them make a 108 MB header, within the reader's limits), the ChatML
    specials last, eos ``<|endoftext|>``; and ``extra_keys`` keys of 8 KB names, each holding
    a u32. Built a block of tokens at a time (a few seconds, little memory beside it)."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    n = len(BASE) + tokens + len(specials)
    # the token array's key/value, built in place (the items are most of the header)
    token_kv = bytearray(kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n)))
    token_kv += b"".join(s(t) for t in BASE)
    length, block = struct.pack("<Q", len(b"tok%012d" % 0)), 1 << 16
    for lo in range(0, tokens, block):
        token_kv += b"".join(length + b"tok%012d" % i for i in range(lo, min(tokens, lo + block)))
    token_kv += b"".join(s(t) for t in specials)
    types = struct.pack("<IQ", 5, n) + struct.pack("<i", 1) * (n - 3) + struct.pack("<3i", 3, 3, 3)
    pairs = chatml_pairs(**{
        "tokenizer.ggml.tokens": token_kv,
        "tokenizer.ggml.token_type": kv("tokenizer.ggml.token_type", 9, types),
        "tokenizer.ggml.eos_token_id": u32_kv("tokenizer.ggml.eos_token_id", n - 3),
    })  # fmt: skip
    odd = [u32_kv(f"odd.{i:06d}." + "k" * 8180, i) for i in range(extra_keys)]
    return raw_gguf([*pairs, *odd])


def field_values(header: Any, key: str) -> Any:
    """Any field's value, arrays included (the reader skips arrays eosfix does not need)."""
    from eosfix.containers.gguf.format import ValueType
    from eosfix.containers.gguf.read import _SCALAR

    f = header.fields[key]
    if f.value is not None or f.item_type is None:
        return f.value
    data = header.path.read_bytes()
    (count,) = struct.unpack_from("<Q", data, f.value_start - 8)
    if f.item_type is not ValueType.STRING:
        return list(struct.unpack_from(f"<{count}{_SCALAR[f.item_type][1]}", data, f.value_start))
    out, pos = [], f.value_start
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 8 : pos + 8 + n].decode("utf-8", "surrogateescape"))
        pos += 8 + n
    return out


def copy_with_templates(src: Path, dst: Path, templates: Mapping[str, str]) -> Path:
    """Copy a (vocab-only) GGUF with the gguf writer, setting its chat template(s)."""
    gguf = pytest.importorskip("gguf", reason="pip install 'eosfix[verify]' (the gguf package)")
    from eosfix.containers.gguf.read import read_header

    header = read_header(src)
    w = gguf.GGUFWriter(str(dst), header.value("general.architecture"))
    for key, f in header.fields.items():
        if key == "general.architecture" or key.startswith("tokenizer.chat_template"):
            continue
        vtype = gguf.GGUFValueType(int(f.type))
        sub = gguf.GGUFValueType(int(f.item_type)) if f.item_type is not None else None
        w.add_key_value(key, field_values(header, key), vtype, sub_type=sub)
    named = [{"name": n, "template": t} for n, t in templates.items()]
    w.add_chat_template(named if len(named) > 1 else named[0]["template"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


# A template with a reasoning message: <|think_end|> is written inside the turn (between the
# reasoning and the answer), <|turn_end|> after every reply. Neither text is one llama.cpp
# stops on by name.
REASONING = (
    "{% for m in messages %}<|turn|>{{ m.role }}\n{% if m.reasoning_content %}"
    "{{ m.reasoning_content }}<|think_end|>{% endif %}{{ m.content }}<|turn_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn|>assistant\n{% endif %}"
)
REASONING_SPECIALS = ["<|endoftext|>", "<|turn|>", "<|think_end|>", "<|turn_end|>"]
HARMONY = Path(__file__).parents[2] / "sample_repos/reasoning-channel/chat_template.jinja"
HARMONY_SPECIALS = [
    "<|startoftext|>",
    "<|endoftext|>",
    "<|return|>",
    "<|channel|>",
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|call|>",
]


def reasoning(path: Path, ids: Mapping[str, str], **kw: object) -> Path:
    """The REASONING template, with ``ids`` (role -> token) as the converter wrote them."""
    return write_gguf(path, REASONING_SPECIALS, template=REASONING, ids=ids, **kw)  # type: ignore[arg-type]


def harmony(path: Path, ids: Mapping[str, str], **kw: object) -> Path:
    """gpt-oss's harmony format (the sample repo's template): <|end|> ends the reasoning."""
    return write_gguf(path, HARMONY_SPECIALS, template=HARMONY.read_text(), ids=ids, **kw)  # type: ignore[arg-type]
