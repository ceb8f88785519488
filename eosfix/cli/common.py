"""What every command shares: the options, and how results are emitted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from eosfix.cli.numbers import TOKEN_ID
from eosfix.core.errors import NotChecked
from eosfix.render.report import LOCATED, RENDERER_BY_NAME, Report


def emit(results: list[Any], report: Report, fmt: str, *, err: bool = False, **kwargs: Any) -> None:
    """Results to stdout (``err``: stderr); in text mode each repo not checked is one line
    on stderr. GitHub annotations and SARIF get each finding's file and line, and the
    summary on stderr."""
    if fmt == "text":
        for r in results:
            if r.error is not None:
                click.echo(error_line(r.error), err=True)
    if fmt in LOCATED:
        from eosfix.cli.locate import locate_all

        kwargs["locations"] = locate_all(results, Path.cwd())
    text = RENDERER_BY_NAME[fmt](results, report, **kwargs)
    if text or fmt != "github":  # no annotation at all: no blank line either
        click.echo(text, err=err)
    if fmt in LOCATED:
        click.echo(
            report.summary(
                fixing=kwargs.get("fixing", False), dry_run=kwargs.get("dry_run", False)
            ),
            err=True,
        )


def error_line(error: Exception) -> str:
    """``path: not checked: reason`` for a path eosfix does not check, else ``error: ...``."""
    if isinstance(error, NotChecked) and error.path is not None:
        return f"{error.path}: {click.style('not checked', fg='red', bold=True)}: {error.message}"
    return f"{click.style('error', fg='red', bold=True)}: {error}"


def fix_flags(
    config_json: bool, pins: dict[str, str], keep_ids: Sequence[int] = ()
) -> tuple[str, ...]:
    """The options that change what ``fix`` writes or how it is judged, to keep in a hint."""
    flags = ["--config-json"] if config_json else []
    for name, version in pins.items():
        flags += ["--runtime", f"{name}=={version}"]
    for token_id in keep_ids:
        flags += ["--keep-id", str(token_id)]
    return tuple(flags)


format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(RENDERER_BY_NAME)),
    default="text",
    show_default=True,
    help="text for people, json for scripts, github for workflow annotations (::error "
    "file=...,line=...), sarif for code scanning (SARIF 2.1.0).",
)


def _parse_runtime_pins(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    from eosfix.runtimes import parse_pins

    try:
        return parse_pins(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


runtime_option = click.option(
    "--runtime",
    "pins",
    multiple=True,
    metavar="NAME==VERSION",
    callback=_parse_runtime_pins,
    help="Judge a runtime by its rule for this version, e.g. mlx-lm==0.31.3 (repeatable; "
    "transformers, mlx-lm, mlx-vlm). Default: each runtime's current rule.",
)
keep_id_option = click.option(
    "--keep-id",
    "keep_ids",
    multiple=True,
    type=TOKEN_ID,
    metavar="ID",
    help="Keep this stop id even where eosfix finds it cuts a reply or is no token "
    "(EOS011-EOS013 become warnings; repeatable).",
)
token_option = click.option(  # hub and upload
    "--token",
    default=None,
    metavar="TOKEN",
    help="Hub token (default: the one huggingface_hub finds: HF_TOKEN or `hf auth login`). "
    "Never printed.",
)
_CONFIG_READERS = "candle, ExLlamaV2 and mlx-lm before 0.30.2, which read only config.json"
config_check_option = click.option(
    "--config-json/--no-config-json",
    default=False,
    help=f"Plan the fix with config.json's eos_token_id too, as fix --config-json would write "
    f"it ({_CONFIG_READERS}); nothing is written.",
)
config_fix_option = click.option(
    "--config-json/--no-config-json",
    default=False,
    help=f"Also write config.json's eos_token_id ({_CONFIG_READERS}).",
)
strict_option = click.option(
    "--strict/--no-strict",
    default=False,
    help="Warnings fail too (exit 1): a stop string needed (EOS005), an id that cannot be "
    "checked (EOS007)... Without it, warnings alone exit 0. --no-strict undoes strict = true "
    "of [tool.eosfix].",
)
quiet_option = click.option(
    "-q",
    "--quiet/--no-quiet",
    default=False,
    help="Print only repos with something to fix, a problem or a warning, then the summary "
    "(for pre-commit and CI).",
)
