"""Sources enumerate and fetch: the Hugging Face cache, a Hub organisation and its files.

They run no check and print nothing: ``eosfix.batch`` runs what they give through the
pipeline. Writers of their own places (Hub pull requests and uploads) sit beside them.
"""

from __future__ import annotations

from collections.abc import Iterable

# What decides a repo revision's analysis: (path in the repo, content hash) of each file a
# check reads. Revisions and repos with the same key share one analysis.
Key = tuple[tuple[str, str], ...]

# Files a runtime loads a model from: its configuration, or weights in a format runtimes read
# next to a config.json (safetensors, PyTorch, TensorFlow/Flax, MLX, ONNX). A GGUF file is its
# own container (llama.cpp never reads the folder's JSON files), so it does not count here.
MODEL_CONFIGS = ("config.json", "generation_config.json")
WEIGHT_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".npz", ".onnx",
)  # fmt: skip


def holds_a_model(names: Iterable[str]) -> bool:
    """Whether a repo whose files are ``names`` (all of them, as the Hub lists them) holds a
    model some runtime loads: config.json, generation_config.json or weights. A repo with none
    (tokenizer files and a chat template only: Xenova/Llama-3.2-Tokenizer) is not a model repo
    for any runtime; eosfix proposes nothing for it."""
    return any(n in MODEL_CONFIGS or n.endswith(WEIGHT_SUFFIXES) for n in names)
