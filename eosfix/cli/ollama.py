"""``eosfix ollama``: does each model in ollama's store stop, and the Modelfile that fixes it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from eosfix.cli.term import color_option
from eosfix.render.report import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK


def _result_dict(r: Any, text: str | None) -> dict[str, Any]:
    from eosfix.runtimes.llamacpp import LLAMA_CPP_VERSION

    out: dict[str, Any] = {
        "name": r.model.name,
        "manifest": str(r.model.manifest),
        "blob": str(r.model.model_blob) if r.model.model_blob else None,
        "stop": list(r.model.stop),
        "has_go_template": bool(r.model.template),
    }
    if r.error is not None:
        return {**out, "status": "error", "error": str(r.error)}
    c = r.check
    out.update(
        status="ok" if r.ok else ("no_template" if not c.repo.templates else "does_not_stop"),
        terminators=[
            {"content": t.content, "id": t.id, "kind": t.kind} for t in c.terminators.terminators
        ],
        llama_cpp={"version": LLAMA_CPP_VERSION, "eog": sorted(c.stop.ids or ())},
        stops=r.stops,
        modelfile=text,
    )
    return out


def _text(r: Any, text: str | None) -> list[str]:
    if r.error is not None:
        return [f"{click.style('error', fg='red', bold=True)}: {r.model.name}: {r.error}"]
    c = r.check
    if not c.repo.templates:
        return [f"{r.model.name}: no chat template in its GGUF: nothing to check"]
    eog = ", ".join(str(i) for i in sorted(c.stop.ids or ()))
    stops = ", ".join(json.dumps(s, ensure_ascii=False) for s in r.model.stop) or "none"
    lines = [
        click.style(r.model.name, bold=True),
        f"  llama.cpp EOG  [{eog}]   PARAMETER stop: {stops}",
    ]
    for t in c.terminators.terminators:
        ok = (r.stops or {}).get(t.content)
        mark = click.style("stops", fg="green") if ok else click.style("never stops", fg="red")
        lines.append(f"  ends a turn    {t.content}  {t.id_str}: {mark}")
    if text is not None:
        lines += ["  Modelfile that fixes it:", *(f"    {line}" for line in text.splitlines())]
    return lines


@click.command()
@click.option(
    "--models",
    "models_dir",
    type=click.Path(file_okay=False),
    help="ollama's models folder (default: OLLAMA_MODELS, else ~/.ollama/models).",
)
@click.option(
    "--write-modelfile",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write each fixing Modelfile into this folder (never into the store).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one block per model and the Modelfile lines that fix it; json: for scripts.",
)
@color_option
def ollama(models_dir: str | None, out_dir: str | None, fmt: str) -> None:
    """Check every model in ollama's store: does it stop at the end of each turn?

    Per manifest: the GGUF blob (llama.cpp's end-of-generation set) and the params layer's
    stop strings. The store is never edited; a model that would not stop gets the Modelfile
    (FROM model + PARAMETER stop ...) that fixes it. Exit 0: all stop; 1: some do not;
    2: a model could not be read, or the store holds no model (nothing checked).

    \b
    Example:
        eosfix ollama
        eosfix ollama --write-modelfile ./modelfiles
    """
    from eosfix.containers.ollama.check import OllamaResult, check_model, modelfile, modelfile_name
    from eosfix.containers.ollama.store import (
        OllamaModel,
        default_models_dir,
        iter_manifests,
        model_name,
        read_manifest,
    )
    from eosfix.core.errors import EosfixError
    from eosfix.core.fileio import write_if_changed

    models = Path(models_dir) if models_dir else default_models_dir()
    results = []
    for manifest in iter_manifests(models):
        try:
            model = read_manifest(models, manifest)
        except EosfixError as exc:
            name = model_name(manifest.relative_to(models / "manifests"))
            results.append(OllamaResult(OllamaModel(name, manifest, None, None), error=exc))
            continue
        results.append(check_model(model))
    texts = [modelfile(r) for r in results]
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for r, text in zip(results, texts, strict=True):
            if text is not None:
                target = Path(out_dir) / modelfile_name(r.model.name)
                write_if_changed(target, text)
                click.echo(f"Writing {target}", err=True)
    if fmt == "json":
        payload = [_result_dict(r, t) for r, t in zip(results, texts, strict=True)]
        click.echo(json.dumps({"models": payload}, indent=2, ensure_ascii=False))
    else:
        blocks = ["\n".join(_text(r, t)) for r, t in zip(results, texts, strict=True)]
        bad, n = sum(1 for t in texts if t is not None), len(results)
        summary = f"{n} model{'s' * (n != 1)}, {bad} would not stop at every turn end"
        blocks.append(summary if n else "no models in the store: nothing checked")
        click.echo("\n\n".join(blocks))
    if not results or any(r.error is not None for r in results):
        sys.exit(EXIT_INPUT)
    sys.exit(EXIT_FINDINGS if any(t is not None for t in texts) else EXIT_OK)
