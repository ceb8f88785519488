"""Ask real llama.cpp (llama-cpp-python's build) what it stops on, for GGUF files.

Run as a script in a child process: a GGUF llama.cpp dislikes may abort the process (a
``GGML_ASSERT``), which must not take pytest down with it. Prints one JSON object:
``{path: {"eog": [...], "eos": id, "eot": id, "n_tokens": n} | {"error": text}}`` (the
bindings have no eom getter); with ``--pieces``, also ``"pieces"``: each token's piece.

    python tests/support/llamacpp_eog.py [--pieces] a.gguf b.gguf
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _pieces(lib: Any, vocab: Any, n: int) -> list[str]:
    """Each token's piece as llama.cpp writes it (``llama_token_to_piece``, special tokens
    kept), as hex."""
    out = []
    size = 256
    buf = ctypes.create_string_buffer(size)
    for i in range(n):
        got = lib.llama_token_to_piece(vocab, i, buf, size, 0, True)
        if got < 0:  # a longer piece: llama.cpp says how long
            size = -got
            buf = ctypes.create_string_buffer(size)
            got = lib.llama_token_to_piece(vocab, i, buf, size, 0, True)
        out.append(buf.raw[:got].hex())
    return out


def _query(lib: Any, path: str, pieces: bool = False) -> dict[str, Any]:
    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        return {"error": "llama.cpp could not load it"}
    try:
        vocab = lib.llama_model_get_vocab(model)
        n = lib.llama_vocab_n_tokens(vocab)
        eog = [i for i in range(n) if lib.llama_vocab_is_eog(vocab, i)]

        def opt(token: int) -> int | None:
            return None if token < 0 else token

        found = {
            "eog": eog,
            "eos": opt(lib.llama_vocab_eos(vocab)),
            "eot": opt(lib.llama_vocab_eot(vocab)),
            "n_tokens": n,
        }
        if pieces:
            found["pieces"] = _pieces(lib, vocab, n)
        return found
    finally:
        lib.llama_model_free(model)


def main(args: list[str]) -> int:
    import llama_cpp

    pieces = "--pieces" in args
    paths = [a for a in args if a != "--pieces"]
    silence = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(silence, ctypes.c_void_p())  # keep `silence` alive until exit
    llama_cpp.llama_backend_init()
    out = {p: _query(llama_cpp, p, pieces) for p in paths}
    print(json.dumps(out))
    return 0


def real_eog(paths: list[Path], *, pieces: bool = False) -> dict[Path, dict[str, Any]]:
    """Run this script on ``paths`` in a child process; skip the test if llama.cpp is absent.
    ``pieces``: each token's piece too (``"pieces"``: hex, by id)."""
    pytest.importorskip("llama_cpp", reason="pip install 'eosfix[runtimes]' (llama-cpp-python)")
    proc = subprocess.run(
        [sys.executable, __file__, *(["--pieces"] if pieces else []), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout.splitlines()[-1])
    return {Path(p): v for p, v in data.items()}


def assert_loads(paths: list[Path]) -> dict[Path, dict[str, Any]]:
    """Real llama.cpp loads every file (a split from its first shard), and its EOG set is the
    one eosfix models: what every file ``fix`` writes in the tests must pass."""
    from eosfix.containers.gguf.read import load_gguf
    from eosfix.runtimes.llamacpp import end_of_generation

    found = real_eog(paths)
    for path, got in found.items():
        assert "error" not in got, f"llama.cpp refuses {path}"
        eog = end_of_generation(load_gguf(path).vocab)
        assert set(got["eog"]) - eog.uncertain == set(eog.ids) - eog.uncertain, path
    return found


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
