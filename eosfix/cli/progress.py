"""A byte progress bar with an ETA on stderr, only when stderr is a terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Progress = Callable[[str, int, int], None]


@contextlib.contextmanager
def byte_progress(label: str) -> Iterator[Progress | None]:
    """Yield a ``(phase, done, total)`` callback drawing a bar, or None when not a tty (or
    NO_COLOR, TERM=dumb, --color never)."""
    from eosfix.cli.term import progress_allowed, shown, unshown

    if not progress_allowed(sys.stderr):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TaskID,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import (
        Progress as Bar,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())  # fmt: skip
    with Bar(*columns, console=Console(file=unshown(sys.stderr)), transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(shown(f"{label}: {phase}"), total=total)
            bar.update(tasks[phase], completed=done)

        yield update
