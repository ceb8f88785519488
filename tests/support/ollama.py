"""An ollama model store built as ollama lays one out: manifests naming blobs by digest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.support.ggufs import chatml, command_r, glm

GO_CHATML = "{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"


def _blob(store: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    (store / "blobs" / f"sha256-{digest}").write_bytes(data)
    return f"sha256:{digest}"


def add_model(store: Path, name: str, gguf: Path | None, params: dict | None = None) -> None:
    """``registry.ollama.ai/library/<model>/<tag>`` (or a full host/namespace path)."""
    repo, _, tag = name.partition(":")
    parts = repo.split("/")
    if len(parts) == 1:
        parts = ["registry.ollama.ai", "library", *parts]
    layers = [
        {
            "mediaType": "application/vnd.ollama.image.template",
            "digest": _blob(store, GO_CHATML.encode()),
        }
    ]
    if gguf is not None:
        layers.insert(
            0,
            {
                "mediaType": "application/vnd.ollama.image.model",
                "digest": _blob(store, gguf.read_bytes()),
            },
        )
    else:
        layers.insert(
            0, {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "0" * 64}
        )
    if params is not None:
        layers.append(
            {
                "mediaType": "application/vnd.ollama.image.params",
                "digest": _blob(store, json.dumps(params).encode()),
            }
        )
    manifest = store / "manifests" / Path(*parts) / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))


def four_model_store(tmp_path: Path) -> Path:
    """A store in ``tmp_path/models``: qwen and glm (ChatML and GLM GGUFs, with and without
    stop params), glm-stops, and hf.co/org/cmdr (command-r, a Hub name)."""
    store = tmp_path / "models"
    src = tmp_path / "src"
    src.mkdir()
    add_model(
        store, "qwen:latest", chatml(src / "q.gguf"), {"stop": ["<|im_start|>", "<|im_end|>"]}
    )
    add_model(store, "glm:latest", glm(src / "g.gguf"), {"temperature": 0.6})
    add_model(
        store, "glm-stops:latest", glm(src / "g.gguf"), {"stop": ["<|user|>", "<|observation|>"]}
    )
    add_model(
        store,
        "hf.co/org/cmdr:Q4_K_M",
        command_r(src / "c.gguf"),
        {"stop": ["<|START_OF_TURN_TOKEN|>"]},
    )
    return store
