"""``eosfix ollama``: does each model in ollama's store stop, and the Modelfile that fixes it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from eosfix.cli.common import runtime_option
from eosfix.cli.term import color_option
from eosfix.render.report import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK


def _result_dict(r: Any, text: str | None) -> dict[str, Any]:
    from eosfix.containers.gguf.format import field_key
    from eosfix.runtimes.llamacpp import LLAMA_CPP_VERSION

    out: dict[str, Any] = {
        "name": r.model.name,
        "manifest": str(r.model.manifest),
        "blob": str(r.model.model_blob) if r.model.model_blob else None,
        "stop": list(r.model.stop),
        "has_go_template": bool(r.model.template),
        "has_projector": r.model.has_projector,
        "status": r.status,
    }
    if r.error is not None:
        return {**out, "error": str(r.error)}
    c, o = r.check, r.ollama
    out.update(
        terminators=[
            {"content": t.content, "id": t.id, "kind": t.kind} for t in c.terminators.terminators
        ],
        llama_cpp={"version": LLAMA_CPP_VERSION, "eog": sorted(c.stop.ids or ())},
        ollama={
            "version": o.version,
            "engine": o.engine,
            "stop_ids": sorted(o.ids),
            "reads": o.reads,
            "source": o.source,
            "rewrites": {
                field_key(k): list(v) if isinstance(v, tuple) else v for k, v in o.rewrites.items()
            },
        },
        stops=r.stops,
        stops_early=[
            {"id": s.id, "kind": s.kind, "token": s.token, "text": s.text, "reason": s.reason}
            for s in r.early
        ],
        findings=[
            {
                "code": f.code,
                "severity": f.severity.value,
                "file": f.file,
                "message": f.message,
                "fixable": f.fixable,
            }
            for f in r.findings
        ],
        modelfile=text,
        blob_fix=r.blob_fix,
    )
    return out


def _text(r: Any, text: str | None) -> list[str]:
    from eosfix.decide.stopids import CODE_BY_KIND, what_it_is
    from eosfix.render.text import finding_line

    if r.error is not None:
        return [f"{click.style('error', fg='red', bold=True)}: {r.model.name}: {r.error}"]
    c, o = r.check, r.ollama
    if not c.repo.templates:
        return [f"{r.model.name}: no chat template in its GGUF: nothing to check"]
    ids = ", ".join(str(i) for i in sorted(o.ids))
    stops = ", ".join(json.dumps(s, ensure_ascii=False) for s in r.model.stop) or "none"
    lines = [
        click.style(r.model.name, bold=True),
        f"  ollama         {o.version} ({o.engine}) stops on [{ids}]   PARAMETER stop: {stops}",
    ]
    for t in c.terminators.terminators:
        ok = (r.stops or {}).get(t.content)
        mark = click.style("stops", fg="green") if ok else click.style("never stops", fg="red")
        lines.append(f"  ends a turn    {t.content}  {t.id_str}: {mark}")
    for s in r.early:
        code = click.style(CODE_BY_KIND[s.kind].code, fg="red", bold=True)
        lines.append(f"  stops early    {code} ollama stops on {what_it_is(s)}")
    if r.blob_fix is not None:
        lines.append(f"  fix the blob   no Modelfile can take a stop id away: {r.blob_fix}")
    lines += ["  " + finding_line(r.model.name, f) for f in r.findings]
    if text is not None:
        lines += ["  Modelfile that fixes it:", *(f"    {line}" for line in text.splitlines())]
    return lines


def _summary(results: list[Any]) -> str:
    n = len(results)
    if not n:
        return "no models in the store: nothing checked"
    count = {s: sum(1 for r in results if r.status == s) for s in
             ("does_not_stop", "stops_early", "problems", "no_template", "error")}  # fmt: skip
    parts = [
        f"{n} model{'s' * (n != 1)}, {count['does_not_stop']} would not stop at every turn end"
    ]
    parts += [f"{count['stops_early']} stop inside a reply"] if count["stops_early"] else []
    parts += [f"{count['problems']} with other problems"] if count["problems"] else []
    parts += [f"{count['no_template']} without a chat template"] if count["no_template"] else []
    parts += [f"{count['error']} could not be read"] if count["error"] else []
    return ", ".join(parts)


def _write_modelfiles(out_dir: str, results: list[Any], texts: list[str | None]) -> None:
    """Each Modelfile into ``out_dir``; "Writing X" only for a file that changed."""
    from eosfix.containers.ollama.container import modelfile_name
    from eosfix.core.errors import WriteError
    from eosfix.core.fileio import write_if_changed

    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot create the folder: {exc.strerror or exc}", path=folder) from None
    for r, text in zip(results, texts, strict=True):
        if text is None:
            continue
        target = folder / modelfile_name(r.model.name)
        try:
            changed = write_if_changed(target, text)
        except OSError as exc:
            raise WriteError(f"cannot write: {exc.strerror or exc}", path=target) from None
        if changed:
            click.echo(f"Writing {target}", err=True)


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
@runtime_option
@color_option
def ollama(models_dir: str | None, out_dir: str | None, fmt: str, pins: dict[str, str]) -> None:
    """Check every model in ollama's store: does it stop at the end of each turn?

    Per manifest: the GGUF blob, on the engine the ollama release runs it on (llama-server
    from 0.30.0; before that ollama's Go engine or its llama.cpp, by architecture; pick a
    release with --runtime ollama==0.20.0), and the params layer's stop strings; every
    finding of `eosfix check` on the blob applies. The store is never edited; a model that
    would not stop gets the Modelfile (FROM model + PARAMETER stop ...) that fixes it, a model
    that stops inside a reply the command that fixes its blob into a new file. Exit 0: all
    stop; 1: some do not, or have problems; 2: a model could not be read, or the store holds
    no model (nothing checked).

    \b
    Example:
        eosfix ollama
        eosfix ollama --write-modelfile ./modelfiles
        eosfix ollama --runtime ollama==0.20.0
    """
    from eosfix.containers.ollama.container import OllamaResult, check_model, modelfile
    from eosfix.containers.ollama.read import (
        OllamaModel,
        default_models_dir,
        iter_manifests,
        model_name,
        read_manifest,
    )
    from eosfix.core.errors import EosfixError

    others = sorted(set(pins) - {"ollama"})
    if others:
        raise click.UsageError(f"eosfix ollama judges ollama only; not {', '.join(others)}")
    version = pins.get("ollama")
    models = Path(models_dir) if models_dir else default_models_dir()
    results = []
    for manifest in iter_manifests(models):
        try:
            model = read_manifest(models, manifest)
        except EosfixError as exc:
            name = model_name(manifest.relative_to(models / "manifests"))
            results.append(OllamaResult(OllamaModel(name, manifest, None, None), error=exc))
            continue
        results.append(check_model(model, version))
    texts = [modelfile(r) for r in results]
    if fmt == "json":
        payload = [_result_dict(r, t) for r, t in zip(results, texts, strict=True)]
        click.echo(json.dumps({"models": payload}, indent=2, ensure_ascii=False))
    else:
        blocks = ["\n".join(_text(r, t)) for r, t in zip(results, texts, strict=True)]
        click.echo("\n\n".join([*blocks, _summary(results)]))
    if out_dir is not None:  # after the report, so a folder that cannot be written loses none
        _write_modelfiles(out_dir, results, texts)
    if not results or any(r.error is not None for r in results):
        sys.exit(EXIT_INPUT)
    bad = any(r.status in ("does_not_stop", "stops_early", "problems") for r in results)
    sys.exit(EXIT_FINDINGS if bad else EXIT_OK)
