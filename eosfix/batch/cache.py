"""The HF cache as a batch source: what `eosfix cache` runs.

Units come from ``eosfix.sources.cache.CacheScan`` (in cache order, repo by repo): each
snapshot as a folder, and each GGUF model file in it on its own, as ``eosfix check SNAPSHOT``
checks them; the engine analyzes them (snapshots with identical files, and identical GGUF
blobs, share one analysis); with ``fix``, a stage after the analysis fixes, in order, each
snapshot whose analysis planned patches, each under its own lock, with ``fix_snapshot`` (the
link is replaced, never the blob: the folder container's writer,
``eosfix.containers.folder.write``). A GGUF file is never fixed here: its blob is shared by
every revision that has it, and a fix is a new file (``eosfix fix FILE --output NEW.gguf``,
what its check says).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eosfix import pipeline
from eosfix.batch import pool
from eosfix.batch.run import Done, Failure, Pending, Run, Unit, in_order
from eosfix.batch.verdict import Detail, Verdict, to_verdict
from eosfix.containers.folder.write import (
    drop_no_exist_marker,
    drop_stale_no_exist,
    stale_no_exist_markers,
)
from eosfix.core.errors import EosfixError
from eosfix.sources.cache import CachedGguf, CacheScan, Corrupted


def fix_snapshot(path: Path, detail: Detail | None, keep_ids: tuple[int, ...] = ()) -> Verdict:
    """Fix one snapshot (a worker job): replace the link, never the blob; drop the .no_exist
    marker. ``keep_ids``: stop ids to keep (--keep-id)."""
    callback = functools.partial(drop_no_exist_marker, path)
    with contextlib.suppress(EosfixError):  # else reported by the fix below, which fails too
        drop_stale_no_exist(path)  # a run killed between a write and its marker's removal
    result = pipeline.fix(path, replace_symlinks=True, after_write=callback, keep_ids=keep_ids)
    return to_verdict(result, detail)


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
        self.stopping = False  # Run.stop: no new snapshot, no new fix
        self.snapshots = 0  # snapshots read so far
        self.ggufs = 0  # GGUF files among the units so far
        self.unwritten: list[Path] = []  # GGUF files --fix planned keys for and did not write

    def units(self) -> Iterator[Unit]:
        """Each snapshot as a folder, and each of its GGUF model files on its own (what
        ``eosfix check SNAPSHOT`` checks: a snapshot of GGUF files alone is its files)."""
        for item in self.scan:
            if self.stopping:
                return
            if isinstance(item, Corrupted):
                self.corrupted.append(item)
                continue
            self.snapshots += 1
            if item.checked_as_folder:
                yield Unit(item, item.path, item.key)
            for file, identity in item.ggufs:
                gguf = CachedGguf(item, file, identity)
                self.ggufs += 1
                yield Unit(gguf, gguf.path, gguf.key)
        self.corrupted.sort(key=lambda c: c.name)

    def before(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        return iter(units)

    def after(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        if not self.fix:
            return iter(units)

        def start(unit: Unit) -> Pending:
            assert unit.verdict is not None
            assert unit.path is not None
            if isinstance(unit.item, CachedGguf):  # a shared blob: never written through
                if unit.verdict.has_patches:
                    self.unwritten.append(unit.item.path)
                return Done(unit)
            if (
                not unit.verdict.has_patches and not stale_no_exist_markers(unit.path)
            ) or self.stopping:  # interrupted: not fixed
                return Done(unit)
            return _Fixed(unit, run.jobs.submit(self.fixer, unit.path))

        return in_order(units, start, run.jobs.flush)

    def estimate(self) -> int | None:
        return self.scan.estimate()

    def failed(self) -> bool:
        return bool(self.corrupted)

    def failures(self) -> list[Failure]:
        return [Failure(c.repo_id or c.name, c.message) for c in self.corrupted]

    def head(self) -> dict[str, Any]:
        return {"cache_dir": str(self.scan.cache_dir)}

    def footer(self) -> dict[str, Any]:
        return {
            "corrupted": [
                {"name": c.name, "repo_id": c.repo_id, "error": c.message} for c in self.corrupted
            ]
        }

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"corrupted": len(self.corrupted)}
        if self.ggufs:  # units are snapshots and GGUF files: each counted apart
            out.update(snapshots=self.snapshots, gguf_files=self.ggufs)
        return out

    def stop(self) -> None:
        self.stopping = True

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
        keep_ids: tuple[int, ...] = (),
        **options: Any,
    ) -> None:
        """``options``: the Run's (detail, workers, progress, keep_rows)."""
        self.cache = CacheSource(scan, fix=fix, keep_ids=keep_ids)
        super().__init__(self.cache, keep_ids=keep_ids, **options)

    @property
    def cache_dir(self) -> Path:
        return self.cache.scan.cache_dir

    @property
    def fixing(self) -> bool:
        return self.cache.fix

    @property
    def corrupted(self) -> list[Corrupted]:
        return self.cache.corrupted
