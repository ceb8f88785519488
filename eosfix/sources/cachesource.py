"""The HF cache as a batch source: what `eosfix cache` runs.

Units come from ``CacheScan`` (in cache order, repo by repo); the engine analyzes them
(snapshots with identical files share one analysis); with ``fix``, a stage after the analysis
fixes, in order, each snapshot whose analysis planned patches, each under its own lock, with
``fix_snapshot`` (the link is replaced, never the blob).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eosfix.batch import pool
from eosfix.batch.run import Done, Pending, Progress, Run, Unit, in_order
from eosfix.batch.verdict import Detail
from eosfix.sources.cache import CacheScan, Corrupted, fix_snapshot


class CacheSource:
    """The snapshots of a CacheScan as batch units; with ``fix``, a stage that fixes, in
    order, each snapshot whose analysis planned patches (each under its own lock)."""

    noun = "snapshot"

    def __init__(
        self, scan: CacheScan, *, fix: bool = False, keep_ids: tuple[int, ...] = ()
    ) -> None:
        self.scan = scan
        self.fix = fix
        self.fixer: pool.Job = (
            functools.partial(fix_snapshot, keep_ids=keep_ids) if keep_ids else fix_snapshot
        )
        self.stage = "fixing" if fix else "checking"
        self.corrupted: list[Corrupted] = []

    def units(self) -> Iterator[Unit]:
        for item in self.scan:
            if isinstance(item, Corrupted):
                self.corrupted.append(item)
            else:
                yield Unit(item, item.path, item.key)
        self.corrupted.sort(key=lambda c: c.name)

    def before(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        return iter(units)

    def after(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        if not self.fix:
            return iter(units)

        def start(unit: Unit) -> Pending:
            assert unit.verdict is not None
            assert unit.path is not None
            if not unit.verdict.has_patches:
                return Done(unit)
            return _Fixed(unit, run.jobs.submit(self.fixer, unit.path))

        return in_order(units, start, run.jobs.flush)

    def estimate(self) -> int | None:
        return self.scan.estimate()

    def failed(self) -> bool:
        return bool(self.corrupted)

    def head(self) -> dict[str, Any]:
        return {"cache_dir": str(self.scan.cache_dir)}

    def footer(self) -> dict[str, Any]:
        return {
            "corrupted": [
                {"name": c.name, "repo_id": c.repo_id, "error": c.message} for c in self.corrupted
            ]
        }

    def summary(self) -> dict[str, Any]:
        return {"corrupted": len(self.corrupted)}

    def close(self) -> None:
        pass


class _Fixed:
    __slots__ = ("ticket", "unit")

    def __init__(self, unit: Unit, ticket: pool.Ticket) -> None:
        self.unit, self.ticket = unit, ticket

    def result(self) -> Unit:
        return self.unit.but(verdict=self.ticket.result())

    def done(self) -> bool:
        return self.ticket.done()


class CacheRun(Run):
    """One `eosfix cache` run, streamed: iterate it (once) for the Results in cache order.

    Snapshots with the same key share one analysis while it is among the last LRU_SIZE
    distinct ones (revisions of a repo come together); ``analyses`` counts those run.
    """

    def __init__(
        self,
        scan: CacheScan,
        *,
        fix: bool = False,
        detail: Detail = None,
        workers: int | None = None,
        progress: Progress | None = None,
        keep_rows: bool = False,
        keep_ids: tuple[int, ...] = (),
    ) -> None:
        self.cache = CacheSource(scan, fix=fix, keep_ids=keep_ids)
        super().__init__(
            self.cache,
            detail=detail,
            workers=workers,
            progress=progress,
            keep_rows=keep_rows,
            keep_ids=keep_ids,
        )

    @property
    def cache_dir(self) -> Path:
        return self.cache.scan.cache_dir

    @property
    def fixing(self) -> bool:
        return self.cache.fix

    @property
    def corrupted(self) -> list[Corrupted]:
        return self.cache.corrupted


def run_cache(
    scan: CacheScan,
    *,
    fix: bool = False,
    detail: Detail = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> CacheRun:
    """The whole run at once, keeping one Row per snapshot in ``results``."""
    run = CacheRun(scan, fix=fix, detail=detail, workers=workers, progress=progress, keep_rows=True)
    run.drain()
    return run
