"""Does an ollama model stop at the end of every turn, and which Modelfile makes it stop?

ollama runs the model's GGUF blob with llama.cpp, so it stops on llama.cpp's end-of-generation
set of that blob (``eosfix.runtimes.llamacpp``), and also on every ``stop`` string of the
model's params layer (``PARAMETER stop``). The store is content-addressed and never edited:
the fix is a Modelfile, ``FROM <model>`` plus ``PARAMETER stop`` lines. A Modelfile's
``stop`` replaces the base model's list, so the existing stops are repeated in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from eosfix.containers.gguf.container import open_gguf
from eosfix.containers.gguf.read import MAGIC
from eosfix.containers.ollama.store import OllamaModel
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.decide.check import RepoCheck, check
from eosfix.runtimes.ollama import stops_on


@dataclass(frozen=True)
class OllamaResult:
    model: OllamaModel
    check: RepoCheck | None = None
    stops: dict[str, bool] | None = None  # terminator text -> stops (EOG id or stop string)
    error: EosfixError | None = None

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(t for t, ok in (self.stops or {}).items() if not ok)

    @property
    def ok(self) -> bool:
        return self.error is None and self.check is not None and not self.missing


def _is_gguf(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == MAGIC


def check_model(model: OllamaModel) -> OllamaResult:
    """Check one model of the store: its GGUF blob's EOG set plus its stop params."""
    try:
        blob = model.model_blob
        if blob is None:
            raise RepoLoadError("the manifest names no model layer", path=model.manifest)
        if not blob.is_file():
            raise RepoLoadError("model blob missing from the store", path=blob)
        if not _is_gguf(str(blob)):
            raise RepoLoadError("model layer is not a GGUF file: not checked", path=blob)
        gguf = open_gguf(blob)
        result = check(gguf.repo, gguf.keys)
    except EosfixError as exc:
        return OllamaResult(model, error=exc)
    except OSError as exc:
        return OllamaResult(model, error=RepoLoadError(str(exc), path=model.manifest))
    terms = {t.content: t.id for t in result.terminators.terminators}
    return OllamaResult(model, result, stops_on(result.stop.ids or (), model.stop, terms))


def modelfile(result: OllamaResult) -> str | None:
    """The Modelfile that makes the model stop at every terminator, or None if it does."""
    if result.check is None or not result.missing:
        return None
    stops = list(dict.fromkeys([*result.model.stop, *result.missing]))
    lines = [
        f"# eosfix: {result.model.name} does not stop on {' '.join(result.missing)}",
        "# create it with: ollama create NEW_NAME -f THIS_FILE",
        f"FROM {result.model.name}",
        *(f"PARAMETER stop {json.dumps(s, ensure_ascii=False)}" for s in stops),
    ]
    return "\n".join(lines) + "\n"


def modelfile_name(name: str) -> str:
    """A file name for a model's Modelfile: ``hf.co/org/repo:q4`` -> ``hf.co_org_repo_q4``."""
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in name)
    return f"{safe}.Modelfile"
