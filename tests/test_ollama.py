"""`eosfix ollama`: a model store built like ollama's, checked and never written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from eosfix.cli import main
from eosfix.containers.ollama.store import default_models_dir, model_name
from tests.ggufs import chatml, command_r, glm

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


def _store(tmp_path: Path) -> Path:
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


def _snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_names_and_default_folder(monkeypatch, tmp_path):
    assert model_name(Path("registry.ollama.ai/library/llama3.2/latest")) == "llama3.2:latest"
    assert model_name(Path("registry.ollama.ai/me/m/q4")) == "me/m:q4"
    assert model_name(Path("hf.co/org/repo/Q4_K_M")) == "hf.co/org/repo:Q4_K_M"
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    assert default_models_dir() == tmp_path
    monkeypatch.delenv("OLLAMA_MODELS")
    assert default_models_dir() == Path.home() / ".ollama" / "models"


def test_each_model_checked_store_untouched_modelfile_printed(tmp_path, capsys):
    store = _store(tmp_path)
    before = _snapshot(store)
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 1
    assert _snapshot(store) == before
    blocks = {b.splitlines()[0]: b for b in out.split("\n\n")}
    assert "<|im_end|>  id 98: stops" in blocks["qwen:latest"]
    assert "Modelfile" not in blocks["qwen:latest"]
    assert "<|user|>  id 100: never stops" in blocks["glm:latest"]
    assert (
        '    FROM glm:latest\n    PARAMETER stop "<|user|>"\n    PARAMETER stop "<|observation|>"'
    ) in blocks["glm:latest"]
    assert "never stops" not in blocks["glm-stops:latest"]  # its stop strings cover both
    cmdr = blocks["hf.co/org/cmdr:Q4_K_M"]
    # a Modelfile's stop list replaces the base model's: the existing stop is kept
    assert (
        'PARAMETER stop "<|START_OF_TURN_TOKEN|>"\n    PARAMETER stop "<|END_OF_TURN_TOKEN|>"'
    ) in cmdr
    assert out.rstrip().endswith("4 models, 2 would not stop at every turn end")


def test_write_modelfile_and_json(tmp_path, capsys):
    store = _store(tmp_path)
    out_dir = tmp_path / "modelfiles"
    code = main(
        ["ollama", "--models", str(store), "--write-modelfile", str(out_dir), "--format", "json"]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 1
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "glm_latest.Modelfile",
        "hf.co_org_cmdr_Q4_K_M.Modelfile",
    ]
    text = (out_dir / "glm_latest.Modelfile").read_text()
    assert "FROM glm:latest\n" in text
    models = {m["name"]: m for m in payload["models"]}
    assert models["glm:latest"]["status"] == "does_not_stop"
    assert models["glm:latest"]["stops"] == {"<|user|>": False, "<|observation|>": False}
    assert models["qwen:latest"]["status"] == "ok"
    assert models["glm:latest"]["modelfile"] == text


def test_broken_manifest_is_one_line_and_exit_2(tmp_path, capsys):
    store = _store(tmp_path)
    add_model(store, "gone:latest", None)
    (store / "manifests" / "registry.ollama.ai" / "library" / "junk").mkdir()
    (store / "manifests" / "registry.ollama.ai" / "library" / "junk" / "x").write_text("{")
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 2
    assert "error: gone:latest: " in out
    assert "model blob missing from the store" in out
    assert "error: junk:x: " in out
    assert "invalid JSON" in out


def test_not_an_ollama_folder(tmp_path, capsys):
    assert main(["ollama", "--models", str(tmp_path)]) == 2
    assert "no manifests folder" in capsys.readouterr().err


def test_an_empty_store_checks_nothing_and_exits_2(tmp_path, capsys):
    (tmp_path / "manifests").mkdir()
    assert main(["ollama", "--models", str(tmp_path)]) == 2
    assert capsys.readouterr().out == "no models in the store: nothing checked\n"


def test_one_model_is_counted_in_the_singular(tmp_path, capsys):
    store = tmp_path / "models"
    (tmp_path / "src").mkdir()
    add_model(store, "qwen:latest", chatml(tmp_path / "src" / "q.gguf"), {"stop": ["<|im_end|>"]})
    assert main(["ollama", "--models", str(store)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 model, 0 would not stop at every turn end"
