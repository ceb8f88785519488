"""`eosfix cache`: check (and fix) every model in the local Hugging Face cache."""

from __future__ import annotations

import sys
from typing import Any

import click

from eosfix.report import EXIT_INPUT, summary_parts
from eosfix.sources import cache as cachelib

_STYLE = {
    "fixed": "bold green",
    "fixable": "bold red",
    "problems": "bold red",
    "warned": "yellow",
    "ok": "green",
    "no_template": "dim",
    "error": "bold red",
}
_VERDICT_TEXT = {
    "fixed": "fixed",
    "fixable": "won't stop",
    "problems": "problems (not fixable)",
    "warned": "ok, with warnings",
    "ok": "ok",
    "no_template": "no chat template",
    "error": "error",
}


class _RichProgress(cachelib.Progress):
    """A transient progress bar on stderr."""

    wants_total = True

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.task: Any = None

    def start(self, stage: str, total: int | None) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(stage, total=total)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)


def summary_line(run: cachelib.CacheRun) -> str:
    counts = run.counts()
    fixable = "fixable" if run.fixing else "would be fixed (run with --fix)"
    parts = summary_parts(counts, fixable=fixable, ok="stop correctly")
    repos, n = run.repos, run.snapshots
    head = f"{n} snapshot{'s' * (n != 1)} of {repos} repo{'s' * (repos != 1)}"
    body = ", ".join(f"{k} {what}" for k, what in parts) or "nothing to check"
    k = len(run.corrupted)
    tail = f"; {k} corrupted repo{'s' * (k != 1)} skipped" if k else ""
    return f"{head}: {body}{tail}"


_HEADERS = ("repo", "revision", "ends a turn", "stops on", "verdict")
CHUNK = 200  # rows rendered at once: a rich Table of 5,000 rows would take ~30 MB


def _cells(row: cachelib.Row) -> tuple[str, str, str, str, str]:
    return (
        row.repo_id,
        row.revision,
        row.terminators,
        row.eos,
        _VERDICT_TEXT[row.verdict] + row.note,
    )


def _widths(rows: list[cachelib.Row], width: int) -> list[int]:
    """One width per column for every chunk of the table, fitting ``width`` columns of
    the console (the widest columns shrink and fold)."""
    from rich.cells import cell_len

    widths = [cell_len(h) for h in _HEADERS]
    for row in rows:
        for i, cell in enumerate(_cells(row)):
            widths[i] = max(widths[i], *(cell_len(line) for line in cell.split("\n")))
    room = width - 3 * len(widths) + 1  # " x │ y " without outer edges: 3 per column, less 1
    while sum(widths) > room and max(widths) > 8:
        widths[widths.index(max(widths))] -= 1
    return widths


def _render_text(run: cachelib.CacheRun) -> None:
    """The table, CHUNK rows at a time, each chunk a rich Table with the same column widths
    and no outer edge: they print as one table, and memory does not grow with the rows."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:  # piped: no wrapping at 80 columns
        console.width = 200
    rows = run.results
    widths = _widths(rows, console.width) if rows else []
    for start in range(0, len(rows), CHUNK):
        table = Table(show_header=start == 0, show_edge=False, header_style="bold")
        for name, width in zip(_HEADERS, widths, strict=True):
            table.add_column(name, width=width, overflow="fold")
        for row in rows[start : start + CHUNK]:
            verdict = Text(_VERDICT_TEXT[row.verdict], style=_STYLE[row.verdict])
            verdict.append(row.note)
            table.add_row(
                Text(row.repo_id), Text(row.revision), Text(row.terminators), Text(row.eos), verdict
            )
        console.print(table)
    for c in run.corrupted:
        console.print(
            f"[bold red]corrupted[/] {escape(c.repo_id or c.name or '?')}: "
            f"{escape(c.message)} (skipped)",
            soft_wrap=True,
        )
    console.print(escape(summary_line(run)), soft_wrap=True)


def _use_progress() -> bool:
    """The bar for the text table: on a terminal (the table prints once it is gone)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def _use_progress_json() -> bool:
    """JSON streams out as it is made: a bar on stderr only when stdout is not the terminal."""
    return sys.stderr.isatty() and not sys.stdout.isatty()


@click.command()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="The hub cache (default: HF_HUB_CACHE, else $HF_HOME/hub).",
)
@click.option(
    "--fix",
    "do_fix",
    is_flag=True,
    help="Fix every snapshot that needs it (the link is replaced, blobs stay intact).",
)
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="GLOB",
    help="Only repo ids matching this glob, e.g. 'Qwen/*' (repeatable).",
)
@click.option(
    "--revision",
    "revisions",
    multiple=True,
    metavar="REV",
    help="Only this ref ('main', 'refs/pr/1') or commit sha (repeatable; "
    "default: every cached revision).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts.",
)
def cache(
    cache_dir: str | None,
    do_fix: bool,
    repos: tuple[str, ...],
    revisions: tuple[str, ...],
    fmt: str,
) -> None:
    """Check every model in the local Hugging Face cache; --fix repairs them in place.

    Each revision is its own snapshot: a fix replaces that snapshot's link by a file and
    never touches the shared blobs, so other revisions keep their files.
    Exit 0: nothing to fix. 1: findings, or files changed. 2: unreadable or corrupted input.

    \b
    Example:
        eosfix cache
        eosfix cache --repo 'Qwen/*' --revision main --fix
    """
    root = cache_dir if cache_dir is not None else cachelib.default_cache_dir()
    try:
        scan = cachelib.select(cachelib.scan_cache(root), repos, revisions)
    except cachelib.CacheError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    json_out = fmt == "json"
    show = _use_progress_json() if json_out else _use_progress()

    def go(progress: cachelib.Progress | None) -> cachelib.CacheRun:
        run = cachelib.CacheRun(
            scan, fix=do_fix, detail=json_out, progress=progress, keep_rows=not json_out
        )
        if json_out:
            cachelib.write_json(run, sys.stdout)
        else:
            run.drain()
        return run

    try:
        if show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True),
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            ) as bar:
                run = go(_RichProgress(bar))
        else:
            run = go(None)
    except cachelib.CacheError as exc:  # only a huggingface_hub without the per-repo scanner
        sys.stdout.flush()
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    if not json_out:
        _render_text(run)
    sys.stdout.flush()
    sys.exit(run.exit_code)
