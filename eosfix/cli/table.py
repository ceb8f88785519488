"""The batch table on a terminal: each row printed as its repo finishes, in order, within the
terminal's width, every cell wrapped where a reader expects a break and never inside a token.

A streamed table cannot wait for its widest cell, so the widths are chosen before the first
row, from the terminal's width: each column gets room for what eosfix writes in it (a
commit's 8 characters and its branch, a turn token, a list of ids, a verdict) and the repo
column the rest. A cell wraps at its spaces; a repo id after its ``/``, then after a ``-``
or ``_`` of its name (or a ``.`` before a letter: ``3.1`` stays whole); a path or URL after
a ``/``; a turn token stays whole, and so does a token id. A row holding a piece wider than
its column (a long token, a pull request column that was not there) lays the table out
again with room for it, and the header is printed again above that row. Only a piece wider
than the terminal allows is folded.

Piped output is not this table: it is the whole table, printed at the end
(``eosfix.cli.batch.print_table``), byte for byte as it always was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eosfix.batch.run import Row

REPO, WORDS, TOKENS = "repo", "words", "tokens"  # how a column's cells break


@dataclass(frozen=True)
class Column:
    header: str
    kind: str  # REPO, WORDS or TOKENS
    least: int  # its width on a narrow terminal
    cell: Callable[[Row], str]


def _verdict_cell(row: Row) -> str:
    from eosfix.render.batch import verdict_words

    return verdict_words(row.verdict, row.problem) + row.note


COLUMNS = (
    Column("repo", REPO, 16, lambda r: r.repo_id),
    Column("revision", WORDS, 8, lambda r: r.revision),  # "1a2b3c4d (main)": 8, then 15
    Column("ends a turn", TOKENS, 16, lambda r: r.terminators),  # "### Instruction:"
    Column("stops on", WORDS, 12, lambda r: r.eos),  # "(from config.json text_config)"
    Column("verdict", WORDS, 11, _verdict_cell),  # "runs on and stops early ->"
)
PR = Column("pull request", WORDS, 12, lambda r: r.pr)  # "opened (#3)", its header
VERDICT = 4  # the verdict's column: styled, and given the width left over
# Room beyond the least, in this order, as the terminal allows: a repo id of 24 characters,
# then every column's usual content on one line, then a repo id of 40; the rest goes to the
# verdict (notes and errors are the longest cells).
GROW = (("repo", 24), ("revision", 15), ("ends a turn", 17), ("stops on", 16), ("verdict", 27),
        ("pull request", 20), ("repo", 40))  # fmt: skip
SMALLEST = 4  # a column is never narrower, however narrow the terminal


def _shown(text: str) -> str:
    """A cell's text as a terminal shows it safely: what is not printable (a tab, an escape
    from a repo's token) as its escape, so nothing from a repo moves the cursor."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _cell_lines(text: str) -> list[str]:
    """A cell's own lines (a terminator each), as a terminal shows them safely."""
    return [_shown(line) for line in text.split("\n")]


_ID_BREAK = re.compile(r"(?<=[-_])|(?<=\.)(?=[^\W\d])")  # after - or _, a . before a letter
_PATH_BREAK = re.compile(r"(?<=/)(?=.)")  # after a / (a path, a URL, refs/pr/1)
_TOKEN_ID = re.compile(r"(.*\S) (\d+)")  # "<|im_end|> 151645", "### Instruction: 7"


def pieces(kind: str, line: str) -> list[str]:
    """The pieces one line of a cell may be broken between (joined by a space, but a repo
    id's, joined by nothing)."""
    if kind == REPO:
        org, slash, name = line.partition("/")
        return [org + slash, *_ID_BREAK.split(name)] if slash else _ID_BREAK.split(line)
    if kind == TOKENS:
        m = _TOKEN_ID.fullmatch(line)
        return [m[1], m[2]] if m else [line]
    return line.split(" ")


def _parts(kind: str, piece: str) -> list[str]:
    """Where a word wider than its column may still break: a path after its ``/``."""
    return _PATH_BREAK.split(piece) if kind == WORDS else [piece]


def need(kind: str, text: str) -> int:
    """The width below which a cell's text would have to be cut inside a piece."""
    from rich.cells import cell_len

    return max(
        (
            cell_len(part)
            for line in _cell_lines(text)
            for piece in pieces(kind, line)
            for part in _parts(kind, piece)
        ),
        default=0,
    )


def _fold(text: str, width: int) -> list[str]:
    """``text`` cut into lines of ``width`` cells: only for a piece wider than its column."""
    from rich.cells import cell_len

    lines, line = [], ""
    for c in text:
        if line and cell_len(line + c) > width:
            lines.append(line)
            line = ""
        line += c
    return [*lines, line]


def wrap(kind: str, text: str, width: int) -> list[str]:
    """A cell's lines in ``width`` cells (see the module)."""
    from rich.cells import cell_len

    out: list[str] = []
    for line in _cell_lines(text):
        if cell_len(line) <= width:
            out.append(line)
            continue
        glue = "" if kind == REPO else " "
        chunks = pieces(kind, line)
        if kind == REPO and chunks[0].endswith("/"):  # org/ on a line of its own first
            out += wrap(WORDS, chunks[0], width) if cell_len(chunks[0]) > width else [chunks[0]]
            chunks, glue = chunks[1:], ""
        current: str | None = None
        for chunk in chunks:
            joined = chunk if current is None else current + glue + chunk
            if cell_len(joined) <= width:
                current = joined
                continue
            if current is not None:
                out.append(current)
            current = None
            for part in _parts(kind, chunk):
                joined = part if current is None else current + part
                if cell_len(joined) <= width:
                    current = joined
                    continue
                if current is not None:
                    out.append(current)
                *whole, current = _fold(part, width) if cell_len(part) > width else [part]
                out += whole
        if current is not None:
            out.append(current)
    return out or [""]


def allocate(room: int, columns: Sequence[Column], needs: Sequence[int]) -> list[int]:
    """Widths summing to ``room`` (more only when even ``SMALLEST`` does not fit): each
    column its least and what its cells so far need, then ``GROW`` in order, the rest to
    the verdict. On a terminal too narrow for that, the widest shrink first: the columns of
    words down to what their cells so far need (the tokens' column keeps room for the
    tokens to come), then every column so, then below (their widest pieces folded) only
    when that is not enough."""
    widths = [max(c.least, n) for c, n in zip(columns, needs, strict=True)]
    words_first = [
        w if c.kind == TOKENS else n for c, w, n in zip(columns, widths, needs, strict=True)
    ]
    for floors in (words_first, needs, [SMALLEST] * len(widths)):
        while sum(widths) > room:
            above = [i for i, w in enumerate(widths) if w > max(floors[i], SMALLEST)]
            if not above:
                break
            widest = max(above, key=lambda i: widths[i])
            widths[widest] -= 1
    extra = room - sum(widths)
    names = [c.header for c in columns]
    for name, width in GROW:
        if extra <= 0:
            break
        if name in names:
            i = names.index(name)
            grow = min(extra, max(0, width - widths[i]))
            widths[i] += grow
            extra -= grow
    widths[VERDICT] += max(0, extra)
    return widths


class TermTable:
    """The table for a terminal, a row at a time: ``add(row)`` gives the lines to print
    (the header first, and again whenever the table is laid out anew). ``console``: the
    rich console of stdout (its width, and how it styles)."""

    def __init__(self, console: Any, *, with_pr: bool = False) -> None:
        self.console = console
        self.columns = (*COLUMNS, PR) if with_pr else COLUMNS
        self.needs = [need(WORDS, c.header) for c in self.columns]
        self.widths: list[int] | None = None
        self._styles: dict[str, tuple[str, str]] = {}

    @property
    def room(self) -> int:
        """The cells' room: the width less " " before, " │ " between, the last cell's pad."""
        return self.console.width - 3 * len(self.columns) + 1

    def add(self, row: Row) -> str:
        """The lines that print ``row`` (with the header before it when it lays the table
        out, first or anew), without a final newline."""
        lines: list[str] = []
        if row.pr and PR not in self.columns:
            self.columns = (*self.columns, PR)
            self.needs.append(need(WORDS, PR.header))
            self.widths = None
        cells = [c.cell(row) for c in self.columns]
        grown = False
        for i, (column, cell) in enumerate(zip(self.columns, cells, strict=True)):
            width = need(column.kind, cell)
            if width > self.needs[i]:
                self.needs[i] = width
                grown = grown or (self.widths is not None and width > self.widths[i])
        if self.widths is None or grown:
            self.widths = allocate(self.room, self.columns, self.needs)
            lines += self._header()
        lines += self._row(row, cells)
        return "\n".join(lines)

    def _style(self, style: str) -> tuple[str, str]:
        from eosfix.cli.batch import ansi

        return ansi(self.console, style, self._styles)

    def _header(self) -> list[str]:
        assert self.widths is not None
        on, off = self._style("bold")
        cells = [wrap(WORDS, c.header, w) for c, w in zip(self.columns, self.widths, strict=True)]
        lines = self._lines(cells, " ┃ ", lambda i, text: on + text + off if text else text)
        rule = "╇".join("━" * (w + 2) for w in self.widths)
        return [*lines, rule]

    def _row(self, row: Row, cells: Sequence[str]) -> list[str]:
        from eosfix.cli.batch import STYLE
        from eosfix.render.batch import verdict_words

        assert self.widths is not None
        wrapped = [
            wrap(c.kind, cell, w)
            for c, cell, w in zip(self.columns, cells, self.widths, strict=True)
        ]
        on, off = self._style(STYLE[row.verdict])
        words = len(_shown(verdict_words(row.verdict, row.problem)))
        styled = _styled_prefix("\n".join(_cell_lines(cells[VERDICT])), wrapped[VERDICT], words)

        def paint(i: int, text: str) -> str:
            if i != VERDICT or not text:
                return text
            n = styled.pop(0) if styled else 0
            return (on + text[:n] + off + text[n:]) if n else text

        return self._lines(wrapped, " │ ", paint)

    def _lines(
        self, cells: Sequence[list[str]], sep: str, paint: Callable[[int, str], str]
    ) -> list[str]:
        """The lines of one row of cells, each cell padded to its width (styles on the text
        only), no line ending in blanks."""
        from rich.cells import cell_len

        assert self.widths is not None
        height = max(len(c) for c in cells)
        out = []
        for n in range(height):
            parts = []
            for i, (lines, width) in enumerate(zip(cells, self.widths, strict=True)):
                text = lines[n] if n < len(lines) else ""
                parts.append(paint(i, text) + " " * (width - cell_len(text)))
            out.append((" " + sep.join(parts)).rstrip(" "))
        return out


def _styled_prefix(text: str, lines: Sequence[str], words: int) -> list[int]:
    """For each wrapped line of ``text``, how many of its characters fall in the first
    ``words`` characters of ``text`` (the verdict's words, which are styled; its note is
    not). The lines are ``text`` in order, less the spaces and line breaks they were broken
    at."""
    out, at = [], 0
    for line in lines:
        found = text.find(line, at) if line else at
        at = found if found >= 0 else at
        out.append(max(0, min(len(line), words - at)))
        at += len(line)
    return out
