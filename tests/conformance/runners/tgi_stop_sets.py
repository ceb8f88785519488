"""TGI's stop set for each folder, from its own server code (vendored: TGI is not on PyPI).

TGI decides the ids when it builds a model, and its stop check is ``StoppingCriteria``
(``utils/tokens.py``). Its model classes need a GPU, so this runs, verbatim, the statements of
their constructors that load the tokenizer and generation config (found by name in the vendored
files with ``ast``), then ``StoppingCriteria.from_pb`` and the criteria's own ``__call__`` on
every id. Two paths (``--path``):

- ``flash``: ``FlashCausalLM.__init__`` (the GPU path of most architectures, VLMs included):
  the tokenizer, then ``GenerationConfig.from_pretrained``, whose ``eos_token_id`` list (or
  set) becomes ``tokenizer._eos_token_ids``;
- ``transformers``: ``CausalLM.fallback`` and ``TransformersFlashCausalLM.__init__`` (CPU,
  and architectures TGI runs through transformers): the tokenizer only. Both are run and must
  agree.

The generation request's ``StoppingCriteriaParameters`` come from TGI's own
``proto/v3/generate.proto``, compiled here with grpcio-tools.
"""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

from _protocol import confirm, main

VENDOR = Path(__file__).resolve().parent.parent / "vendor" / "text-generation-inference"
SERVER = VENDOR / "server" / "text_generation_server"
COMMIT = (VENDOR / "COMMIT").read_text(encoding="utf-8").split()[0]


def _compile_proto(into: Path) -> None:
    """``text_generation_server.pb.generate_pb2`` as TGI's Makefile (``gen-server``) makes it."""
    pb = into / "text_generation_server" / "pb"
    pb.mkdir(parents=True)
    for package in (pb.parent, pb):
        (package / "__init__.py").write_text("", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{VENDOR / 'proto' / 'v3'}",
         f"--python_out={pb}", str(VENDOR / "proto" / "v3" / "generate.proto")],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(into))


def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _function(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    (klass,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return func


def _assigns(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in stmt.targets
    )


def _loads_generation_config(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Try) and "GenerationConfig" in ast.unparse(stmt.body[0])


def _statements(path: Path, cls: str, func: str, *, generation_config: bool) -> ast.Module:
    """The statement that loads the tokenizer in ``cls.func`` and, with ``generation_config``,
    the ``try`` right after it that reads generation_config.json."""
    body = _function(_module(path), cls, func).body
    (start,) = [i for i, s in enumerate(body) if _assigns(s, "tokenizer")]
    picked = [body[start]]
    if generation_config:
        (follow,) = [s for s in body[start + 1 :] if _loads_generation_config(s)]
        picked.append(follow)
    return ast.Module(body=picked, type_ignores=[])


def _stopping_criteria() -> type:
    """``StoppingCriteria`` (and ``StopSequenceCriteria``) from tokens.py, with the module's own
    imports, but for those of the logits processors that only the token choosers use."""
    tree = _module(SERVER / "utils" / "tokens.py")
    imports = [
        n for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
            "text_generation_server.utils"))
    ]  # fmt: skip
    classes = [
        n for n in tree.body
        if isinstance(n, ast.ClassDef) and n.name in ("StopSequenceCriteria", "StoppingCriteria")
    ]  # fmt: skip
    namespace: dict[str, object] = {"__name__": "text_generation_server.utils.tokens"}
    code = compile(ast.Module(body=[*imports, *classes], type_ignores=[]), "tokens.py", "exec")
    exec(code, namespace)  # noqa: S102 - TGI's own code, vendored verbatim
    return namespace["StoppingCriteria"]  # type: ignore[return-value]


PATHS = {
    "flash": [("models/flash_causal_lm.py", "FlashCausalLM", "__init__", True)],
    "transformers": [
        ("models/causal_lm.py", "CausalLM", "fallback", False),
        ("models/transformers_flash_causal_lm.py", "TransformersFlashCausalLM", "__init__", False),
    ],
}


def _tokenizer(folder: str, path: str, cls: str, func: str, generation_config: bool):
    from transformers import AutoTokenizer, GenerationConfig

    code = compile(
        _statements(SERVER / path, cls, func, generation_config=generation_config),
        f"{path}:{cls}.{func}", "exec",
    )  # fmt: skip
    namespace = {
        "model_id": folder, "revision": None, "trust_remote_code": False,
        "tokenizer_class": AutoTokenizer, "AutoTokenizer": AutoTokenizer,
        "GenerationConfig": GenerationConfig,
    }  # fmt: skip
    exec(code, namespace)  # noqa: S102 - TGI's own statements, vendored verbatim
    return namespace["tokenizer"]


def stop_set_for(path_name: str):
    def stop_set(folder: str, scan: int) -> list[int]:
        from text_generation_server.pb import generate_pb2

        criteria_class = _stopping_criteria()
        eos_reason = generate_pb2.FinishReason.FINISH_REASON_EOS_TOKEN
        params = generate_pb2.StoppingCriteriaParameters(max_new_tokens=8)
        found = []
        for source in PATHS[path_name]:
            tokenizer = _tokenizer(folder, *source)

            def stops(token_id: int, tokenizer=tokenizer) -> bool:
                criteria = criteria_class.from_pb(params, tokenizer)
                return criteria(token_id, "") == (True, eos_reason)

            declared = criteria_class.from_pb(params, tokenizer).eos_token_ids
            found.append(confirm(declared, stops, scan))
        if any(ids != found[0] for ids in found):
            raise AssertionError(f"the {path_name} loaders disagree: {found}")
        return found[0]

    return stop_set


if __name__ == "__main__":
    path_name = sys.argv.pop(sys.argv.index("--path") + 1)
    sys.argv.remove("--path")
    with tempfile.TemporaryDirectory() as generated:
        _compile_proto(Path(generated))
        details = {"commit": COMMIT, "path": path_name,
                   "transformers": importlib.metadata.version("transformers")}  # fmt: skip
        code = main(f"TGI ({path_name})", "3.3.7", details, stop_set_for(path_name))
    sys.exit(code)
