"""A batch's progress bar on stderr (``progress_bar``: the repos done of how many, the Hub's
quotas left), only on a terminal, and the lines a run prints while it is drawn (``Screen``):
written above the bar, never onto it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import click

from eosfix.batch.run import Progress
from eosfix.cli.term import colors_on, shown, unshown


class RichProgress(Progress):
    """A transient progress bar on stderr (``live``: the display that draws it, and the lines
    that go above it). ``total``: asked again before each draw, for a total that becomes
    known during the run (a Hub listing's, once it is complete)."""

    wants_total = True

    def __init__(self, bar: Any, live: Any, total: Callable[[], int | None] | None) -> None:
        self.bar = bar
        self.live = live
        self.total = total
        self.task: Any = None

    def start(self, stage: str, total: int | None) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(stage, total=total)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)

    def sync_total(self) -> None:
        """The bar's total as ``total`` says now (the display's thread asks before it draws)."""
        if self.task is None or self.total is None:
            return
        total = self.total()
        if total is not None:
            self.bar.update(self.task, total=total)


class Screen:
    """Where a run's lines go while it runs: ``out`` to stdout, ``err`` to stderr, as
    click.echo writes them; while a progress bar is live, above it (the bar's display writes
    them at its next refresh, in order, then draws itself below: a line never lands on the
    bar). ``flush``: write what waits now."""

    def __init__(self, progress: RichProgress | None = None) -> None:
        self.live = progress.live if progress is not None else None

    def out(self, text: str) -> None:
        self._echo(text, err=False)

    def err(self, text: str) -> None:
        self._echo(text, err=True)

    def flush(self) -> None:
        if self.live is not None:
            self.live.flush()

    def _echo(self, text: str, *, err: bool) -> None:
        stream = sys.stderr if err else sys.stdout
        shown = text if colors_on(stream) else click.unstyle(text)  # as click.echo would
        if self.live is None or not self.live.above(stream, shown + "\n"):
            click.echo(text, err=err)


@contextlib.contextmanager
def progress_bar(
    show: bool,
    status: Callable[[], str] | None = None,
    total: Callable[[], int | None] | None = None,
    *,
    console: Any = None,
) -> Iterator[RichProgress | None]:
    """A RichProgress while the block runs, or None. ``status``: a line after the count,
    asked again at each refresh (the Hub's quotas left, an ETA); ``total``: how many there
    are, asked again at each refresh (None: the run's estimate at its start); ``console``:
    where the bar is drawn (stderr's)."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, TextColumn
    from rich.progress import Progress as Bar
    from rich.text import Text

    class StatusColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(shown(status()) if status is not None else "", style="dim")

    console = console if console is not None else Console(file=unshown(sys.stderr))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), StatusColumn())
    bar = Bar(*columns, console=console, auto_refresh=False)  # drawn by the display below
    live = _live_display(bar, console)
    progress = RichProgress(bar, live, total)
    live.before_draw = progress.sync_total
    live.start(refresh=True)
    try:
        yield progress
    finally:
        live.flush()  # before stop(), whose last draw is buffered until the bar is erased
        live.stop()


def _live_display(bar: Any, console: Any) -> Any:
    """rich's Live display of ``bar``, transient, that also writes the lines waiting to go
    above it (``above``), under the display's own lock: between two of its draws, never in
    one."""
    from rich.live import Live

    class AboveBar(Live):
        _hidden = False  # drawing nothing: the bar's lines cleared for the lines above it

        def __init__(self) -> None:
            super().__init__(
                console=console, transient=True, refresh_per_second=10,
                redirect_stdout=False, redirect_stderr=False, get_renderable=bar.get_renderable,
            )  # fmt: skip
            self.waiting: list[tuple[TextIO, str]] = []
            self.before_draw: Callable[[], None] | None = None

        def get_renderable(self) -> Any:
            return "" if self._hidden else super().get_renderable()

        def above(self, stream: TextIO, text: str) -> bool:
            """Queue ``text`` for ``stream``; False once the display has stopped (write it
            yourself)."""
            with self._lock:
                if not self.is_started:
                    return False
                self.waiting.append((stream, text))
                return True

        def flush(self) -> None:
            self.refresh()

        def refresh(self) -> None:
            with self._lock:
                if self.waiting:
                    self._hidden = True
                    try:
                        super().refresh()  # where the bar was is now an empty line
                    finally:
                        self._hidden = False
                    for stream, text in self.waiting:
                        stream.write(text)
                        stream.flush()
                    self.waiting.clear()
                if self.before_draw is not None:
                    self.before_draw()
                super().refresh()

    return AboveBar()
