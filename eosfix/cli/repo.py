"""``eosfix check``, ``fix`` and ``explain``: one model repo at a time."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

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
    runtime_option,
    strict_option,
)
from eosfix.cli.term import color_option, echo_file_text
from eosfix.core.errors import NotChecked
from eosfix.render.report import Report
from eosfix.result import RepoResult
from eosfix.targets.parse import (
    HUB_PREFIX,
    HubTarget,
    LocalGguf,
    OllamaTarget,
    shadows_hub_id,
)

EXIT_HELP = """Exit 0: nothing to fix (warnings alone too, unless --strict). 1: {one}.
    2: a path was not checked (missing, not a model folder or GGUF file, unreadable or invalid
    file; also when nothing at all was checked)."""


@click.command(
    help=f"""Report whether each model folder or GGUF file stops where its turns end (read-only).

    PATH is a model folder (one holding tokenizer or chat template files), one of its config
    or template files (what pre-commit passes), a GGUF file, a folder of GGUF files, or a Hub
    repo (org/name when no such path exists; hf://org/name, hf.co/org/name and
    https://huggingface.co/org/name URLs always; @REV or /tree/REV for a revision). A repo of
    small files is read by those (never the weights); a repo of GGUF files, or one GGUF file
    named (org/name:QUANT, org/name/FILE.gguf, .../blob/REV/FILE.gguf), by each file's
    header, read by byte ranges.

    {EXIT_HELP.format(one="something to fix or a problem eosfix cannot fix; with --strict, warnings")}

    \b
    Example:
        eosfix check ./my-model
        eosfix check ./my-model --format json
        eosfix check ./my-model --runtime mlx-lm==0.31.3
        eosfix check hf.co/my-org/Chat-7B-GGUF:Q4_K_M
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
    from eosfix.targets.check import check_texts

    report = Report(strict=strict)
    _note_shadowed(paths)
    for checked in check_texts(paths, config_json=config_json, keep_ids=keep_ids, pins=pins):
        for line in checked.lines:  # what reading a GGUF repo cost, how to check its files
            click.echo(line, err=True)
        for result in checked.results:
            report.record(result)
    flags = fix_flags(config_json, pins, keep_ids)
    emit(report.results, report, fmt, fix_flags=flags, quiet=quiet)
    sys.exit(report.exit_code)


def _note_shadowed(paths: Sequence[str]) -> None:
    """Say which one is checked when a folder downloaded from the Hub has the name of the Hub
    repo: the local folder (as it is now, edits included), not the Hub's current files."""
    for raw in dict.fromkeys(paths):
        if shadows_hub_id(raw):
            click.echo(
                f"{raw}: checking the local folder, not the Hub repo (for the Hub's files: "
                f"{HUB_PREFIX}{raw})",
                err=True,
            )


@click.command(
    help=f"""Rewrite eos_token_id so generation stops at every turn terminator, and only there.

    Minimal byte-level edit, atomic write, only when something changes; a second run
    changes nothing. Stop ids that cut a reply (written inside a turn, ordinary text) or
    are no token are removed, the rest keep their order; --keep-id keeps one. The report then shows what was found, what was written and the state
    after writing. A GGUF gets tokenizer.ggml.eot_token_id / eom_token_id (in place when the
    key exists, else a verified rewrite). PATH is what check accepts; a Hub repo id is
    refused (eosfix hub ID --pr opens the pull request that fixes it). --diff prints the
    patch alone on stdout (paths relative to the current folder, for git apply), the report
    on stderr.

    {EXIT_HELP.format(one="files changed (as pre-commit fixers do), or a problem eosfix cannot fix")}

    \b
    Example:
        eosfix fix ./my-model --diff    # show what would change
        eosfix fix ./my-model
        eosfix fix model.gguf --output model-fixed.gguf
    """
)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the planned edits as a patch (git apply takes it); write nothing.",
)
@click.option("--exit-zero-even-if-changed", is_flag=True, help="Exit 0 after changing files.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    help="For one GGUF: write the fixed file here and leave the original untouched (a "
    "split: every shard, named NAME-00001-of-0000N.gguf...; nothing to fix: a copy).",
)
@click.option("--force", is_flag=True, help="Let --output overwrite an existing file.")
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
    force: bool,
    fmt: str,
    config_json: bool,
    keep_ids: tuple[int, ...],
    pins: dict[str, str],
    strict: bool,
    quiet: bool,
) -> None:
    from eosfix import api

    if show_diff and fmt != "text":
        raise click.UsageError(
            f"--diff prints a patch, not --format {fmt}: for the planned changes as JSON use "
            "eosfix check --format json (each change carries its diff)"
        )
    from eosfix.targets.open import Refused, open_targets

    units = open_targets(paths)
    if output is not None and (len(units) != 1 or not isinstance(units[0], LocalGguf)):
        raise click.UsageError("--output needs exactly one GGUF file")
    if force and output is None:
        raise click.UsageError("--force only lets --output overwrite a file: give --output")
    report = Report(strict=strict)
    _note_shadowed(paths)
    for unit in units:
        if isinstance(unit, HubTarget):
            result = _hub_not_fixed(unit)
        elif isinstance(unit, OllamaTarget):
            result = _ollama_not_fixed(unit)
        elif isinstance(unit, Refused):
            result = RepoResult(Path(unit.shown), error=unit.error)
        elif show_diff:  # fix's plan and, as fix writes (no link replaced), what stops it
            result = api.check(
                unit.path, config_json=config_json, keep_ids=keep_ids, pins=pins,
                replace_symlinks=False,
            )  # fmt: skip
            if result.blocked is not None:  # fix would refuse: so does its --diff
                result = RepoResult(result.path, error=result.blocked, label=result.label,
                                    container=result.container)  # fmt: skip
        elif isinstance(unit, LocalGguf):
            result = _fix_gguf(unit.path, output, force, keep_ids, pins)
        else:
            target = unit.path
            result = api.fix(target, config_json=config_json, keep_ids=keep_ids, pins=pins)
            for name in result.written:
                click.echo(f"Fixing {target / name}", err=True)
        for note in result.notes:  # a hard link split: said, no fail
            click.echo(f"warning: {note}", err=True)
        report.record(result)
    flags = fix_flags(config_json, pins, keep_ids)
    if show_diff:
        _emit_diff(report, flags, quiet)
    else:
        emit(report.results, report, fmt, fixing=True, fix_flags=flags, quiet=quiet)
    code = report.exit_code
    if exit_zero_even_if_changed and code == 1 and not show_diff:
        code = 0
    sys.exit(code)


def _hub_not_fixed(hub: HubTarget) -> RepoResult:
    """``fix`` writes local files: a Hub repo is fixed by a pull request, never here (eosfix's
    copy of its files is a shared store, and a fix written there would reach no one)."""
    quoted = shlex.quote(hub.repo_id)
    if hub.picks_gguf:
        reason = (
            "a GGUF file on the Hub: fix writes local files only, and no pull request can "
            "change a GGUF header; download the file and run eosfix fix FILE.gguf --output "
            f"NEW.gguf; `eosfix check {shlex.quote(str(hub))}` shows the params file a pull "
            "request can set (what ollama run hf.co/... stops on)"
        )
        return RepoResult(Path(hub.repo_id), error=NotChecked(reason, path=str(hub)))
    reason = (
        "a Hub repo id: fix writes local files only; open a pull request with "
        f"`eosfix hub {quoted} --pr` (--dry-run to see it first), or download the repo "
        "and fix the folder"
    )
    error = NotChecked(reason + hub.not_local, path=str(hub))
    return RepoResult(Path(hub.repo_id), error=error)


def _ollama_not_fixed(unit: OllamaTarget) -> RepoResult:
    """An ollama model is never edited: its store is content-addressed."""
    store = shlex.quote(str(unit.store))
    reason = (
        "an ollama model: its store is never edited (a blob's name is its content's hash); "
        f"eosfix ollama --models {store} --write-modelfile DIR writes the Modelfile that fixes it"
    )
    return RepoResult(unit.manifest, error=NotChecked(reason, path=unit.given))


def _emit_diff(report: Report, flags: tuple[str, ...], quiet: bool) -> None:
    """``fix --diff``: the patch alone on stdout (paths relative to the current folder, so
    ``git apply`` takes it); the report, and a GGUF's key edits, on stderr."""
    from eosfix.render.patch import render_binary_edits, render_patch

    emit(
        report.results, report, "text", err=True, fixing=True, dry_run=True, fix_flags=flags,
        quiet=quiet,
    )  # fmt: skip
    binary = render_binary_edits(report.results)
    if binary:
        click.echo(binary, err=True)
    patch = render_patch(report.results, cwd=Path.cwd())
    if patch:
        echo_file_text(patch)


def _fix_gguf(
    path: Path, output: str | None, force: bool, keep_ids: tuple[int, ...], pins: dict[str, str]
) -> RepoResult:
    """Fix one GGUF, with a progress bar (bytes, ETA) on a terminal while a rewrite copies."""
    from eosfix import api
    from eosfix.cli.progress import byte_progress

    with byte_progress(f"Rewriting {path.name}") as progress:
        result = api.fix_gguf(
            path, output=output, force=force, progress=progress, keep_ids=keep_ids, pins=pins
        )
    write = result.write
    if write is not None:
        first, *others = write.paths
        if write.mode == "copy":
            click.echo(f"Copying {path} to {first} (nothing to fix)", err=True)
        else:
            how = "in place" if write.mode == "in-place" else "rewritten"
            click.echo(f"Fixing {first} ({how})", err=True)
        for n, other in enumerate(others, 2):
            click.echo(f"Copying shard {n} to {other}", err=True)
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
    model folder, one of its config files, a GGUF file, or a Hub repo id.

    Exit codes as for check; a path that is not checked is one line on stderr, exit 2.

    \b
    Example:
        eosfix explain ./my-model
    """
    from eosfix.render.explain import render_explain, result_explain_dict
    from eosfix.targets.check import check_text

    _note_shadowed([path])
    checked = check_text(path, keep_ids=keep_ids, pins=pins)
    for line in checked.lines:
        click.echo(line, err=True)
    result = checked.main  # a GGUF repo: its worst group
    report = Report([result])
    if fmt == "json":
        import json

        click.echo(json.dumps(result_explain_dict(result), indent=2, ensure_ascii=False))
    elif result.error is not None:
        click.echo(error_line(result.error), err=True)
    else:
        click.echo(render_explain(result))
    sys.exit(report.exit_code)
