"""``eosfix check``, ``fix`` and ``explain``: one model repo at a time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from eosfix.cli.common import (
    config_check_option,
    config_fix_option,
    emit,
    error_line,
    fix_flags,
    format_option,
    keep_id_option,
    quiet_option,
    repo_dirs,
    runtime_option,
    strict_option,
)
from eosfix.cli.term import color_option
from eosfix.containers.target import is_gguf
from eosfix.render.report import Report

EXIT_HELP = """Exit 0: nothing to fix (warnings alone too, unless --strict). 1: {one}.
    2: a path was not checked (missing, not a model folder or GGUF file, unreadable or invalid
    file; also when nothing at all was checked)."""


@click.command(
    help=f"""Report whether each model folder or GGUF file stops where its turns end (read-only).

    PATH is a model folder (one holding tokenizer or chat template files), one of its config
    or template files (what pre-commit passes), a GGUF file, or a folder of GGUF files.

    {EXIT_HELP.format(one="something to fix or a problem eosfix cannot fix; with --strict, warnings")}

    \b
    Example:
        eosfix check ./my-model
        eosfix check ./my-model --format json
        eosfix check ./my-model --runtime mlx-lm==0.31.3
    """
)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@format_option
@config_check_option
@keep_id_option
@runtime_option
@strict_option
@quiet_option
@color_option
def check(
    paths: tuple[str, ...],
    fmt: str,
    config_json: bool,
    keep_ids: tuple[int, ...],
    pins: dict[str, str],
    strict: bool,
    quiet: bool,
) -> None:
    from eosfix import api

    report = Report(strict=strict)
    for path in repo_dirs(paths):
        report.record(api.check(path, config_json=config_json, keep_ids=keep_ids, pins=pins))
    flags = fix_flags(config_json, pins, keep_ids)
    emit(report.results, report, fmt, fix_flags=flags, quiet=quiet)
    sys.exit(report.exit_code)


@click.command(
    help=f"""Rewrite eos_token_id so generation stops at every turn terminator, and only there.

    Minimal byte-level edit, atomic write, only when something changes; a second run
    changes nothing. Stop ids that cut a reply (written inside a turn, ordinary text) or
    are no token are removed, the rest keep their order; --keep-id keeps one. The report then shows what was found, what was written and the state
    after writing. A GGUF gets tokenizer.ggml.eot_token_id / eom_token_id (in place when the
    key exists, else a verified rewrite). PATH is what check accepts.

    {EXIT_HELP.format(one="files changed (as pre-commit fixers do), or a problem eosfix cannot fix")}

    \b
    Example:
        eosfix fix ./my-model --diff    # show what would change
        eosfix fix ./my-model
        eosfix fix model.gguf --output model-fixed.gguf
    """
)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--diff", "show_diff", is_flag=True, help="Show the unified diff; write nothing.")
@click.option("--exit-zero-even-if-changed", is_flag=True, help="Exit 0 after changing files.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    help="For one GGUF: write the fixed file here and leave the original untouched.",
)
@format_option
@config_fix_option
@keep_id_option
@runtime_option
@strict_option
@quiet_option
@color_option
def fix(
    paths: tuple[str, ...],
    show_diff: bool,
    exit_zero_even_if_changed: bool,
    output: str | None,
    fmt: str,
    config_json: bool,
    keep_ids: tuple[int, ...],
    pins: dict[str, str],
    strict: bool,
    quiet: bool,
) -> None:
    from eosfix import api

    targets = repo_dirs(paths)
    if output is not None and (len(targets) != 1 or not is_gguf(targets[0])):
        raise click.UsageError("--output needs exactly one GGUF file")
    report = Report(strict=strict)
    for path in targets:
        if show_diff:
            result = api.check(path, config_json=config_json, keep_ids=keep_ids, pins=pins)
        elif is_gguf(path):
            result = _fix_gguf(path, output, keep_ids, pins)
        else:
            result = api.fix(path, config_json=config_json, keep_ids=keep_ids, pins=pins)
            for name in result.written:
                click.echo(f"Fixing {path / name}", err=True)
        report.record(result)
    emit(
        report.results, report, fmt, fixing=True, show_diff=show_diff, dry_run=show_diff,
        fix_flags=fix_flags(config_json, pins, keep_ids), quiet=quiet,
    )  # fmt: skip
    code = report.exit_code
    if exit_zero_even_if_changed and code == 1 and not show_diff:
        code = 0
    sys.exit(code)


def _fix_gguf(
    path: Path, output: str | None, keep_ids: tuple[int, ...], pins: dict[str, str]
) -> Any:
    """Fix one GGUF, with a progress bar (bytes, ETA) on a terminal while a rewrite copies."""
    from eosfix import api
    from eosfix.cli.progress import byte_progress

    with byte_progress(f"Rewriting {path.name}") as progress:
        result = api.fix_gguf(path, output=output, progress=progress, keep_ids=keep_ids, pins=pins)
    write = result.extra.get("write")
    if isinstance(write, dict):
        how = "in place" if write["mode"] == "in-place" else "rewritten"
        click.echo(f"Fixing {write['path']} ({how})", err=True)
    return result


@click.command()
@click.argument("path", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the probes, terminators and runtimes for a person; json: all of it, for scripts.",
)
@keep_id_option
@runtime_option
@color_option
def explain(path: str, fmt: str, keep_ids: tuple[int, ...], pins: dict[str, str]) -> None:
    """Explain one repo in depth: each probe rendered, each terminator with its evidence.

    Shows the rendered probes with special tokens visible, what ends a turn and why, the
    ids a hand-written generation loop must compare after each step, and which file they
    come from; for each runtime, the versions its rule holds for and whether eosfix executed
    that rule against the runtime or only modelled it from the runtime's source. PATH is a
    model folder, one of its config files, or a GGUF file.

    Exit codes as for check; a path that is not checked is one line on stderr, exit 2.

    \b
    Example:
        eosfix explain ./my-model
    """
    from eosfix import api
    from eosfix.render.explain import render_explain, result_explain_dict

    result = api.check(path, keep_ids=keep_ids, pins=pins)
    report = Report([result])
    if fmt == "json":
        import json

        click.echo(json.dumps(result_explain_dict(result), indent=2, ensure_ascii=False))
    elif result.error is not None:
        click.echo(error_line(result.error), err=True)
    else:
        click.echo(render_explain(result))
    sys.exit(report.exit_code)
