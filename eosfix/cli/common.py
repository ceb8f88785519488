"""What every command shares: the options, the paths a user gives, how results are emitted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from eosfix.errors import EosfixError
from eosfix.report import RENDERER_BY_NAME, Report

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


def _is_repo_folder(path: Path) -> bool:
    """A folder holding a model repo's own files (not only GGUFs)."""
    return any((path / name).exists() for name in _CONFIG_NAMES)


def repo_dirs(paths: Sequence[str]) -> list[Path]:
    """What to analyze: model folders and GGUF files.

    A folder as given, plus every ``*.gguf`` under it (a llama.cpp or LM Studio models
    folder); a folder holding only GGUFs stands for its GGUFs. A ``.gguf`` file as given (a
    later shard of a split means its first shard). Any other file (from pre-commit) means
    its folder when it is a model config file; other files are ignored.
    """
    from eosfix.sources.gguf import first_shard, iter_gguf_files

    out: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise click.UsageError(f"{raw}: no such file or directory")
        if path.is_dir():
            ggufs = list(iter_gguf_files(path))
            if not ggufs or _is_repo_folder(path):
                out[path] = None
            out.update(dict.fromkeys(ggufs))
        elif path.suffix.lower() == ".gguf":
            try:
                out[first_shard(path)] = None
            except EosfixError:
                out[path] = None  # the missing first shard is reported when it is loaded
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


def _parse_runtime_pins(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    from eosfix.runtimes import parse_pins

    try:
        return parse_pins(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


_runtime_option = click.option(
    "--runtime",
    "pins",
    multiple=True,
    metavar="NAME==VERSION",
    callback=_parse_runtime_pins,
    help="Judge a runtime by its rule for this version, e.g. mlx-lm==0.31.3 (repeatable; "
    "transformers, mlx-lm, mlx-vlm). Default: each runtime's current rule.",
)
_config_option = click.option(
    "--config-json",
    is_flag=True,
    help="Also write config.json's eos_token_id (for candle, ExLlamaV2 and mlx-lm before 0.30.2, "
    "which read only config.json).",
)
