"""Read ollama's model store: manifests, and the blobs they name (read only, never written).

The store (``OLLAMA_MODELS``, else ``~/.ollama/models``) is content-addressed:
``manifests/<registry>/<namespace>/<model>/<tag>`` is a JSON manifest whose ``layers`` name
blobs ``blobs/sha256-<hex>`` by media type: ``application/vnd.ollama.image.model`` (the
GGUF), ``...template`` (a Go template), ``...params`` (JSON, e.g. ``{"stop": [...]}``),
``...projector`` (a vision model's separate projector, which keeps the model off ollama's Go
engine from 0.11.11: ``eosfix.runtimes.ollama.engines.engine_for``).
Editing a blob would break its digest, so eosfix never writes here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosfix.containers.folder.files import parse_json_text
from eosfix.core.errors import RepoLoadError, reading
from eosfix.core.saferead import read_regular

MODEL = "application/vnd.ollama.image.model"
TEMPLATE = "application/vnd.ollama.image.template"
PARAMS = "application/vnd.ollama.image.params"
PROJECTOR = "application/vnd.ollama.image.projector"
DEFAULT_REGISTRY = "registry.ollama.ai"
_MAX_SMALL_BLOB = 16 * 1024 * 1024  # manifests, templates and params are a few kB


def default_models_dir() -> Path:
    """Where ollama keeps models: ``OLLAMA_MODELS``, else ``~/.ollama/models``."""
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env) if env else Path.home() / ".ollama" / "models"


@dataclass(frozen=True)
class OllamaModel:
    name: str  # as ``ollama list`` shows it: llama3.2:latest, user/model:tag, hf.co/org/repo:q4
    manifest: Path
    model_blob: Path | None
    template: str | None  # the Go template layer
    params: dict[str, Any] = field(default_factory=dict)
    has_projector: bool = False  # a projector layer

    @property
    def stop(self) -> tuple[str, ...]:
        value = self.params.get("stop")
        items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
        return tuple(s for s in items if isinstance(s, str))


def model_name(rel: Path) -> str:
    """``registry.ollama.ai/library/llama3.2/latest`` -> ``llama3.2:latest``."""
    *repo, tag = rel.parts
    if repo[:2] == [DEFAULT_REGISTRY, "library"]:
        repo = repo[2:]
    elif repo[:1] == [DEFAULT_REGISTRY]:
        repo = repo[1:]
    return f"{'/'.join(repo)}:{tag}"


def blob_path(models: Path, digest: str) -> Path:
    algo, _, hexdigest = digest.partition(":")
    if algo != "sha256" or not hexdigest or not all(c in "0123456789abcdef" for c in hexdigest):
        raise RepoLoadError(f"unexpected blob digest {digest!r}", path=models)
    return models / "blobs" / f"sha256-{hexdigest}"


def _small_text(path: Path) -> str:
    try:
        with reading(path, missing="blob missing from the store"):
            return read_regular(path, _MAX_SMALL_BLOB).decode("utf-8")
    except UnicodeDecodeError:
        raise RepoLoadError("not valid UTF-8", path=path) from None


def _json(path: Path) -> Any:
    return parse_json_text(_small_text(path), path)  # the folder's reader: one way to fail


def read_manifest(models: Path, manifest: Path) -> OllamaModel:
    """One manifest and the template/params blobs it names."""
    data = _json(manifest)
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise RepoLoadError("not an ollama manifest (no layers)", path=manifest)
    by_type: dict[str, Path] = {}
    for layer in layers:
        if isinstance(layer, dict) and isinstance(layer.get("digest"), str):
            by_type.setdefault(str(layer.get("mediaType")), blob_path(models, layer["digest"]))
    template = _small_text(by_type[TEMPLATE]) if TEMPLATE in by_type else None
    params = _json(by_type[PARAMS]) if PARAMS in by_type else {}
    if not isinstance(params, dict):
        raise RepoLoadError("params blob is not a JSON object", path=by_type[PARAMS])
    name = model_name(manifest.relative_to(models / "manifests"))
    return OllamaModel(
        name, manifest, by_type.get(MODEL), template, params, has_projector=PROJECTOR in by_type
    )


def iter_manifests(models: Path) -> Iterator[Path]:
    """Every manifest file of the store, sorted."""
    root = models / "manifests"
    if not root.is_dir():
        raise RepoLoadError("no manifests folder: not an ollama models folder", path=models)
    yield from sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
