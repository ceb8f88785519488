"""``eosfix ollama``: does each model in ollama's store stop, and the Modelfile that fixes it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from eosfix.cli.common import runtime_option
from eosfix.cli.term import color_option
from eosfix.containers.ollama.read import default_models_dir
from eosfix.render.report import Report
from eosfix.result import RepoResult


def _write_modelfiles(out_dir: str, results: list[RepoResult]) -> None:
    """Each Modelfile into ``out_dir``; "Writing X" only for a file that changed."""
    from eosfix.containers.ollama.container import modelfile_name
    from eosfix.core.errors import WriteError
    from eosfix.core.fileio import write_if_changed

    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot create the folder: {exc.strerror or exc}", path=folder) from None
    for r in results:
        text = r.ollama.modelfile if r.ollama is not None else None
        if r.ollama is None or text is None:
            continue
        target = folder / modelfile_name(r.ollama.model.name)
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
    from eosfix.render.ollama import render_ollama_json, render_ollama_text
    from eosfix.targets.check import check_target
    from eosfix.targets.open import open_store

    others = sorted(set(pins) - {"ollama"})
    if others:
        raise click.UsageError(f"eosfix ollama judges ollama only; not {', '.join(others)}")
    models = Path(models_dir) if models_dir else default_models_dir()
    results = [r for unit in open_store(models) for r in check_target(unit, pins=pins).results]
    if fmt == "json":
        click.echo(render_ollama_json(results))
    else:
        click.echo(render_ollama_text(results))
    if out_dir is not None:  # after the report, so a folder that cannot be written loses none
        _write_modelfiles(out_dir, results)
    sys.exit(Report(results).exit_code)
