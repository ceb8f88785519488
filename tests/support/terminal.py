"""A command run on a pseudo-terminal, as a person runs it, and what the terminal shows.

``Terminal`` starts ``python -m eosfix ...`` with stdin, stdout and stderr on one
pseudo-terminal of a given size (``COLUMNS``/``LINES`` and the window size), reads what it
writes, and lets a test wait for an event in that output (a row printed, a total shown)
rather than for a window of time. ``screen(raw)`` replays the output through a small model
of a terminal (the controls rich and eosfix write: carriage return, line feed, cursor up,
erase line, colours, cursor visibility, wrapping at the right margin) and gives the lines
left on it, scrollback included.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence

from tests.conftest import ROOT

WAIT = 120.0  # seconds an event may take before the test fails (a guard, not a measure)

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


class Terminal:
    """``python -m eosfix ARGS`` on a pseudo-terminal of ``columns`` x ``lines``."""

    def __init__(
        self, args: Sequence[str], env: Mapping[str, str], *, columns: int, lines: int = 50
    ) -> None:
        self.columns = columns
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        full = {
            k: v
            for k, v in os.environ.items()
            if k not in ("NO_COLOR", "FORCE_COLOR") and not k.startswith(("HF_", "EOSFIX_"))
        }
        full.update(
            PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS=str(columns),
            LINES=str(lines), **env,
        )  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eosfix", *args],
            stdin=slave, stdout=slave, stderr=slave, env=full, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.master = master
        self.raw = b""

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def _read(self, timeout: float) -> bool:
        """Read what is there (waiting up to ``timeout``); False at the end of the output."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the other side closed: Linux says EIO
            return False
        if not data:
            return False
        self.raw += data
        return True

    def wait_for(self, seen: Callable[[str], bool], what: str) -> None:
        """Read until ``seen(output so far)``; fails the test after WAIT seconds or at the end
        of the output without it."""
        deadline = time.monotonic() + WAIT
        while not seen(self.text):
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what} in:\n{_plain(self.text)}")
            if not self._read(0.2) and not seen(self.text):
                raise AssertionError(f"the command ended without {what}:\n{_plain(self.text)}")

    def finish(self) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + WAIT
        while self._read(0.2):
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"still running after {WAIT} s:\n{_plain(self.text)}")
        code = self.proc.wait(timeout=WAIT)
        with contextlib.suppress(OSError):
            os.close(self.master)
        return code

    def screen(self) -> list[str]:
        return screen(self.text, self.columns)


def _plain(text: str) -> str:
    return _CSI.sub("", text)


def screen(raw: str, columns: int) -> list[str]:
    """The lines a terminal of ``columns`` shows after ``raw`` (scrollback included), trailing
    blanks dropped; it fails on a control it does not model."""
    lines: list[list[str]] = [[]]
    row = col = 0
    wrap_next = False
    i = 0
    while i < len(raw):
        c = raw[i]
        m = _CSI.match(raw, i)
        if m is not None:
            args, op = m.groups()
            if op == "A":
                row = max(0, row - int(args or 1))
            elif op == "K":
                assert args in ("", "0", "2"), args
                if args == "2":
                    lines[row] = []
                else:
                    del lines[row][col:]
            elif op in "mhl":
                pass  # colours, styles, cursor visibility
            else:
                raise AssertionError(f"a control this model does not know: {m.group(0)!r}")
            wrap_next = False
            i = m.end()
            continue
        assert c != "\x1b", f"an escape this model does not know: {raw[i : i + 8]!r}"
        i += 1
        if c == "\r":
            col, wrap_next = 0, False
        elif c == "\n":
            row, wrap_next = row + 1, False
            col = 0  # the pseudo-terminal turns \n into \r\n
            if row == len(lines):
                lines.append([])
        else:
            if wrap_next:  # the right margin was reached: this character starts a new line
                row, col, wrap_next = row + 1, 0, False
                if row == len(lines):
                    lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = c
            else:
                line.append(c)
            col += 1
            if col == columns:
                col, wrap_next = columns - 1, True
    out = ["".join(line).rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out
