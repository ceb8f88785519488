"""GGUF files in a Hub repo: which are models, their quant labels, which file a tag names.

- **model files**: ``*.gguf`` files llama.cpp would load as a model: not a projector, an
  importance matrix or a draft model (ggml-org/llama.cpp@0216dab ``common/download.cpp``
  ``gguf_filename_is_model``), and of a split (``NAME-00001-of-00003.gguf``, the same file's
  ``get_gguf_split_info``) the first shard only, which holds the metadata.
- **quant label**: what the Hub calls a file's quantisation (``Q4_K_M``, ``UD-Q4_K_XL``):
  ``@huggingface/tasks`` 0.21.54 ``src/gguf.ts`` ``parseGGUFQuantLabel`` (the last match of
  ``GGUF_QUANT_RE`` in the upper-cased name; tests/conformance/test_ollama_hub.py executes the
  package on many names and compares).
- **llama.cpp's pick** (``-hf user/repo[:tag]``): ``find_best_model``: the first model file,
  in listing order, whose path matches ``TAG[.-]`` (case-insensitive), tags ``Q4_K_M`` then
  ``Q8_0`` when none is given, else the first model file.
- **ollama's pick** (``ollama run hf.co/user/repo[:tag]``): the Hub's, documented in
  huggingface/hub-docs@242f4a1 ``docs/hub/ollama.md`` lines 36-67: the tag is a quant label
  (case-insensitive) or a file's whole name; without one, ``Q4_K_M`` when the repo has it,
  else "one reasonable quant type" the Hub does not name (eosfix then says so).

Names only: nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eosfix.containers.gguf.read import SPLIT_NAME, shard_name

# llama.cpp common/download.cpp gguf_filename_is_model: file names holding these are not models
NOT_MODELS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
# @huggingface/tasks 0.21.54 src/gguf.ts: GGMLFileQuantizationType's names in value order, then
# GGUF_QUANT_FILENAME_ALIASES; GGUF_QUANT_RE = (UD-)?(names)(_[A-Z]+)?
QUANT_NAMES = (
    "F32", "F16", "Q4_0", "Q4_1", "Q4_1_SOME_F16", "Q4_2", "Q4_3", "Q8_0", "Q5_0", "Q5_1",
    "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
    "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ3_M",
    "IQ2_S", "IQ2_M", "IQ4_XS", "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
    "TQ2_0", "MXFP4_MOE", "NVFP4", "Q1_0", "Q2_0", "Q2_K_XL", "Q3_K_XL", "Q4_K_XL", "Q5_K_XL",
    "Q6_K_XL", "Q8_K_XL", "MXFP4",
)  # fmt: skip
QUANT_RE = re.compile(rf"(UD-)?({'|'.join(QUANT_NAMES)})(_[A-Z]+)?")
LLAMA_CPP_TAGS = ("Q4_K_M", "Q8_0")  # find_best_model's tags when none is given
OLLAMA_DEFAULT = "Q4_K_M"  # docs/hub/ollama.md: "By default, the Q4_K_M quantization scheme"
# The repo files the Hub turns into ollama's layers (docs/hub/ollama.md lines 69-88).
OLLAMA_FILES = ("template", "system", "params")


def quant_label(name: str) -> str | None:
    """The Hub's quant label of a file name (the last match wins), or None."""
    found = [m.group(0) for m in QUANT_RE.finditer(name.upper())]
    return found[-1] if found else None


def model_stem(path: str) -> str:
    """A file's name without its quant label and shard number (``Chat-7B-Q4_K_M.gguf`` ->
    ``chat-7b-``): the quantisations of one model share it."""
    split = split_of(path)
    name = split.stem.upper()
    found = list(QUANT_RE.finditer(name))
    if found:
        m = found[-1]
        name = name[: m.start()] + name[m.end() :]
    return name.lower()


def is_model_file(path: str) -> bool:
    """A ``.gguf`` file llama.cpp would load as a model (not a projector, an imatrix...)."""
    if not path.endswith(".gguf"):
        return False
    name = path.rpartition("/")[2]
    return not any(word in name for word in NOT_MODELS)


@dataclass(frozen=True)
class Split:
    """Where a file stands in a split: shard ``no`` of ``count`` (1 of 1: not split)."""

    stem: str
    no: int
    count: int


def split_of(path: str) -> Split:
    folder, _, name = path.rpartition("/")
    m = SPLIT_NAME.match(name)
    if m is None:
        return Split(path.removesuffix(".gguf"), 1, 1)
    stem = f"{folder}/{m['stem']}" if folder else m["stem"]
    return Split(stem, int(m["no"]), int(m["count"]))


def model_files(names: Iterable[str]) -> tuple[str, ...]:
    """The repo's GGUF model files, in listing order, a split by its first shard; a split
    whose first shard is missing stands by its lowest shard (reading it says what is wrong)."""
    names = list(names)
    out: list[str] = []
    firsts: set[str] = set()
    for path in names:
        if not is_model_file(path):
            continue
        split = split_of(path)
        if split.count <= 1 or split.no == 1:
            out.append(path)
            firsts.add(split.stem)
    for path in names:  # orphans: later shards of a split with no first shard
        split = split_of(path)
        if is_model_file(path) and split.count > 1 and split.stem not in firsts:
            firsts.add(split.stem)
            out.append(path)
    return tuple(out)


def shards(first: str, count: int) -> tuple[str, ...]:
    """Every shard's path of a split, the first one first (llama.cpp's names)."""
    split = split_of(first)
    folder, _, name = split.stem.rpartition("/")
    named = (shard_name(name, n, count) for n in range(1, count + 1))
    return tuple(f"{folder}/{n}" if folder else n for n in named)


def llama_cpp_pick(names: Sequence[str], tag: str | None = None) -> str | None:
    """The file ``llama-cli -hf repo[:tag]`` loads (``find_best_model``), or None."""
    for t in (tag,) if tag else LLAMA_CPP_TAGS:
        try:
            pattern = re.compile(t + "[.-]", re.IGNORECASE)
        except re.error:
            return None
        for path in names:
            split = split_of(path)
            if is_model_file(path) and pattern.search(path) and not split.no > 1:
                return path
    if tag:
        return None
    return next((p for p in names if is_model_file(p) and split_of(p).no == 1), None)


def ollama_pick(names: Sequence[str], tag: str | None = None) -> str | None:
    """The file ``ollama run hf.co/repo[:tag]`` gets, as the Hub documents its choice: a
    file's whole name, or its quant label (case-insensitive); without a tag, Q4_K_M. None:
    no such file, or (no tag, no Q4_K_M) a choice the Hub does not document."""
    files = model_files(names)
    if tag and tag.lower() != "latest":
        exact = [p for p in files if p.rpartition("/")[2].lower() == tag.lower()]
        if exact:
            return exact[0]
        return next((p for p in files if quant_label(p) == tag.upper()), None)
    return next((p for p in files if quant_label(p) == OLLAMA_DEFAULT), None)
