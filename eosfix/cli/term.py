"""What the terminal allows: colour (``--color``, ``NO_COLOR``, ``TERM=dumb``), progress bars,
output that survives a closed pipe (``eosfix check ... | head``), and no control sequence
but eosfix's own colours (``shown``).

Colour: ``--color always|never`` wins; otherwise ``NO_COLOR`` (set and not empty, as
https://no-color.org asks) or ``TERM=dumb`` turn it off, and ``auto`` colours only a
terminal (click strips the styles from anything else).
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
from typing import Any, TextIO

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


# --- what reaches the terminal ------------------------------------------------------------------

# Characters a terminal acts on rather than shows: C0 controls but tab and newline (a carriage
# return rewrites the line), DEL, C1 controls (0x9b is an 8-bit CSI) and the marks that reorder
# text (bidirectional overrides and isolates). A repo's text (a token, a template's name, a
# file's) can hold any of them.
_ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The colours eosfix writes itself (click.style, rich's named colours): bold, dim, italic,
# underline, their resets, the foreground colours but black. Never a cursor move, a title, a
# link, the clipboard, hidden text or a background.
_SGR_PARAM = r"(?:0|1|2|3|4|22|23|24|39|3[1-7]|9[1-7])"
_OWN_STYLE = re.compile(rf"\x1b\[(?:{_SGR_PARAM}(?:;{_SGR_PARAM})*)?m")


def shown(text: str) -> str:
    """``text`` as a terminal may print it: every character it would act on written as its
    escape (``_escape``), but the colours eosfix writes itself."""
    if not _ACTS.search(text):
        return text
    out: list[str] = []
    pos = 0
    for style in _OWN_STYLE.finditer(text):
        out.append(_ACTS.sub(_escape, text[pos : style.start()]))
        out.append(style.group())
        pos = style.end()
    out.append(_ACTS.sub(_escape, text[pos:]))
    return "".join(out)


def _escape(m: re.Match[str]) -> str:
    """A C0 control as ``\\x1b``; any other as ``\\u202e``, which is also JSON's escape of
    it (json.dumps writes C0 controls escaped but these as they are)."""
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x20 else f"\\u{c:04x}"


class _Shown:
    """A text stream whose writes go out ``shown``; everything else is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.unshown = stream

    def write(self, s: Any) -> int:
        if isinstance(s, str):
            self.unshown.write(shown(s))
            return len(s)
        return self.unshown.write(s)  # as the stream would (a str stream refuses bytes)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unshown, name)


def show_only_own_styles() -> None:
    """From now on, whatever this process writes as text to stdout and stderr goes out
    ``shown``: a repo cannot move the cursor, set the title, write the clipboard or hide a
    line through eosfix's output. Bytes (``render --format raw``) go out as they are."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _Shown):
            setattr(sys, name, _Shown(stream))


def echo_file_text(text: str) -> None:
    """Files' text (a patch) on stdout: as the files have it where it goes to another program
    (``| git apply``: a CRLF line keeps its carriage return), ``shown`` on a terminal."""
    stream = sys.stdout if sys.stdout.isatty() else unshown(sys.stdout)
    stream.write(text)
    stream.flush()


def unshown(stream: Any) -> Any:
    """The stream under ``show_only_own_styles``'s: where a progress bar draws itself
    (cursor moves and all); what it writes from a repo is ``shown`` first."""
    return stream.unshown if isinstance(stream, _Shown) else stream
