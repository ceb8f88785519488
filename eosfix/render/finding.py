"""One finding as one line of text: ``path/file: CODE message``."""

from __future__ import annotations

from typing import Protocol

import click

from eosfix.core.codes import Severity


class Shown(Protocol):
    """A finding as a line shows it (a ``Finding``, a ``FindingRow``)."""

    @property
    def code(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def file(self) -> str: ...

    @property
    def message(self) -> str: ...


def finding_line(name: str, f: Shown) -> str:
    """``path/file: CODE message``, the code coloured by severity."""
    color = "red" if f.severity is Severity.ERROR else "yellow"
    where = f"{name}/{f.file}" if f.file else name
    return f"{where}: {click.style(f.code, fg=color, bold=True)} {f.message}"
