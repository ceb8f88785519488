"""Ask real llama.cpp (llama-cpp-python's build) what it stops on, for GGUF files.

Run as a script in a child process: a GGUF llama.cpp dislikes may abort the process (a
``GGML_ASSERT``), which must not take pytest down with it. For each file, one JSON object:
``{"eog": [...], "eos": id, "eot": id, "n_tokens": n} | {"error": text}`` (the bindings have
no eom getter); with ``--pieces``, also ``"pieces"``: each token's piece.

    python tests/support/llamacpp_eog.py [--pieces] a.gguf b.gguf   # {path: object}
    python tests/support/llamacpp_eog.py --serve    # a request a line, an answer a line

A test process keeps one ``--serve`` child (starting Python and importing llama_cpp costs more
than loading most vocabularies) and remembers each answer by the file's bytes (a shard of a
split excepted: its siblings count too), so a vocabulary that several tests ask about is loaded
into llama.cpp once per process.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when first used: this file also runs as a script
    from tests.support.processes import LineChild


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


ANSWER = "eog-answer "  # marks the answer line among anything llama.cpp itself prints


_SILENCE: list[Any] = []  # the log callback, kept alive while llama.cpp may call it


def _init() -> Any:
    import llama_cpp

    _SILENCE.append(llama_cpp.llama_log_callback(lambda level, text, user: None))
    llama_cpp.llama_log_set(_SILENCE[0], ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    return llama_cpp


def _serve(lib: Any) -> int:
    """Answer ``{"path": p, "pieces": bool}`` lines until stdin closes."""
    for line in sys.stdin:
        ask = json.loads(line)
        found = _query(lib, ask["path"], ask["pieces"])
        sys.stdout.write(ANSWER + json.dumps(found) + "\n")
        sys.stdout.flush()
    return 0


def main(args: list[str]) -> int:
    lib = _init()
    if args == ["--serve"]:
        return _serve(lib)
    pieces = "--pieces" in args
    paths = [a for a in args if a != "--pieces"]
    print(json.dumps({p: _query(lib, p, pieces) for p in paths}))
    return 0


class _Child:
    """This script under ``--serve`` in a child process, started on first use and again after
    a file made llama.cpp abort it."""

    def __init__(self) -> None:
        self.child: LineChild | None = None

    def ask(self, path: Path, pieces: bool) -> dict[str, Any]:
        from tests.support.processes import LineChild

        if self.child is None or not self.child.alive():
            self.close()
            self.child = LineChild([sys.executable, __file__, "--serve"], prefix=ANSWER)
        answer = self.child.ask(json.dumps({"path": str(path), "pieces": pieces}))
        if answer is not None:
            return dict(json.loads(answer))
        said = self.child.said(2000)
        self.close()
        raise AssertionError(f"llama.cpp died on {path}: {said!r}")

    def close(self) -> None:
        if self.child is not None:
            self.child.close(timeout=10)
            self.child = None


_CHILD = _Child()
atexit.register(_CHILD.close)
_ANSWERS: dict[tuple[str, bool], dict[str, Any]] = {}  # (the file's sha256, pieces) -> answer
# A shard names the split (``split.count``): llama.cpp then reads its sibling files too, so its
# own bytes do not decide the answer. The key as the GGUF writes it: length, then text.
_SPLIT_KEY = len(b"split.count").to_bytes(8, "little") + b"split.count"


def real_eog(paths: list[Path], *, pieces: bool = False) -> dict[Path, dict[str, Any]]:
    """What llama.cpp says of each file, asked in a child process; skip the test if llama.cpp
    is absent. ``pieces``: each token's piece too (``"pieces"``: hex, by id). An answer with
    pieces also answers the same bytes without them."""
    pytest.importorskip("llama_cpp", reason="pip install 'eosfix[runtimes]' (llama-cpp-python)")
    out = {}
    for path in paths:
        data = Path(path).read_bytes()
        if _SPLIT_KEY in data:
            out[Path(path)] = _CHILD.ask(path, pieces)
            continue
        digest = hashlib.sha256(data).hexdigest()
        found = _ANSWERS.get((digest, pieces)) or _ANSWERS.get((digest, True))
        if found is None:
            found = _ANSWERS[(digest, pieces)] = _CHILD.ask(path, pieces)
        out[Path(path)] = found
    return out


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
