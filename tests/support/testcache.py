"""What tests fetch from a package registry once, and what they build once from pinned inputs:
kept in the test cache (``$EOSFIX_TEST_CACHE``, default ``~/.cache/eosfix-tests``), each made
under a file lock so that test processes running side by side (``pytest -n``) make it once and
never read it half-written.

Standard library only: CI's first stage builds the pre-commit tests' wheelhouse through it
(tests/support/wheelhouse.py) with the system Python, before any virtualenv exists."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

LLAMA_CPP_PYTHON_SDIST = "llama_cpp_python-0.3.36.tar.gz"
_VOCAB_MEMBERS = "vendor/llama.cpp/models/ggml-vocab-"
# What the sdist ships under that prefix: ``ggml-vocab-NAME.gguf`` -> its ``tokenizer.ggml.model``.
# Written down so that tests take one case per vocabulary when they are collected, before
# anything is downloaded (tests/runtimes/test_llamacpp_real.py checks it against the sdist).
LLAMA_CPP_VOCABULARIES = {
    "aquila": "gpt2", "baichuan": "llama", "bert-bge": "bert", "command-r": "gpt2",
    "deepseek-coder": "gpt2", "deepseek-llm": "gpt2", "falcon": "gpt2", "gemma-4": "gemma4",
    "gpt-2": "gpt2", "gpt-neox": "gpt2", "llama-bpe": "gpt2", "llama-spm": "llama",
    "mpt": "gpt2", "nomic-bert-moe": "t5", "phi-3": "llama", "qwen2": "gpt2", "qwen35": "gpt2",
    "refact": "gpt2", "starcoder": "gpt2",
}  # fmt: skip


def folder(name: str) -> Path:
    default = Path.home() / ".cache" / "eosfix-tests"
    return Path(os.environ.get("EOSFIX_TEST_CACHE", default)) / name


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made if absent) while the block runs: the
    other test processes that ask for it wait. Without ``fcntl`` (Windows) nothing is locked;
    a folder moved into place whole is still never seen half-made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def kept(name: str, inputs: Iterable[bytes]) -> Path:
    """Where ``built_once`` keeps what it builds from ``inputs``: ``NAME-<their hash>``."""
    digest = hashlib.sha256()
    for part in inputs:
        digest.update(hashlib.sha256(part).digest())
    return folder(f"{name}-{digest.hexdigest()[:12]}")


def built_once(name: str, inputs: Iterable[bytes], build: Callable[[Path], object]) -> Path:
    """The folder ``build`` writes, made once for these ``inputs`` (every byte the result
    depends on: files, versions, the builder's source) and kept as ``NAME-<their hash>``:
    written into a folder of its own, then moved into place whole."""
    target = kept(name, inputs)
    if target.is_dir():  # made whole by an earlier run: no lock to wait for
        return target
    with locked(target.with_name(f"{target.name}.lock")):
        if not target.is_dir():
            partial = target.with_name(f"{target.name}.partial")
            shutil.rmtree(partial, ignore_errors=True)  # an earlier attempt that did not end
            partial.mkdir()
            build(partial)
            partial.rename(target)
    return target


def llama_cpp_vocab_folder() -> Path:
    """Where ``llama_cpp_vocabularies`` extracts the sdist's vocabularies."""
    return folder("llama-cpp-python-0.3.36") / "models"


def _sdist(cache: Path) -> Path:
    """The sdist: EOSFIX_LLAMA_CPP_SDIST, the test cache, else ``pip download`` (registry)."""
    given = os.environ.get("EOSFIX_LLAMA_CPP_SDIST")
    if given:
        return Path(given)
    target = cache / LLAMA_CPP_PYTHON_SDIST
    if not target.is_file():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "llama-cpp-python==0.3.36", "-d", str(cache)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0 or not target.is_file():
            raise LookupError(f"cannot get the llama-cpp-python 0.3.36 sdist: {proc.stderr[-300:]}")
    return target


def llama_cpp_vocabularies() -> list[Path]:
    """Every ``models/ggml-vocab-*.gguf`` the llama-cpp-python 0.3.36 sdist ships, extracted
    once (LookupError when the sdist cannot be had)."""
    models = llama_cpp_vocab_folder()
    cache = models.parent
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / ".lock"):
        if not (models / ".complete").is_file():
            with tarfile.open(_sdist(cache)) as tar:
                models.mkdir(exist_ok=True)
                for m in tar.getmembers():
                    name = m.name.split("/", 1)[-1]
                    if name.startswith(_VOCAB_MEMBERS) and name.endswith(".gguf") and m.isfile():
                        src = tar.extractfile(m)
                        assert src is not None
                        with src, open(models / Path(name).name, "wb") as dst:
                            shutil.copyfileobj(src, dst)
            (models / ".complete").write_text("ok\n")
    return sorted(models.glob("ggml-vocab-*.gguf"))
