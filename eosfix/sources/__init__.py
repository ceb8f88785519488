"""Sources enumerate and fetch: the Hugging Face cache, a Hub organisation and its files.

They run no check and print nothing: ``eosfix.batch`` runs what they give through the
pipeline. Writers of their own places (Hub pull requests and uploads) sit beside them.
"""

from __future__ import annotations

from collections.abc import Iterable

from eosfix.core.repo import MODEL_FOLDER_FILES, TEMPLATE_DIR

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


def gguf_models(names: Iterable[str]) -> tuple[str, ...]:
    """The GGUF model files among a snapshot's ``names`` (each split by its first shard; not a
    projector, an imatrix or a draft: ``eosfix.sources.hub.gguf.model_files``, the rule a Hub
    repo's files are judged by), in the order given."""
    ggufs = [n for n in names if n.endswith(".gguf")]
    if not ggufs:
        return ()
    from eosfix.sources.hub.gguf import model_files  # only a snapshot with GGUF files needs it

    return model_files(ggufs)


def holds_a_model_folder(names: Iterable[str]) -> bool:
    """A tokenizer's or a chat template's files at the top (``eosfix.containers.paths``
    ``is_model_folder``, by names): the snapshot is checked as a folder too."""
    return any(
        n in MODEL_FOLDER_FILES or (n.startswith(f"{TEMPLATE_DIR}/") and n.endswith(".jinja"))
        for n in names
    )


def holds_a_model(names: Iterable[str]) -> bool:
    """Whether a repo whose files are ``names`` (all of them, as the Hub lists them) holds a
    model some runtime loads: config.json, generation_config.json or weights. A repo with none
    (tokenizer files and a chat template only: Xenova/Llama-3.2-Tokenizer) is not a model repo
    for any runtime; eosfix proposes nothing for it."""
    return any(n in MODEL_CONFIGS or n.endswith(WEIGHT_SUFFIXES) for n in names)
