"""A Hub organisation (or repo ids) as a batch source: what `eosfix hub` runs. One module:
its stages share the source's state (the reader and its quotas, the store, the state file,
the pull requests, the stop flag).

Stages, in order, each with at most WINDOW repos in flight:

1. **units**: the ids given, then the listing (an organisation, or any query: search, tags,
   pipeline tag, sort, limit) page by page. A repo the state file recorded at the same commit
   is done already (unless a PR is still to be opened).
2. **before**, in threads: repo info when the listing did not give it (ids, or
   ``--revision``), then the files into the store (nothing for a commit already there), each
   content once, by download or by paths-info as ``eosfix.batch.hubfetch`` plans.
3. the engine's analysis (shared by repos with identical files).
4. **after**: tokenizer.json for a repo whose ids are only there, and its analysis; pull
   requests, one at a time (``PrPlan``); errors named by their repo path; the state line.

A resumed repo is analysed again from the store when the output wants whole entries (JSON,
text blocks), so its entry is a fresh one's. Stopped early (``stop``, Ctrl-C), no new repo or
request starts and those in flight finish. The Hub is read by ``eosfix.sources.hub.read``; pull
requests are ``eosfix.batch.prs``'s (written by ``eosfix.sources.hub.write``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosfix.batch.gguf_audit import params_fix, repo_verdict
from eosfix.batch.hubfetch import Fetcher, Plan
from eosfix.batch.prs import PrPlan, carried_over
from eosfix.batch.run import (
    Done,
    Failure,
    Pending,
    Progress,
    PrState,
    Result,
    Run,
    Unit,
    in_order,
)
from eosfix.batch.state import StateError, StateFile, verdict_of_record
from eosfix.batch.verdict import Detail, Verdict, with_error
from eosfix.core.repo import TOKENIZER_JSON
from eosfix.result import RepoResult
from eosfix.sources.hub.http import Stopped, describe_error, hub_errors
from eosfix.sources.hub.read import HubEntry, HubError, HubReader, ListingQuery
from eosfix.sources.hub.write import PrOutcome
from eosfix.targets.gguf_hub import check_gguf_repo
from eosfix.targets.open import Refused
from eosfix.targets.parse import HubTarget

STOPPED = Verdict("error", error="not checked: interrupted")  # left out of every output


class HubSource:
    noun = "repo"
    stage = "checking"

    def __init__(
        self,
        reader: HubReader,
        *,
        targets: Sequence[HubTarget | Refused] = (),
        author: str | None = None,
        revision: str | None = None,
        state: StateFile | None = None,
        prs: PrPlan | None = None,
        query: ListingQuery | None = None,
        keep_ids: Sequence[int] = (),
    ) -> None:
        self.reader = reader
        self.targets = list(dict.fromkeys(targets))  # repos named (eosfix.targets.parse)
        self.query = query or (ListingQuery(author=author) if author else None)
        self.author = self.query.label if self.query is not None else None
        self.revision = revision
        self.state = state
        self.prs = prs
        self.detail: Detail | None = None  # the run's (each GGUF repo's entry is made here)
        self._gguf_prs: dict[str, RepoResult] = {}  # GGUF repo -> the result its PR carries
        self.keep_ids = tuple(keep_ids)  # --keep-id (the analysis has its own; GGUF repos)
        self.errors: list[tuple[str, str]] = []  # (author, why its listing failed)
        # The state file could not be written (a full disk): the audit goes on unrecorded,
        # and the command ends with this one line and exit 2.
        self.state_error: StateError | None = None
        self.resumed = 0
        self.carried = 0  # resumed repos whose pull request an earlier run opened
        self.stopping = False  # Run.stop: no new repo, no new request, no new pull request
        self.listed = False  # every repo of the listing (or every id) was given out
        self.seen = 0  # repos of the listing so far
        self.from_listing = 0  # units the listing gave (not those also named as targets)
        self.done = 0  # repos finished
        self._lock = threading.Lock()
        self.plan = Plan(reader)
        self.fetcher = Fetcher(reader)
        # Threads may wait (for their quota's next window, for the repos before them): more
        # threads than requests in flight, so one quota's wait never idles the other.
        workers = 4 * reader.http.gate.max
        self._io = ThreadPoolExecutor(workers, thread_name_prefix="eosfix-hub")
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="eosfix-hub-pr")

    # --- 1. units -----------------------------------------------------------------------------
    def units(self) -> Iterator[Unit]:
        for target in self.targets:
            if self.stopping:
                return
            if isinstance(target, Refused):  # named no repo: its error, the Hub never asked
                yield Unit(
                    HubEntry(target.shown), verdict=Verdict("error", error=target.error.message)
                )
                continue
            entry = HubEntry(target.repo_id, target.revision or self.revision or "main")
            yield Unit(entry, target=target if target.picks_gguf else None)
        if self.query is None:
            self.listed = True
            return
        given = {t.repo_id for t in self.targets if isinstance(t, HubTarget)}
        try:
            for entry in self.reader.list_models(self.query):
                if self.stopping:
                    return
                self.seen += 1
                if entry.problem is not None:  # never requested: a failure row
                    self.from_listing += 1
                    yield Unit(entry, verdict=Verdict("error", error=entry.problem))
                    continue
                if entry.repo_id in given:
                    continue
                if self.revision is not None:  # the listing describes main only
                    entry = HubEntry(entry.repo_id, self.revision, listed=entry.listed)
                self.from_listing += 1
                yield self._resumed(entry) or Unit(entry)
            self.listed = True
        except hub_errors() as exc:
            if not self.stopping:  # interrupted: not a failure of the listing
                self.errors.append((self.query.label, describe_error(exc)[0]))

    def _resumed(self, entry: HubEntry) -> Unit | None:
        if self.state is None or entry.sha is None:
            return None
        with self._lock:
            record = self.state.recorded(entry.repo_id, entry.sha)
        if record is None:
            return None
        found, fields = verdict_of_record(record)
        unit = Unit(entry, verdict=found, pr=carried_over(fields), resumed=True)
        if self.prs is not None and self.prs.wants(unit):
            return None  # its pull request is still to be opened: check it again
        with self._lock:
            self.resumed += 1
            self.carried += unit.pr is not None and unit.pr.words == PrOutcome.CARRIED_OVER.value
        return unit

    # --- 2. files in ----------------------------------------------------------------------------
    def before(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        detail = run.detail is not None
        self.detail = run.detail

        def start(unit: Unit) -> Pending:
            if unit.verdict is not None:
                if detail and unit.resumed:
                    return self._io.submit(self._rederive, unit, self.fetcher.files.number())
                return Done(unit)
            assert isinstance(unit.item, HubEntry)
            identify = self.plan.identify(unit.item)  # here: in listing order
            i = self.fetcher.files.number()
            return self._io.submit(self._prepare, unit.item, i, identify, unit.target)

        return in_order(units, start)

    def _rederive(self, unit: Unit, i: int) -> Unit:
        """A repo carried over from the state file, when the output wants each repo's whole
        entry (JSON, text blocks): its files from the store (no request; fetched again only
        if the store was emptied), analysed again, so its entry has every key of a repo
        checked now. Its pull request stays the record's."""
        entry = unit.item
        assert isinstance(entry, HubEntry)
        assert entry.sha is not None
        if entry.is_gguf:  # its headers again (its verdict and groups are the record's)
            self.fetcher.files.finish(i)
            return self._check_gguf(entry, unit)
        try:
            _, manifest = self.fetcher.bring(entry, i, identify=False)
        except Exception as exc:  # noqa: BLE001 - one repo's failure is its error line
            why = self._error(exc)
            if why is STOPPED:
                return unit.but(verdict=STOPPED)
            error = f"recorded in the state file, but its files cannot be read again: {why.error}"
            return unit.but(verdict=Verdict("error", error=error))
        finally:
            self.fetcher.files.finish(i)
        return unit.but(path=self.reader.store.snapshot(entry.sha), key=manifest.key, verdict=None)

    def _prepare(
        self, entry: HubEntry, i: int, identify: bool, target: HubTarget | None = None
    ) -> Unit:
        try:
            entry = self.reader.resolve(entry)
            resumed = self._resumed(entry) if target is None else None
            if resumed is not None:
                return resumed
            if entry.is_gguf or target is not None:  # a GGUF repo, or a GGUF file named
                self.fetcher.files.finish(i)
                i = -1  # finished
                return self._check_gguf(entry, target=target)
            entry, manifest = self.fetcher.bring(entry, i, identify)
        except Exception as exc:  # noqa: BLE001 - one repo's failure is its error line
            return Unit(entry, verdict=self._error(exc))
        finally:
            if i >= 0:
                self.fetcher.files.finish(i)
        assert entry.sha is not None
        return Unit(entry, self.reader.store.snapshot(entry.sha), manifest.key)

    def _check_gguf(
        self, entry: HubEntry, resumed: Unit | None = None, target: HubTarget | None = None
    ) -> Unit:
        """A repo of GGUF files (``HubEntry.is_gguf``): checked by its files' headers, as
        ``eosfix check ORG/REPO-GGUF`` does (``eosfix.targets.gguf_hub``), in this thread; its
        verdict is its worst group's, its row names a file that differs. Interrupted while
        its headers were read: not checked."""
        try:
            tag, path = (target.quant, target.gguf_file) if target is not None else (None, None)
            checked = check_gguf_repo(
                self.reader, entry, tag=tag, path=path, keep_ids=self.keep_ids
            )
        except Exception as exc:  # noqa: BLE001 - one repo's failure is its error line
            return Unit(entry, verdict=self._error(exc))
        if self.stopping and any(f.error is not None for f in checked.files):
            return Unit(entry, verdict=STOPPED)
        found, groups = repo_verdict(checked, self.detail)
        fix = params_fix(checked) if self.prs is not None else None
        if fix is not None:
            with self._lock:
                self._gguf_prs[entry.repo_id] = fix
        unit = resumed.but(verdict=found) if resumed is not None else Unit(entry, verdict=found)
        return unit.but(gguf_groups=tuple(groups))

    def _error(self, exc: Exception) -> Verdict:
        if self.stopping and isinstance(exc, Stopped):
            return STOPPED
        if isinstance(exc, HubError):
            return Verdict("error", error=exc.message)
        if isinstance(exc, hub_errors()):
            return Verdict("error", error=describe_error(exc)[0])
        if isinstance(exc, OSError):
            where = self.reader.store.root
            return Verdict(
                "error", error=f"cannot keep its files in {where}: {exc.strerror or exc}"
            )
        raise exc

    # --- 4. after the analysis ------------------------------------------------------------------
    def after(self, units: Iterable[Unit], run: Run) -> Iterator[Unit]:
        units = run.analyzed(in_order(units, self._start_tokenizer_json))
        if self.prs is not None:
            units = in_order(units, self._start_pr)
        return self._finished(units)

    def _start_tokenizer_json(self, unit: Unit) -> Pending:
        v, entry = unit.verdict, unit.item
        assert isinstance(entry, HubEntry)
        has_it = unit.key is not None and any(p == TOKENIZER_JSON for p, _ in unit.key)
        if v is None or not v.needs_tokenizer_json or not entry.tokenizer_json or has_it:
            return Done(unit)
        return self._io.submit(self._add_tokenizer_json, unit, self.fetcher.tokenizers.number())

    def _add_tokenizer_json(self, unit: Unit, i: int) -> Unit:
        assert isinstance(unit.item, HubEntry)
        try:
            manifest = self.fetcher.bring_tokenizer_json(unit.item, i)
        except Exception as exc:  # noqa: BLE001 - one repo's failure is its error line
            return unit.but(verdict=self._error(exc))
        finally:
            self.fetcher.tokenizers.finish(i)
        return unit.but(key=manifest.key, verdict=None)

    def _start_pr(self, unit: Unit) -> Pending:
        assert self.prs is not None
        with self._lock:
            gguf = self._gguf_prs.pop(unit.item.repo_id, None)
        if gguf is not None and not (unit.pr and unit.pr.url):  # a GGUF repo's params file
            return self._writes.submit(self.prs.settle, unit, gguf)
        if unit.path is None or not self.prs.wants(unit):
            return Done(unit)
        return self._writes.submit(self.prs.handle, unit)

    def _finished(self, units: Iterable[Unit]) -> Iterator[Unit]:
        for unit in units:
            if unit.verdict is STOPPED:  # its requests were cut short: not checked
                continue
            # every entry has the same keys, checked now or carried over
            unit = _named(unit.but(resumed=bool(unit.resumed), pr=unit.pr or PrState()))
            self.done += 1
            if self.state is not None and not self.state_error and not unit.resumed:
                assert unit.verdict is not None
                item = unit.item
                assert isinstance(item, HubEntry)
                try:
                    self.state.record(item.repo_id, item.sha, unit.verdict, unit.fields())
                except StateError as exc:
                    self.state_error = exc
            yield unit

    # --- what the run asks ----------------------------------------------------------------------
    def estimate(self) -> int | None:
        """How many units the run gives: the repos named, and those the listing gives, known
        once the listing is complete (before that, only ``--limit`` bounds it)."""
        if self.query is None:
            return len(self.targets)
        if self.listed:
            return len(self.targets) + self.from_listing
        return None if self.query.limit is None else len(self.targets) + self.query.limit

    def failed(self) -> bool:
        failed_prs = self.prs is not None and self.prs.failed > 0
        return bool(self.errors) or failed_prs or self.state_error is not None

    def failures(self) -> list[Failure]:
        return [Failure(a, f"cannot list its repos: {m}") for a, m in self.errors]

    def head(self) -> dict[str, Any]:
        if self.query is None:
            return {}
        if self.query.label == self.query.author:
            return {"author": self.query.author}
        return {"listing": self.query.as_json()}

    def footer(self) -> dict[str, Any]:
        return {"errors": [{"author": a, "error": m} for a, m in self.errors]}

    def summary(self) -> dict[str, Any]:
        stats = self.reader.http.stats
        out: dict[str, Any] = {
            "resumed": self.resumed,
            "requests": stats["requests"],
            **({"paths_info": stats["paths_info"]} if stats["paths_info"] else {}),
            "retries": stats["retries"],
            "rate_limited": stats["rate_limited"],
            "unreachable": stats["unreachable"],  # attempts that made no connection
        }
        capped = self.reader.http.gate.capped
        if capped:  # quota resets the Hub announced past any window, taken as the longest
            out.update(waits_capped=capped, longest_wait=self.reader.http.longest)
        if self.prs is not None:
            if self.prs.dry_run:
                out["prs_would_open"] = self.prs.new
            else:
                out.update(prs_opened=self.prs.new, prs_updated=self.prs.updated)
        if self.state is not None:
            out["prs_opened_earlier"] = self.carried
        return out

    def status(self) -> str:
        """The quotas left and, when the number of repos is known, an ETA: ``api 812/1000
        left; resolvers 0/5000 left, next window in 12 s; ETA 4 min``."""
        gate = self.reader.http.gate
        parts = [gate.status()]
        total = self.estimate()
        if total is not None and self.done:
            eta = gate.eta(self.done, total - self.done)
            if eta is not None:
                parts.append(f"ETA {_duration(eta)}")
        return "; ".join(p for p in parts if p)

    def stop(self) -> None:
        """No new repo and no new request (those waiting for their turn give up, and their
        repos are left out as not checked); pull requests not begun are not opened."""
        self.stopping = True
        self.reader.http.gate.stop()
        if self.prs is not None:
            self.prs.stopping = True

    def close(self) -> None:
        self.reader.http.gate.abort()  # a second Ctrl-C: what is on the network too
        self._io.shutdown(wait=False, cancel_futures=True)
        self._writes.shutdown(wait=False, cancel_futures=True)


class _Callbacks(Progress):
    wants_total = True

    def __init__(self, source: HubSource, on_progress: Callable[[int, int | None, str], None]):
        self.source, self.on_progress = source, on_progress
        self.done, self.total = 0, None  # type: int, int | None

    def start(self, stage: str, total: int | None) -> None:
        self.total = total
        self.on_progress(0, total, self.source.status())

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.total = self.source.estimate()  # known once the listing is complete
        self.on_progress(self.done, self.total, self.source.status())


def audit_slice(
    query: ListingQuery,
    *,
    on_result: Callable[[Result], None] | None = None,
    on_progress: Callable[[int, int | None, str], None] | None = None,
    stop: threading.Event | None = None,
    reader: HubReader | None = None,
    token: str | None = None,
    workers: int = 16,
    state: StateFile | None = None,
    detail: Detail | None = None,
) -> Run:
    """Audit the repos ``query`` selects (an organisation, or any slice the listing gives) as
    ``eosfix hub`` does, to the end; the Run, for its counts, ``exit_code`` and
    ``source.errors`` (a listing that failed).

    ``on_result(result)``: each repo's ``Result``, in listing order, as soon as it is known
    (``result.row()``: its table row; ``result.item.downloads``). ``on_progress(done, total,
    status)``: after each repo, ``total`` being None until the listing is complete (unless
    ``query.limit`` bounds it) and ``status`` the quotas left and an ETA (``api 812/1000
    left; ...; ETA 4 min``). Setting ``stop`` stops the audit early but whole, as a Ctrl-C
    does (``run.interrupted``). ``detail``: each result's JSON or text renderer
    (``eosfix.render.batch``), else none."""
    reader = reader or HubReader(token=token, workers=workers)
    source = HubSource(reader, query=query, state=state)
    progress = _Callbacks(source, on_progress) if on_progress is not None else None
    run = Run(source, detail=detail, progress=progress)
    for result in run:  # the run closes the source when it ends
        if on_result is not None:
            on_result(result)
        if stop is not None and stop.is_set() and not run.interrupted:
            run.stop()
    return run


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _named(unit: Unit) -> Unit:
    """An error about a file names it by its place in the repo: ``org/name/file: ...``."""
    v = unit.verdict
    if v is None or v.error_file is None:
        return unit
    error = f"{unit.item.repo_id}/{v.error}"
    detail = None if v.detail is None else with_error(v.detail, error)
    return unit.but(verdict=dataclasses.replace(v, error=error, error_file=None, detail=detail))
