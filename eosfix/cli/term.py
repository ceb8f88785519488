"""What the terminal allows: colour (``--color``, ``NO_COLOR``, ``TERM=dumb``), progress bars,
and output that survives a closed pipe (``eosfix check ... | head``).

Colour: ``--color always|never`` wins; otherwise ``NO_COLOR`` (set and not empty, as
https://no-color.org asks) or ``TERM=dumb`` turn it off, and ``auto`` colours only a
terminal (click strips the styles from anything else).
"""

from __future__ import annotations

import io
import os
import stat
import sys

import click

COLOR_CHOICES = ("auto", "always", "never")


def env_forbids_style() -> bool:
    """NO_COLOR set (non-empty) or a dumb terminal: no colour, no progress bar."""
    return bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"


def color_setting(choice: str | None) -> bool | None:
    """click's ``Context.color``: True (always), False (never), None (auto: a terminal)."""
    if choice == "always":
        return True
    if choice == "never" or env_forbids_style():
        return False
    return None


def _set_color(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None or ctx.parent is None:
        ctx.color = color_setting(value)


color_option = click.option(
    "--color",
    type=click.Choice(COLOR_CHOICES),
    default=None,
    expose_value=False,
    is_eager=True,
    callback=_set_color,
    help="Colour the output: auto (a terminal, unless NO_COLOR is set or TERM=dumb), always, "
    "never.",
)


def colors_on(stream: object) -> bool:
    """Whether text written to ``stream`` is styled (the current command's setting)."""
    ctx = click.get_current_context(silent=True)
    setting = ctx.color if ctx is not None else color_setting(None)
    if setting is not None:
        return setting
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not env_forbids_style()


def progress_allowed(stream: object = None) -> bool:
    """A progress bar only on a terminal that allows styling (never with NO_COLOR, TERM=dumb
    or --color never)."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()) or env_forbids_style():
        return False
    ctx = click.get_current_context(silent=True)
    return ctx is None or ctx.color is not False


class _DiscardAfterEpipe(io.RawIOBase):
    """fd 1, where a closed reader (``| head``) makes further output vanish instead of raising
    BrokenPipeError: the command runs to its end and exits with its own code."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.broken = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if not self.broken:
            try:
                return os.write(self._fd, b)
            except BrokenPipeError:
                self.broken = True
        return len(b)


def survive_closed_pipe() -> None:
    """Replace sys.stdout, when it is a pipe or socket, by one that discards output once the
    reader has gone (Python ignores SIGPIPE, so a write would raise BrokenPipeError)."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test runner's capture)
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return
    old = sys.stdout
    old.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_DiscardAfterEpipe(fd)),
        encoding=old.encoding,
        errors=old.errors,
        line_buffering=bool(old.line_buffering),
    )
