"""GGUF files written by the tests with the ``gguf`` package's writer (llama.cpp's gguf-py).

Each case is a small vocabulary laid out like the real model family, a chat template, and the
special-token keys a converter would write. Ids sit at the end of a block of ordinary byte
tokens so the files look like real vocabularies to llama.cpp (``vocab_only`` loads them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
GLM = (Path(__file__).parent.parent / "sample_repos/glm-next-turn-opener/chat_template.jinja")
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
    ids: Mapping[str, str] | None = None,
    control: bool = True,
    tensor: bytes = b"",
    model: str = "gpt2",
) -> Path:
    """A GGUF: byte tokens, then ``specials``; ``ids`` maps a role (eos, eot...) to a token."""
    gguf = pytest.importorskip("gguf", reason="pip install 'eosfix[verify]' (the gguf package)")
    import numpy as np

    tokens = [*BASE, *specials]
    types = [1] * len(BASE) + [3 if control else 4] * len(specials)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 a"])
    for role, token in (ids or {}).items():
        getattr(w, f"add_{role}_token_id")(tokens.index(token))
    if template is not None:
        w.add_chat_template(template)
    for name, source in (named or {}).items():
        w.add_chat_template([{"name": "default", "template": template or ""},
                             {"name": name, "template": source}])  # fmt: skip
    if tensor:
        w.add_tensor("weights", np.frombuffer(tensor, dtype=np.int8).copy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def chatml(path: Path, **kw: object) -> Path:
    """The seed's case: ChatML turns, eos ``<|endoftext|>``."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return write_gguf(path, specials, template=CHATML, ids={"eos": "<|endoftext|>"}, **kw)  # type: ignore[arg-type]


GLM_SPECIALS = ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
                "<|observation|>"]  # fmt: skip


def glm(path: Path, ids: Mapping[str, str] | None = None, **kw: object) -> Path:
    """GLM-4: replies have no closing token; eot/eom unset unless ``ids`` says otherwise."""
    return write_gguf(path, GLM_SPECIALS, template=GLM.read_text(),
                      ids=ids or {"eos": "<|endoftext|>"}, **kw)  # type: ignore[arg-type]  # fmt: skip


COMMAND_R_SPECIALS = ["<PAD>", "<BOS_TOKEN>", "<EOS_TOKEN>", "<|START_OF_TURN_TOKEN|>",
                      "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
                      "<|SYSTEM_TOKEN|>"]  # fmt: skip


def command_r(path: Path, **kw: object) -> Path:
    """Command-R: turns end with ``<|END_OF_TURN_TOKEN|>``, outside llama.cpp's name list."""
    return write_gguf(path, COMMAND_R_SPECIALS, template=COMMAND_R,
                      ids={"bos": "<BOS_TOKEN>", "eos": "<EOS_TOKEN>"}, **kw)  # type: ignore[arg-type]  # fmt: skip
