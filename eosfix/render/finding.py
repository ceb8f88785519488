"""One finding as one line of text: ``path/file: CODE message``."""

from __future__ import annotations

import click

from eosfix.core.codes import Finding, Severity


def finding_line(name: str, f: Finding) -> str:
    """``path/file: CODE message``, the code coloured by severity."""
    color = "red" if f.severity is Severity.ERROR else "yellow"
    where = f"{name}/{f.file}" if f.file else name
    return f"{where}: {click.style(f.code, fg=color, bold=True)} {f.message}"
