"""The batch engine: many repos through the same stages, concurrently, streamed in order.
One module: a unit, the stages that pass it on and the run that counts it change together.

A **source** says where repos come from (``eosfix.batch.cache``: cache snapshots;
``eosfix.batch.hub``: a Hub listing; later, folders of GGUF files). It yields **units**
in output order and may add stages before the analysis (bring files in) and after it (fix a
snapshot, open a pull request). The engine runs the analysis in between: each distinct
**key** (the stop-relevant files' (path, content hash) pairs) is analyzed once while it is
among the last LRU_SIZE keys, in worker processes (``eosfix.batch.pool``).

Memory stays flat however many repos: each stage keeps at most WINDOW units in flight, the
LRU is bounded, workers return compact Verdicts, and each result is dropped once rendered
(or kept as a Row of short strings for a table).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eosfix.batch import pool, verdict
from eosfix.batch.verdict import Detail, Members, Verdict
from eosfix.core.outcome import EXIT_INTERRUPTED, VERDICTS, exit_code
from eosfix.sources import Key
from eosfix.targets.parse import HubTarget

WINDOW = 128  # units in flight in a stage: bounds memory, keeps the workers fed
LRU_SIZE = 1024  # distinct analyses kept for sharing (compact verdicts: ~1 KB each)
LRU_DETAIL = 64  # ... with the JSON detail or text block of each (~15 KB)


class Item(Protocol):
    """What a source says about one repo revision (a cache Snapshot, a Hub listing entry)."""

    @property
    def repo_id(self) -> str: ...

    @property
    def revision_cell(self) -> str: ...  # the table's revision: "1a2b3c4d (main)"

    @property
    def model(self) -> bool: ...  # False: the repo holds no model (tokenizer files only)

    @property
    def container(self) -> str: ...  # how it is analysed: "folder" | "gguf"

    @property
    def row_name(self) -> str: ...  # how a table names it: the repo id, a GGUF file's path

    def fields(self) -> dict[str, Any]: ...  # the first keys of its JSON entry


@dataclass(frozen=True, slots=True)
class PrState:
    """What became of a unit's pull request (``eosfix hub --pr``, or carried over from a state
    file): ``words`` the outcome (``eosfix.batch.prs``: "opened", "not opened: why"...; None:
    none asked), its URL and number, whether this run created it, the error that stopped it."""

    words: str | None = None
    url: str | None = None
    num: int | None = None
    created: bool = False
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        """The keys every Hub entry has, in their order."""
        return {
            "pr": self.words, "pr_url": self.url, "pr_num": self.num, "pr_created": self.created,
            "pr_error": self.error,
        }  # fmt: skip

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> PrState:
        """The state ``fields`` (a state file's record) say."""
        return cls(
            fields.get("pr"), fields.get("pr_url"), fields.get("pr_num"),
            bool(fields.get("pr_created")), fields.get("pr_error"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Unit:
    """One repo revision moving through a batch; what later stages add is typed: its pull
    request (``pr``), whether a state file carried it over (``resumed``), a GGUF repo's groups
    of alike files (``gguf_groups``, each as its JSON)."""

    item: Item
    path: Path | None = None  # its local folder, once the files are there
    key: Key | None = None
    verdict: Verdict | None = None  # set by the analysis, or earlier when it cannot happen
    pr: PrState | None = None
    resumed: bool | None = None  # None: its source keeps no state (the cache)
    target: HubTarget | None = None  # a GGUF file of a Hub repo, named by its path or quant
    gguf_groups: tuple[dict[str, Any], ...] | None = None

    def but(self, **changes: Any) -> Unit:
        return dataclasses.replace(self, **changes)

    def fields(self) -> dict[str, Any]:
        """What later stages add to the unit's JSON entry, in order."""
        out: dict[str, Any] = {}
        if self.resumed is not None:
            out["resumed"] = self.resumed
        if self.pr is not None:
            out.update(self.pr.fields())
        if self.gguf_groups is not None:
            out["gguf_groups"] = list(self.gguf_groups)
        return out


@dataclass(frozen=True, slots=True)
class Failure:
    """What a source could not turn into units: a corrupted cache entry, a listing that
    failed. Every output gives it a row (the JSON its own footer key)."""

    name: str  # the repo id, or the folder or author it is about
    error: str


class Source(Protocol):
    noun: str  # what a unit is: "snapshot", "repo"
    stage: str  # what the progress bar says: "checking", "fixing"

    def units(self) -> Iterator[Unit]: ...
    def before(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]: ...
    def after(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]: ...
    def estimate(self) -> int | None: ...
    def failed(self) -> bool: ...  # something outside the units failed (exit code 2)
    def failures(self) -> list[Failure]: ...  # ... what it was, once the units are done
    def head(self) -> dict[str, Any]: ...  # JSON keys before "repos"
    def footer(self) -> dict[str, Any]: ...  # JSON keys after "repos", before "summary"
    def summary(self) -> dict[str, Any]: ...  # more summary counts
    def stop(self) -> None: ...  # start no new unit; those in flight finish (Run.stop)
    def close(self) -> None: ...


class Progress:
    """Progress hooks; the CLI passes a rich progress bar, the default does nothing."""

    wants_total = False  # True: start() gets the source's estimate (may list every repo)

    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


class Done:
    """A stage's answer that is already there (same interface as a Future)."""

    __slots__ = ("value",)

    def __init__(self, value: Unit) -> None:
        self.value = value

    def result(self) -> Unit:
        return self.value

    def done(self) -> bool:
        return True


class Pending(Protocol):
    def result(self) -> Unit: ...  # waits if it must
    def done(self) -> bool: ...  # result() would not wait on another process or thread


def in_order(
    units: Iterable[Unit],
    start: Callable[[Unit], Pending],
    flush: Callable[[], None] | None = None,
) -> Iterator[Unit]:
    """``start(unit).result()`` for each unit, in order, with at most WINDOW started ahead.
    A unit goes on as soon as it and every unit before it are done, so results stream (and
    reach a state file) while later ones are still in flight. ``flush`` runs once every unit
    has started (send the last partial batch of jobs)."""
    window: deque[Pending] = deque()
    for unit in units:
        window.append(start(unit))
        while window and (len(window) > WINDOW or window[0].done()):
            yield window.popleft().result()
    if flush is not None:
        flush()
    while window:
        yield window.popleft().result()


class _Lru:
    """key -> Verdict, the most recently used ``size`` only."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[bytes, Verdict] = OrderedDict()

    def get(self, key: bytes) -> Verdict | None:
        found = self.data.get(key)
        if found is not None:
            self.data.move_to_end(key)
        return found

    def put(self, key: bytes, found: Verdict) -> None:
        self.data[key] = found
        self.data.move_to_end(key)
        if len(self.data) > self.size:
            self.data.popitem(last=False)


def key_digest(key: Key) -> bytes:
    return hashlib.blake2b(repr(key).encode(), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Row:
    """One repo revision of a final table: short strings only (~200 bytes, most shared)."""

    repo_id: str
    revision: str  # short sha, then its refs: "1a2b3c4d (main, refs/pr/1)"
    terminators: str  # "<|im_end|> 151645", one per line; "-" when none
    eos: str  # current stop ids: "151643", "[1, 2] (from config.json)"
    verdict: str  # one of VERDICTS
    note: str  # after the verdict: " -> [proposed ids]", ": error message"
    pr: str = ""  # the pull request: "opened (#3)", "would open", why not...
    problem: str = ""  # what is wrong (one of PROBLEMS), for a fixable or problems verdict


@dataclass(frozen=True, slots=True)
class Result:
    """A unit at the end of the batch, as the run yields them (not kept: see Row)."""

    unit: Unit

    @property
    def item(self) -> Item:
        return self.unit.item

    @property
    def verdict(self) -> Verdict:
        assert self.unit.verdict is not None
        return self.unit.verdict

    @property
    def verdict_name(self) -> str:
        return self.verdict.name

    def row(self) -> Row:
        terms, eos, note = self.verdict.cells
        v = self.verdict
        state = self.unit.pr or PrState()
        pr, num = state.words or "", state.num
        pr += f" (#{num})" if pr and num is not None else ""
        cell = self.item.revision_cell
        return Row(self.item.row_name, cell, terms, eos, v.name, note, pr, v.problem or "")

    def entry(self) -> tuple[dict[str, Any], Members | None, dict[str, Any]]:
        """The JSON entry in three parts, in order: the item's fields and the verdict (with,
        for a unit never analysed, an error entry's keys); ``Verdict.detail``, result_to_dict's
        keys already encoded (as `eosfix check` per folder); what later stages added (pull
        request). Later parts replace a key's value in its place, as a dict's update."""
        v = self.verdict
        head = {**self.item.fields(), "verdict": v.name}
        if v.detail is None:  # not analysed (a Hub repo that could not be fetched)
            head.update(
                container="folder", status=v.status, verdict=v.name, problem=v.problem,
                runs_on=list(v.runs_on), stops_early=list(v.stops_early), error=v.error,
                written=list(v.written),
            )  # fmt: skip
        return head, v.detail, self.unit.fields()


class Run:
    """One batch, streamed: iterate it (once) for its Results in the source's order. The run
    keeps counts (and, with ``keep_rows``, one small Row per unit) and owns the exit code."""

    def __init__(
        self,
        source: Source,
        *,
        detail: Detail | None = None,
        workers: int | None = None,
        progress: Progress | None = None,
        keep_rows: bool = False,
        keep_ids: tuple[int, ...] = (),
    ) -> None:
        self.source = source
        self.detail = detail
        # One job function per run (the pool batches jobs by function): --keep-id bound in;
        # another for repos that hold no model (their key says so, so they share apart).
        self.analyze: pool.Job = (
            functools.partial(verdict.analyze_folder, keep_ids=keep_ids)
            if keep_ids
            else verdict.analyze_folder
        )
        self.analyze_no_model: pool.Job = functools.partial(
            verdict.analyze_folder, keep_ids=keep_ids, model=False
        )
        self.analyze_gguf: pool.Job = functools.partial(verdict.analyze_gguf, keep_ids=keep_ids)
        self.jobs = pool.Jobs(detail, workers)
        self.analyses = 0  # analyses run (distinct keys)
        self.count = 0  # units yielded
        self.repos = 0
        self.rows: list[Row] | None = [] if keep_rows else None
        self._counts = dict.fromkeys(VERDICTS, 0)
        self._gguf_counts = dict.fromkeys(VERDICTS, 0)  # of the units that are GGUF files
        self._settled = 0  # fixable units ``settled`` holds for
        self._lru = _Lru(LRU_DETAIL if detail else LRU_SIZE)
        self._pending: dict[bytes, pool.Ticket] = {}
        self._group: str | None = None
        self._group_ids: set[str] = set()
        self._stream = self._run(progress or Progress())

    def __iter__(self) -> Iterator[Result]:
        return self._stream

    def drain(self) -> Run:
        for _ in self._stream:
            pass
        return self

    interrupted = False  # stopped early (Ctrl-C): the exit code is 130

    def stop(self) -> None:
        """Stop early but whole (the first Ctrl-C): the source starts no new unit, and those
        already in flight finish and come out as usual, so every file written is reported
        and every output stays whole. Safe to call from a signal handler (it sets flags)."""
        self.interrupted = True
        self.source.stop()

    def close(self) -> None:
        """Stop at once (a second Ctrl-C): workers and the source's threads are shut down;
        what was in flight is not reported."""
        self.interrupted = True
        self._stream.close()

    @property
    def results(self) -> list[Row]:
        """The rows kept (``keep_rows``), after the run was iterated."""
        return self.rows if self.rows is not None else []

    strict = False  # warnings fail too (--strict)
    # A fixable unit this holds for has nothing left to do (hub --pr: an open pull request
    # already carries its fix): it counts as done for the exit code, as `fix` run twice does.
    settled: Callable[[Unit], bool] | None = None

    @property
    def exit_code(self) -> int:
        """``eosfix.core.outcome.exit_code`` of the verdicts so far (a settled fixable unit as
        one with nothing to do); the source's own failures (a listing, a corrupted cache
        entry, a pull request) count as unreadable input; 130 once interrupted."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        counts = dict(self._counts)
        counts["fixable"] -= self._settled
        counts["ok"] += self._settled
        return exit_code(counts, strict=self.strict, failed=self.source.failed())

    def counts(self, container: str | None = None) -> dict[str, int]:
        """How many units came to each verdict; ``container``: of those units only ("gguf":
        GGUF files; "folder": the others)."""
        if container is None:
            return dict(self._counts)
        if container == "gguf":
            return dict(self._gguf_counts)
        return {v: n - self._gguf_counts[v] for v, n in self._counts.items()}

    def summary(self) -> dict[str, Any]:
        head = {f"{self.source.noun}s": self.count, "analyses": self.analyses}
        return {**head, **self._counts, **self.source.summary()}

    def analyzed(self, units: Iterable[Unit]) -> Iterator[Unit]:
        """Give each unit without a verdict the verdict of its folder, in order."""
        return in_order(units, self._start, self.jobs.flush)

    def _start(self, unit: Unit) -> Pending:
        if unit.verdict is not None:
            return Done(unit)
        assert unit.path is not None, unit
        assert unit.key is not None, unit
        model = unit.item.model
        key = key_digest(unit.key if model else (*unit.key, ("", "no model")))
        got: Verdict | pool.Ticket | None = self._lru.get(key) or self._pending.get(key)
        if got is None:
            gguf = unit.item.container == "gguf"
            job = self.analyze_gguf if gguf else self.analyze if model else self.analyze_no_model
            got = self._pending[key] = self.jobs.submit(job, unit.path)
            self.analyses += 1
        return _Settle(self, unit, key, got)

    def _count(self, result: Result) -> None:
        self.count += 1
        self._counts[result.verdict_name] += 1
        if result.item.container == "gguf":
            self._gguf_counts[result.verdict_name] += 1
        if result.verdict_name == "fixable" and self.settled and self.settled(result.unit):
            self._settled += 1
        group = result.item.repo_id.lower()  # a source yields a repo's revisions together
        if group != self._group:
            self._group, self._group_ids = group, set()
        if result.item.repo_id not in self._group_ids:
            self._group_ids.add(result.item.repo_id)
            self.repos += 1
        if self.rows is not None:
            self.rows.append(result.row())

    def _run(self, progress: Progress) -> Generator[Result, None, None]:
        source = self.source
        progress.start(source.stage, source.estimate() if progress.wants_total else None)
        try:
            units = source.after(self.analyzed(source.before(source.units(), self)), self)
            for unit in units:
                result = Result(unit)
                self._count(result)
                progress.advance()
                yield result
        finally:
            self.jobs.close()
            source.close()


class _Settle:
    """An analysis asked for: ``result()`` is the unit with its verdict (shared via the LRU)."""

    __slots__ = ("got", "key", "run", "unit")

    def __init__(self, run: Run, unit: Unit, key: bytes, got: Verdict | pool.Ticket) -> None:
        self.run, self.unit, self.key, self.got = run, unit, key, got

    def done(self) -> bool:
        return not isinstance(self.got, pool.Ticket) or self.got.done()

    def result(self) -> Unit:
        got = self.got
        if isinstance(got, pool.Ticket):
            found = got.result()
            if self.run._pending.get(self.key) is got:
                del self.run._pending[self.key]
                if not pool.retryable(found):  # a unit that could not finish is not shared
                    self.run._lru.put(self.key, found)
            got = found
        return self.unit.but(verdict=got)
