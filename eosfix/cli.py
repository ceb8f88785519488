"""The command line: parse, call the API, render, exit. The only module that prints or exits."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from eosfix import __version__
from eosfix.errors import EosfixError
from eosfix.report import EXIT_INPUT, EXIT_INTERNAL, RENDERER_BY_NAME, Report

_CONFIG_NAMES = {
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "chat_template.jinja",
    "chat_template.json",
    "processor_config.json",
    "added_tokens.json",
}


class LazyGroup(click.Group):
    """Subcommands in other modules are imported only when used (fast startup for `check`)."""

    lazy: dict[str, str] = {}  # noqa: RUF012 - filled at module end

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, attr = self.lazy[cmd_name].split(":")
            cmd: click.Command = getattr(importlib.import_module(module), attr)
            return cmd
        return super().get_command(ctx, cmd_name)


def repo_dirs(paths: Sequence[str]) -> list[Path]:
    """Folders to analyze: a folder as given; a file (from pre-commit) means its folder.

    Files that are not model config files are ignored, so a hook can pass any staged file.
    """
    out: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise click.UsageError(f"{raw}: no such file or directory")
        if path.is_dir():
            out[path] = None
        elif path.name in _CONFIG_NAMES or path.suffix == ".jinja":
            parent = path.parent
            if parent.name == "additional_chat_templates":
                parent = parent.parent
            out[parent] = None
    return list(out)


def _emit(results: list[Any], report: Report, fmt: str, **kwargs: Any) -> None:
    """Results to stdout; in text mode each unreadable repo is one line on stderr."""
    if fmt == "text":
        for r in results:
            if r.error is not None:
                click.echo(f"{click.style('error', fg='red', bold=True)}: {r.error}", err=True)
        results = [r for r in results if r.error is None]
    click.echo(RENDERER_BY_NAME[fmt](results, report, **kwargs))


_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(RENDERER_BY_NAME)),
    default="text",
    show_default=True,
    help="text for people, json for scripts.",
)
_config_option = click.option(
    "--config-json",
    is_flag=True,
    help="Also write config.json's eos_token_id (for candle, ExLlamaV2, old mlx-lm, which read "
    "only config.json).",
)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eosfix")
def cli() -> None:
    """Make chat models stop where they should.

    eosfix reads a model repository's chat template and tokenizer files, finds the token(s)
    that really end an assistant turn, and repairs generation_config.json so eos_token_id
    includes them.
    """


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@_format_option
@_config_option
def check(paths: tuple[str, ...], fmt: str, config_json: bool) -> None:
    """Report whether each model folder stops where its turns end (read-only).

    Exit 0: nothing to fix. 1: findings. 2: an input could not be read.

    \b
    Example:
        eosfix check ./my-model
        eosfix check ./my-model --format json
    """
    from eosfix import api

    report = Report()
    for path in repo_dirs(paths):
        report.record(api.check(path, config_json=config_json))
    _emit(report.results, report, fmt)
    sys.exit(report.exit_code)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--diff", "show_diff", is_flag=True, help="Show the unified diff; write nothing.")
@click.option("--exit-zero-even-if-changed", is_flag=True, help="Exit 0 after changing files.")
@_format_option
@_config_option
def fix(
    paths: tuple[str, ...],
    show_diff: bool,
    exit_zero_even_if_changed: bool,
    fmt: str,
    config_json: bool,
) -> None:
    """Rewrite eos_token_id so generation stops at every turn terminator.

    Minimal byte-level edit, atomic write, only when something changes; a second run
    changes nothing. Exit 1 when files changed (as pre-commit fixers do), 0 otherwise.

    \b
    Example:
        eosfix fix ./my-model --diff    # show what would change
        eosfix fix ./my-model
    """
    from eosfix import api

    report = Report()
    for path in repo_dirs(paths):
        if show_diff:
            result = api.check(path, config_json=config_json)
        else:
            result = api.fix(path, config_json=config_json)
            for name in result.written:
                click.echo(f"Fixing {path / name}", err=True)
        report.record(result)
    _emit(report.results, report, fmt, fixing=True, show_diff=show_diff, dry_run=show_diff)
    code = report.exit_code
    if exit_zero_even_if_changed and code == 1 and not show_diff:
        code = 0
    sys.exit(code)


@cli.command()
@click.argument("path", type=click.Path())
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def explain(path: str, fmt: str) -> None:
    """Explain one repo in depth: each probe rendered, each terminator with its evidence.

    Shows the rendered probes with special tokens visible, what ends a turn and why, the
    ids a hand-written generation loop must compare after each step, and which file they
    come from.

    \b
    Example:
        eosfix explain ./my-model
    """
    from eosfix import api
    from eosfix.explain import render_explain, result_explain_dict

    dirs = repo_dirs([path])
    result = api.check(dirs[0])
    report = Report([result])
    if fmt == "json":
        import json

        click.echo(json.dumps(result_explain_dict(result), indent=2, ensure_ascii=False))
    else:
        click.echo(render_explain(result))
    sys.exit(report.exit_code)


# Commands that pull in heavier modules (huggingface_hub, rich) live elsewhere.
LazyGroup.lazy = {
    "cache": "eosfix.cli_cache:cache",
    "hub": "eosfix.cli_hub:hub",
    "upload": "eosfix.cli_hub:upload",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: known errors print one line; a bug prints a hint (EOSFIX_DEBUG=1)."""
    try:
        cli.main(
            args=list(argv) if argv is not None else None, prog_name="eosfix", standalone_mode=False
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return EXIT_INPUT
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
    except EosfixError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_INPUT
    except Exception:  # noqa: BLE001 - the last resort: a bug becomes exit 3 with a hint
        if os.environ.get("EOSFIX_DEBUG"):
            traceback.print_exc()
        else:
            exc_type, exc_value, _ = sys.exc_info()
            click.echo(
                f"internal error: {exc_type.__name__ if exc_type else ''}: {exc_value}", err=True
            )
            click.echo("this is a bug in eosfix; set EOSFIX_DEBUG=1 for the traceback", err=True)
        return EXIT_INTERNAL
    return 0
