"""What `eosfix cache` and `eosfix hub` share: the formats, Ctrl-C, and the table.

On a terminal the table is printed a row at a time as repos finish (``eosfix.cli.table``),
above the progress bar (``eosfix.cli.live``); piped, it is printed whole at the end
(``print_table``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

import click

from eosfix.batch.run import Row, Run
from eosfix.cli.term import colors_on, progress_allowed
from eosfix.render.batch import Digest, verdict_words, write_csv, write_json, write_markdown

STYLE = {
    "fixed": "bold green",
    "fixable": "bold red",
    "problems": "bold red",
    "warned": "yellow",
    "ok": "green",
    "no_template": "dim",
    "not_a_model": "dim",
    "error": "bold red",
}
HEADERS = ("repo", "revision", "ends a turn", "stops on", "verdict")
CHUNK = 200  # rows rendered at once: a rich Table of 5,000 rows would take ~30 MB
FORMATS = ("text", "json", "csv", "markdown")

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text: a table for people; json (streamed), csv, markdown (a table to paste into an "
    "issue) for scripts and reports.",
)


def table_streams() -> bool:
    """The text table is printed a row at a time, as each repo finishes, when stdout is a
    terminal (``eosfix.cli.table``); piped, whole at the end (``print_table``)."""
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty())


def wants_progress(fmt: str) -> bool:
    """A bar on stderr: for the text table on a terminal (its rows print above it); for the
    streamed formats only when stdout is not the terminal they stream to. Never
    with NO_COLOR, TERM=dumb or --color never (``term.progress_allowed``)."""
    if not progress_allowed(sys.stderr):
        return False
    return sys.stdout.isatty() if fmt == "text" else not sys.stdout.isatty()


STOPPING = b"stopping: finishing what is in progress (Ctrl-C again to stop at once)\n"


@contextlib.contextmanager
def stoppable(run: Run) -> Iterator[None]:
    """While the block runs, the first Ctrl-C stops the run early but whole (``Run.stop``:
    what is in flight finishes and is reported, every output stays whole); a second one
    raises KeyboardInterrupt, which stops at once. Only from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if run.interrupted:
            raise KeyboardInterrupt
        run.stop()
        with contextlib.suppress(OSError):
            os.write(2, STOPPING)  # raw: the handler may run inside a write to stderr

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def stream(run: Run, fmt: str, summary: Callable[[], str], *, digest: bool = False) -> None:
    """Write a run in a streamed format (json, csv, markdown) to stdout as it is made;
    ``digest``: the Markdown ends with the published report's sections (``Digest``)."""
    if fmt == "json":
        write_json(run, sys.stdout)
    elif fmt == "csv":
        write_csv(run, sys.stdout)
    else:
        write_markdown(run, sys.stdout, summary, Digest() if digest else None)


def _cells(row: Row, with_pr: bool) -> tuple[str, ...]:
    cells = (
        row.repo_id,
        row.revision,
        row.terminators,
        row.eos,
        verdict_words(row.verdict, row.problem) + row.note,
    )
    return (*cells, row.pr) if with_pr else cells


REPO_FLOOR = 40  # the repo column keeps room for its longest org or name, up to this...


def _widths(rows: Sequence[Row], headers: Sequence[str], width: int, with_pr: bool) -> list[int]:
    """One width per column for every chunk of the table, fitting ``width`` columns of
    the console (the widest columns shrink and fold; the repo column keeps room for the
    longest org or name, so an id is broken only at its ``/``)."""
    from rich.cells import cell_len

    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(_cells(row, with_pr)):
            widths[i] = max(widths[i], *(cell_len(line) for line in cell.split("\n")))
    room = width - 3 * len(widths) + 1  # " x │ y " without outer edges: 3 per column, less 1
    parts = [cell_len(p) for row in rows for p in _id_parts(row.repo_id)]
    repo_floor = min(max(parts, default=8), REPO_FLOOR, max(12, room // 3))  # ...and a third
    floors = [repo_floor, *(8 for _ in widths[1:])]
    while sum(widths) > room:
        shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def _id_parts(repo_id: str) -> list[str]:
    """``org/name`` as the pieces it may be broken into: ``org/`` and ``name``."""
    org, slash, name = repo_id.partition("/")
    return [org + slash, name] if slash else [repo_id]


def fit_repo_id(repo_id: str, width: int) -> str:
    """A repo id in ``width`` cells: whole, else broken after its ``/``; a piece still too
    wide ends with an ellipsis. Never broken mid-word."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(repo_id) <= width:
        return repo_id
    return "\n".join(
        p if cell_len(p) <= width else set_cell_size(p, width - 1) + "…" for p in _id_parts(repo_id)
    )


def print_table(rows: Sequence[Row], console: Any) -> None:
    """The table, CHUNK rows at a time, each chunk a rich Table with the same column widths
    and no outer edge: they print as one table, and memory does not grow with the rows. No
    line ends in the padding of its last cell (piped output is not 200 columns of blanks).
    The pull request column says what happened ("opened (#3)"); the URLs are printed after
    the table by the caller, each once and whole."""
    from rich.table import Table
    from rich.text import Text

    with_pr = any(row.pr for row in rows)
    headers = (*HEADERS, "pull request") if with_pr else HEADERS
    widths = _widths(rows, headers, console.width, with_pr) if rows else []
    styles: dict[str, tuple[str, str]] = {}
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        plain = _lines_by_hand(chunk, headers, widths, start == 0, with_pr, console, styles)
        if plain is not None:
            console.file.write(plain)
            continue
        table = Table(show_header=start == 0, show_edge=False, header_style="bold")
        for i, (name, width) in enumerate(zip(headers, widths, strict=True)):
            table.add_column(name, width=width, overflow="ellipsis" if i == 0 else "fold")
        for row in chunk:
            words = verdict_words(row.verdict, row.problem)
            verdict = Text(words, style=STYLE[row.verdict])
            verdict.append(row.note)
            repo = Text(fit_repo_id(row.repo_id, widths[0]), no_wrap=True)
            cells = [repo, Text(row.revision), Text(row.terminators), Text(row.eos)]
            table.add_row(*cells, verdict, *([Text(row.pr)] if with_pr else []))
        with console.capture() as captured:
            console.print(table)
        lines = captured.get().splitlines()
        console.file.write("".join(line.rstrip(" ") + "\n" for line in lines))


def ansi(console: Any, style: str, cache: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """What ``console`` writes before and after a text in ``style`` (``("", "")`` when it
    styles nothing): asked of rich itself, once per style."""
    if style not in cache:
        from rich.text import Text

        with console.capture() as captured:
            console.print(Text("\ue000", style=style), end="")
        before, _, after = captured.get().partition("\ue000")
        cache[style] = (before, after)
    return cache[style]


def _lines_by_hand(
    rows: Sequence[Row],
    headers: Sequence[str],
    widths: Sequence[int],
    header: bool,
    with_pr: bool,
    console: Any,
    styles: dict[str, tuple[str, str]],
) -> str | None:
    """The lines rich's Table prints for these rows (``print_table``'s table, trailing blanks
    cut), written directly: rich lays out every cell of every row, ~0.25 ms a row, the
    largest cost of a 10,000-row table. Only when every cell is printable text on one line
    within its column's width, so nothing wraps, folds or is cut; None otherwise (rich
    prints that chunk). tests/render/test_text.py holds it byte-equal to rich's output."""
    from rich.cells import cell_len

    def fits(text: str, width: int) -> bool:
        return text.isprintable() and cell_len(text) <= width

    def pad(text: str, width: int) -> str:
        return text + " " * (width - cell_len(text))

    out: list[str] = []
    if header:
        if not all(fits(h, w) for h, w in zip(headers, widths, strict=True)):
            return None
        on, off = ansi(console, "bold", styles)
        gap = f"{on} {off}"
        line = "┃".join(
            f"{gap}{on}{pad(h, w)}{off}{gap}" for h, w in zip(headers, widths, strict=True)
        )
        out.append(line.rstrip(" ") + "\n")
        out.append("╇".join("━" * (w + 2) for w in widths) + "\n")
    for row in rows:
        cells = _cells(row, with_pr)
        if not all(fits(c, w) for c, w in zip(cells, widths, strict=True)):
            return None
        on, off = ansi(console, STYLE[row.verdict], styles)
        parts = [pad(c, w) for c, w in zip(cells, widths, strict=True)]
        parts[4] = on + parts[4] + off
        out.append((" " + " │ ".join(parts)).rstrip(" ") + "\n")
    return "".join(out)


def stdout_console() -> Any:
    """A rich console on stdout that styles exactly when click would (``--color``, NO_COLOR,
    TERM=dumb, a terminal)."""
    from rich.console import Console

    styled = colors_on(sys.stdout)
    console = Console(
        file=sys.stdout,
        highlight=False,
        force_terminal=styled,
        color_system="auto" if styled else None,
        no_color=not styled,
    )
    if not sys.stdout.isatty():  # piped: no wrapping at 80 columns
        console.width = 200
    return console
