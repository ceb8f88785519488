"""The GGUF tests' shared fixture: llama.cpp's own vocabularies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import unavailable
from tests.support.testcache import llama_cpp_vocabularies


@pytest.fixture(scope="session")
def ggml_vocab_files() -> list[Path]:
    """Every ggml-vocab-*.gguf of the llama-cpp-python 0.3.36 sdist (from the package index
    once, then the test cache)."""
    try:
        files = llama_cpp_vocabularies()
    except LookupError as exc:
        unavailable(str(exc))
    assert len(files) >= 19
    return files
