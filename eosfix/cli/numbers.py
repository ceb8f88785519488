"""The numeric options of every command, each a click type with its bounds, in one place.

A value outside its option's range (``--timeout -1``, ``nan``, ``inf``, ``0``; a port of
70000; a token id past 32 bits) is a usage error, exit 2, said in one line naming the option,
never a failure later on (an internal error, a connection that cannot be made).
"""

from __future__ import annotations

import math
from typing import IO, Any

import click

from eosfix.core.models import MAX_TOKEN_ID


class OutOfRange(click.BadParameter):
    """A number outside its option's range: one line, ``error: --timeout: ...``."""

    def show(self, file: IO[Any] | None = None) -> None:
        name = self.param.opts[0] if self.param is not None and self.param.opts else "value"
        click.echo(f"error: {name}: {self.message}", err=True, file=file)


class Number(click.ParamType):
    """An int or a float between ``low`` and ``high`` (``low_open``: ``low`` itself is out);
    ``what`` names what the number is, for the message (``a number of seconds``)."""

    def __init__(
        self, kind: type, low: float, high: float, what: str, *, low_open: bool = False
    ) -> None:
        self.kind, self.low, self.high, self.what, self.low_open = kind, low, high, what, low_open
        self.name = "integer" if kind is int else "float"

    @property
    def bounds(self) -> str:
        if self.low_open:
            return f"more than {self.low} and at most {self.high}"
        return f"from {self.low} to {self.high}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number: float | None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = value if isinstance(value, self.kind) else _parse(self.kind, str(value))
        else:
            text = str(value).strip()
            # int() of a huge string is slow and limited: anything this long is out of range
            number = None if len(text) > 40 else _parse(self.kind, text)
        shown = value if len(str(value)) <= 40 else f"{str(value)[:12]}...({len(str(value))} chars)"
        if number is None or not math.isfinite(number):
            raise OutOfRange(f"{shown!r} is not {self.what} ({self.bounds})", ctx, param)
        below = number <= self.low if self.low_open else number < self.low
        if below or number > self.high:
            raise OutOfRange(f"{shown} is not {self.what} ({self.bounds})", ctx, param)
        return number

    def __repr__(self) -> str:
        return f"Number({self.what}: {self.bounds})"


def _parse(kind: type, text: str) -> float | None:
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        return None


TOKEN_ID = Number(int, 0, MAX_TOKEN_ID, "a token id")
LIMIT = Number(int, 1, 10_000_000, "a number of repos")
MAX_PRS = Number(int, 0, 10_000_000, "a number of pull requests")
WORKERS = Number(int, 1, 64, "a number of requests in flight")
TIMEOUT = Number(float, 0, 3600, "a number of seconds", low_open=True)
PORT = Number(int, 1, 65535, "a TCP port")
