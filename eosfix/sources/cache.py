"""The Hugging Face hub cache: check every model snapshot, fix them without harming the cache.

Layout (huggingface_hub 2.x)::

    <cache>/models--org--name/blobs/<git sha1 or sha256>      content, named by its hash
    <cache>/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<hash>
    <cache>/models--org--name/refs/main                       the commit sha
    <cache>/models--org--name/.no_exist/<commit>/<path>       "not in this commit" marker

Snapshots are found with the scanner of ``huggingface_hub.scan_cache_dir``, run repo by repo
(its ``CorruptedCacheException`` warnings name the corrupted repos, reported and skipped). Each
distinct set of stop-relevant file contents is analyzed once: the key of a snapshot is its
(repo path, blob hash) pairs, and a blob's name *is* its content hash, so revisions and repos
that share files share one analysis. Many analyses run in 2 worker processes. Fixing
re-analyzes each snapshot under its lock and writes through ``api.fix(replace_symlinks=True)``:
the link is replaced by a regular file, a blob is never written. A ``.no_exist`` marker for a
written file is deleted, or transformers would not see the new file offline.

The run is a stream, so memory stays flat however large the cache: repos are read one at a
time, at most WINDOW snapshots wait for their analysis, analyses are shared through a bounded
LRU, workers return compact Verdicts, and each result is dropped once written out (a JSON
entry) or reduced to a Row of short strings (the text table).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import re
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from eosfix import api
from eosfix.errors import EosfixError, WriteError
from eosfix.patch import FilePatch
from eosfix.repo import RELEVANT_FILES, TOKENIZER_JSON, is_relevant_file
from eosfix.report import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_OK,
    VERDICTS,
    result_to_dict,
    verdict_of,
)

KEY_FILES = frozenset((*RELEVANT_FILES, TOKENIZER_JSON))
POOL_MIN = 24  # the first jobs run in-process; worker processes start at this many
WORKERS = 2
BATCH = 8  # jobs sent to a worker at once
WINDOW = 128  # snapshots waiting for their analysis (or fix): bounds memory, feeds the pool
LRU_SIZE = 1024  # distinct analyses kept for sharing (compact verdicts: ~1 KB each)
LRU_DETAIL = 64  # ... with the JSON detail of each (~15 KB)
_HASH_NAME = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_HASH_LIMIT = 4 * 1024 * 1024  # regular files up to this size are keyed by content hash

Key = tuple[tuple[str, str], ...]


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """The cache huggingface_hub uses, from the environment *now* (its constants are frozen
    at import): HF_HUB_CACHE, the legacy HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub."""
    env = dict(os.environ) if env is None else env
    raw = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not raw:
        home = env.get("HF_HOME") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "huggingface",
        )
        raw = os.path.join(os.path.expandvars(os.path.expanduser(home)), "hub")
    return Path(os.path.expandvars(os.path.expanduser(raw)))


class CacheError(EosfixError):
    """The cache directory itself cannot be scanned."""


@dataclass(frozen=True)
class Snapshot:
    repo_id: str
    commit: str
    refs: tuple[str, ...]
    path: Path  # <cache>/models--org--name/snapshots/<commit>
    key: Key

    @property
    def short(self) -> str:
        return self.commit[:8]

    @property
    def label(self) -> str:
        return f"{self.repo_id}@{self.short}"


@dataclass(frozen=True)
class Corrupted:
    """A cache entry scan_cache_dir could not read (broken link, missing snapshot...)."""

    name: str  # top-level folder name in the cache, "" when unknown
    repo_id: str | None
    message: str


def _is_key_file(rel: str) -> bool:
    return rel == TOKENIZER_JSON or is_relevant_file(rel)


def git_sha1_file(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_identity(file_path: Path, blob_path: Path) -> str:
    """What decides a file's content: its blob's name (a content hash) for a link into
    ``blobs/``; the git sha1 of a regular file (a snapshot file eosfix already replaced)."""
    if blob_path != file_path:
        return blob_path.name if _HASH_NAME.match(blob_path.name) else str(blob_path)
    try:
        st = file_path.stat()
        if st.st_size <= _HASH_LIMIT:
            return git_sha1_file(file_path)
    except OSError:
        return f"unreadable:{file_path}"
    return f"file:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _repo_id_of(folder: str) -> tuple[str, str] | None:
    """("model", "org/name") for "models--org--name"."""
    prefix, sep, rest = folder.partition("--")
    if not sep or not rest:
        return None
    return prefix.removesuffix("s"), rest.replace("--", "/")


def _corrupted(cache_dir: Path, warnings: Iterable[Exception]) -> list[Corrupted]:
    prefix = re.compile(re.escape(str(cache_dir)) + r"/([^/\s)'\"]+)")
    out = []
    for warning in warnings:
        match = prefix.search(str(warning))
        name = match.group(1) if match else ""
        kind_id = _repo_id_of(name)
        if kind_id is not None and kind_id[0] != "model":
            continue  # datasets and spaces are not eosfix's business
        out.append(Corrupted(name, kind_id[1] if kind_id else None, str(warning)))
    return out


def _repo_scanner() -> Callable[[Path], Any] | None:
    """scan_cache_dir's own per-repo scanner (same rules, same CorruptedCacheException), so
    the cache is read one repo at a time and memory stays flat: ``scan(folder)`` gives a
    CachedRepoInfo, the CorruptedCacheException, or None for what scan_cache_dir skips.
    None if this huggingface_hub has no such function: then the whole scan_cache_dir()
    is used."""
    try:
        from huggingface_hub.utils import _cache_manager as cm
        from huggingface_hub.utils import _shared_blobs as sb

        scan_repo, ignored = cm._scan_cached_repo, set(cm.FILES_TO_IGNORE)
        store_name, is_store = sb.SHARED_BLOBS_DIR_NAME, sb.is_shared_blobs_dir
    except (ImportError, AttributeError):  # pragma: no cover - other huggingface_hub versions
        return None

    def scan(path: Path) -> Any:
        if path.name in ignored or path.name in (".locks", "CACHEDIR.TAG"):
            return None
        if path.name == store_name and is_store(path):
            return None
        try:
            return scan_repo(path)
        except cm.CorruptedCacheException as exc:
            return exc

    return scan


def _scan_all(root: Path) -> Iterator[Any]:
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(root)
    yield from info.repos
    yield from info.warnings


def _snapshots_of(repo: Any) -> Iterator[Snapshot]:
    for rev in repo.revisions:
        pairs = []
        for f in rev.files:
            if f.file_name in KEY_FILES or f.file_name.endswith(".jinja"):
                rel = f.file_path.relative_to(rev.snapshot_path).as_posix()
                if _is_key_file(rel):
                    pairs.append((sys.intern(rel), file_identity(f.file_path, f.blob_path)))
        yield Snapshot(
            repo.repo_id,
            rev.commit_hash,
            tuple(sorted(rev.refs)),
            rev.snapshot_path,
            tuple(sorted(pairs)),
        )


def _order(s: Snapshot) -> tuple[str, bool, tuple[str, ...], str]:
    return s.repo_id.lower(), "main" not in s.refs, s.refs, s.commit


def _group_of(folder: str) -> str:
    """Folders whose snapshots sort together: model repos whose ids differ only by case."""
    kind_id = _repo_id_of(folder)
    return "m:" + kind_id[1].lower() if kind_id is not None else "x:" + folder


def _scanned(folder: str) -> bool:
    """Folders scan_cache_dir could report a *model* from: not datasets, spaces, or any other
    known type (eosfix drops their corruption warnings too); unparsable ones are reported."""
    kind_id = _repo_id_of(folder)
    return kind_id is None or kind_id[0] == "model"


def _rev_ok(commit: str, refs: Iterable[str], revisions: Sequence[str]) -> bool:
    if not revisions:
        return True
    refs = set(refs)
    return any(
        r in refs
        or f"refs/heads/{r}" in refs
        or r.removeprefix("refs/heads/") in refs
        or (len(r) >= 7 and commit.startswith(r.lower()))
        for r in revisions
    )


def _read_refs(repo: Path) -> dict[str, list[str]]:
    """commit -> ref names, from ``refs/`` (as scan_cache_dir reads them)."""
    out: dict[str, list[str]] = {}
    refs = repo / "refs"
    for path in refs.glob("**/*"):
        try:
            if path.is_file():
                out.setdefault(path.read_text(), []).append(path.relative_to(refs).as_posix())
        except (OSError, UnicodeDecodeError):
            continue
    return out


@dataclass(frozen=True)
class CacheScan:
    """What to check: the cache's top-level folders, in output order, and revision filters.

    Iterating reads the cache repo by repo and yields Snapshot (ordered by repo id, case
    insensitive, then main first, refs, commit) and Corrupted items, keeping nothing: memory
    does not grow with the cache. ``snapshots`` and ``corrupted`` read the whole scan into
    memory (tests, small caches).
    """

    cache_dir: Path
    folders: tuple[str, ...]  # sorted by _group_of, then name
    revisions: tuple[str, ...] = ()
    filtered: bool = False  # folders were selected by repo id

    def __iter__(self) -> Iterator[Snapshot | Corrupted]:
        scan = _repo_scanner()
        if scan is None:
            yield from self._iter_all()
            return
        for _, names in itertools.groupby(self.folders, key=_group_of):
            group: list[Snapshot] = []
            for name in names:
                path = self.cache_dir / name
                kind_id = _repo_id_of(name)
                repo_id = kind_id[1] if kind_id else None
                try:
                    item = scan(path)
                except (OSError, ValueError) as exc:  # unreadable: that repo only
                    yield Corrupted(name, repo_id, f"cannot read {path}: {exc}")
                    continue
                if isinstance(item, Exception):  # CorruptedCacheException
                    yield Corrupted(name, repo_id, str(item))
                elif item is not None and item.repo_type == "model":
                    group.extend(
                        s for s in _snapshots_of(item) if _rev_ok(s.commit, s.refs, self.revisions)
                    )
            group.sort(key=_order)
            yield from group

    def _iter_all(self) -> Iterator[Snapshot | Corrupted]:
        """The whole scan_cache_dir() at once (a huggingface_hub without the per-repo scanner)."""
        from huggingface_hub.errors import CorruptedCacheException

        wanted = set(self.folders)
        snapshots: list[Snapshot] = []
        warnings: list[Exception] = []
        try:
            for item in _scan_all(self.cache_dir):
                if isinstance(item, CorruptedCacheException):
                    warnings.append(item)
                elif item.repo_type == "model" and item.repo_path.name in wanted:
                    snapshots.extend(
                        s for s in _snapshots_of(item) if _rev_ok(s.commit, s.refs, self.revisions)
                    )
        except (OSError, ValueError) as exc:
            raise CacheError(f"cannot scan the cache: {exc}", path=self.cache_dir) from None
        for c in _corrupted(self.cache_dir, warnings):
            if not self.filtered or c.name in wanted:
                yield c
        snapshots.sort(key=_order)
        yield from snapshots

    @functools.cached_property
    def _everything(self) -> tuple[tuple[Snapshot, ...], tuple[Corrupted, ...]]:
        snapshots: list[Snapshot] = []
        corrupted: list[Corrupted] = []
        for item in self:
            if isinstance(item, Corrupted):
                corrupted.append(item)
            else:
                snapshots.append(item)
        return tuple(snapshots), tuple(sorted(corrupted, key=lambda c: c.name))

    @property
    def snapshots(self) -> tuple[Snapshot, ...]:
        return self._everything[0]

    @property
    def corrupted(self) -> tuple[Corrupted, ...]:
        return self._everything[1]

    def estimate(self) -> int:
        """About how many snapshots iterating gives, for a progress bar: the folders under
        each repo's ``snapshots/`` (and its refs, with a revision filter). Cheap: no files."""
        n = 0
        for name in self.folders:
            kind_id = _repo_id_of(name)
            if kind_id is None:
                continue
            repo = self.cache_dir / name
            try:
                with os.scandir(repo / "snapshots") as entries:
                    commits = [e.name for e in entries if e.is_dir()]
            except OSError:
                continue
            if self.revisions:
                refs = _read_refs(repo)
                commits = [c for c in commits if _rev_ok(c, refs.get(c, ()), self.revisions)]
            n += len(commits)
        return n


def scan_cache(cache_dir: str | Path) -> CacheScan:
    """The model repos of the cache, to iterate for their snapshots (and corrupted repos).

    Same rules and warnings as ``huggingface_hub.scan_cache_dir``, but read repo by repo
    when iterated, and reduced to what eosfix needs: scan_cache_dir keeps an object per
    file of the whole cache (45,000 for 5,000 snapshots), which made memory grow with it.
    Only the top-level listing happens here (its errors are a CacheError).
    """
    root = Path(cache_dir).expanduser().resolve()
    if not root.exists():
        raise CacheError(
            "no Hugging Face cache here (set HF_HUB_CACHE or pass --cache-dir)", path=root
        )
    if not root.is_dir():
        raise CacheError("not a directory", path=root)
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise CacheError(f"cannot scan the cache: {exc.strerror or exc}", path=root) from None
    folders = sorted((n for n in names if _scanned(n)), key=lambda n: (_group_of(n), n))
    return CacheScan(root, tuple(folders))


def select(scan: CacheScan, repos: Sequence[str] = (), revisions: Sequence[str] = ()) -> CacheScan:
    """Keep snapshots whose repo id matches a glob (case-insensitive) and whose refs or commit
    match a revision: a ref name ("main", "refs/pr/1") or a commit sha (or its prefix)."""

    def repo_ok(folder: str) -> bool:
        kind_id = _repo_id_of(folder)
        return kind_id is not None and any(
            fnmatch.fnmatchcase(kind_id[1].lower(), p.lower()) for p in repos
        )

    if repos:
        scan = dataclasses.replace(
            scan, folders=tuple(filter(repo_ok, scan.folders)), filtered=True
        )
    if revisions:
        scan = dataclasses.replace(scan, revisions=tuple(revisions))
    return scan


# --- analysis: compact, picklable results ----------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What one analysis (or fix) of a snapshot found: a few ids and codes, no texts."""

    status: str  # ok | fixable | problems | no_template | error
    terminators: tuple[tuple[str, int | None], ...] = ()
    eos: tuple[int, ...] | None = None  # current stop ids, as transformers reads them
    eos_source: str | None = None
    proposed: tuple[int, ...] | None = None
    codes: tuple[str, ...] = ()  # finding codes
    has_patches: bool = False
    written: tuple[str, ...] = ()
    error: str | None = None
    detail: dict[str, Any] | None = None  # result_to_dict() without path/name (JSON output)

    @property
    def name(self) -> str:
        """The verdict of the table and the counts: fixed | warned | ... | the status."""
        return verdict_of(self.status, written=bool(self.written), has_findings=bool(self.codes))

    @functools.cached_property
    def cells(self) -> tuple[str, str, str]:
        """(ends a turn, stops on, note after the verdict) of the table, made once per
        verdict: the rows of snapshots sharing an analysis share these strings."""
        terms = "\n".join(f"{c} {i}" if i is not None else c for c, i in self.terminators)
        eos = "" if self.status == "error" else _ids(self.eos)
        if (
            self.eos_source
            and self.eos_source != "generation_config.json"
            and self.status != "error"
        ):
            eos += f" (from {self.eos_source})"
        note = ""
        if self.name in ("fixable", "fixed", "problems") and self.proposed is not None:
            note += f" -> {_ids(self.proposed)}"
        if self.error:
            note += f": {self.error}"
        return terms or "-", eos, note


def _ids(ids: tuple[int, ...] | None) -> str:
    if ids is None:
        return "(not set)"
    return str(ids[0]) if len(ids) == 1 else "[" + ", ".join(map(str, ids)) + "]"


def _error_text(exc: EosfixError, root: Path) -> str:
    """The error with its path relative to the snapshot (the analysis may be shared)."""
    if exc.path is not None:
        try:
            return f"{Path(exc.path).relative_to(root).as_posix()}: {exc.message}"
        except ValueError:
            pass
    return str(exc)


def to_verdict(result: api.RepoResult, detail: bool) -> Verdict:
    """The compact verdict of a RepoResult (whose check, probes and texts are then dropped)."""
    extra = None
    if detail:
        extra = result_to_dict(result)
        extra.pop("path", None)
        extra.pop("name", None)
    if result.error is not None:
        if extra is not None:
            extra["error"] = _error_text(result.error, result.path)
        return Verdict("error", error=_error_text(result.error, result.path), detail=extra)
    c = result.check
    assert c is not None
    return Verdict(
        status=c.status.value,
        terminators=tuple((t.content, t.id) for t in c.terminators.terminators),
        eos=c.stop.ids,
        eos_source=c.stop.source,
        proposed=c.proposed,
        codes=tuple(f.code for f in c.findings),
        has_patches=bool(result.patches),
        written=result.written,
        detail=extra,
    )


def analyze_snapshot(path: Path, detail: bool) -> Verdict:
    """Check one snapshot folder (read only). Runs in a worker process."""
    return to_verdict(api.check(path), detail)


def drop_no_exist_marker(snapshot: Path, target: Path, patch: FilePatch) -> None:
    """After writing ``patch.file``: delete ``.no_exist/<commit>/<file>``, which would make
    ``try_to_load_from_cache`` (and transformers offline) ignore the new file."""
    marker = snapshot.parent.parent / ".no_exist" / snapshot.name / patch.file
    try:
        marker.unlink(missing_ok=True)
    except OSError as exc:
        raise WriteError(
            f"written, but its .no_exist marker stays: {exc.strerror or exc}", path=marker
        ) from None


def fix_snapshot(path: Path, detail: bool) -> Verdict:
    """Fix one snapshot: replace the link, never the blob; drop the .no_exist marker."""
    callback = functools.partial(drop_no_exist_marker, path)
    return to_verdict(api.fix(path, replace_symlinks=True, after_write=callback), detail)


# --- running the batch ------------------------------------------------------------------------


class Progress:
    """Progress hooks; the CLI passes a rich progress bar, the default does nothing."""

    wants_total = False  # True: start() gets scan.estimate() (a listing of every repo)

    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


def _mp_context() -> Any:
    # fork is cheapest (modules already imported), but forking a threaded process can deadlock
    # (Python 3.12+ warns): then use forkserver.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform == "linux":
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["eosfix.cache"])
    return ctx


Job = Callable[[Path, bool], Verdict]
_DIED = Verdict("error", error="the analysis process died (out of memory?)")


def _run_batch(fn: Job, paths: Sequence[Path], detail: bool) -> list[Verdict]:
    return [fn(path, detail) for path in paths]


class _Batch:
    """Up to BATCH jobs of one function, sent to a worker together."""

    __slots__ = ("fn", "future", "paths", "sent", "verdicts")

    def __init__(self, fn: Job) -> None:
        self.fn = fn
        self.paths: list[Path] = []
        self.sent = False
        self.future: Future[list[Verdict]] | None = None
        self.verdicts: list[Verdict] | None = None


Ticket = tuple[_Batch, int]  # a job: its batch and its place in it


class _Jobs:
    """Runs jobs in batches: in this process while there are fewer than POOL_MIN, then in
    ``workers`` processes started on demand (a pool costs ~50 ms). If a worker dies, its
    jobs and every later one become error verdicts."""

    def __init__(self, detail: bool, workers: int) -> None:
        self.detail = detail
        self.workers = min(workers, os.cpu_count() or 1)
        self.count = 0
        self.open: dict[Job, _Batch] = {}
        self.pool: ProcessPoolExecutor | None = None
        self.broken = False

    def submit(self, fn: Job, path: Path) -> Ticket:
        batch = self.open.get(fn)
        if batch is None:
            batch = self.open[fn] = _Batch(fn)
        batch.paths.append(path)
        self.count += 1
        if len(batch.paths) >= BATCH:
            self._send(batch)
        return batch, len(batch.paths) - 1

    def flush(self) -> None:
        for batch in list(self.open.values()):
            self._send(batch)

    def _send(self, batch: _Batch) -> None:
        if self.open.get(batch.fn) is batch:
            del self.open[batch.fn]
        batch.sent = True
        if self.broken:
            batch.verdicts = [_DIED] * len(batch.paths)
        elif self.workers > 1 and self.count >= POOL_MIN:
            if self.pool is None:
                self.pool = ProcessPoolExecutor(self.workers, mp_context=_mp_context())
            try:
                batch.future = self.pool.submit(_run_batch, batch.fn, batch.paths, self.detail)
            except BrokenProcessPool:
                self.broken = True
                batch.verdicts = [_DIED] * len(batch.paths)
        # else: run in this process when its result is needed

    def result(self, ticket: Ticket) -> Verdict:
        batch, index = ticket
        if batch.verdicts is None:
            if not batch.sent:
                self._send(batch)
            if batch.future is not None:
                try:
                    batch.verdicts = batch.future.result()
                except BrokenProcessPool:
                    self.broken = True
                    batch.verdicts = [_DIED] * len(batch.paths)
                batch.future = None
            elif batch.verdicts is None:
                batch.verdicts = _run_batch(batch.fn, batch.paths, self.detail)
            batch.paths = []
        return batch.verdicts[index]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


class _Lru:
    """key -> Verdict, the most recently used ``size`` only."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[bytes, Verdict] = OrderedDict()

    def get(self, key: bytes) -> Verdict | None:
        verdict = self.data.get(key)
        if verdict is not None:
            self.data.move_to_end(key)
        return verdict

    def put(self, key: bytes, verdict: Verdict) -> None:
        self.data[key] = verdict
        self.data.move_to_end(key)
        if len(self.data) > self.size:
            self.data.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Row:
    """One snapshot of the final table: short strings only (~200 bytes, most shared)."""

    repo_id: str
    revision: str  # short sha, then its refs: "1a2b3c4d (main, refs/pr/1)"
    terminators: str  # "<|im_end|> 151645", one per line; "-" when none
    eos: str  # current stop ids: "151643", "[1, 2] (from config.json)"
    verdict: str  # one of VERDICTS
    note: str  # after the verdict: " -> [proposed ids]", ": error message"


@dataclass(frozen=True)
class SnapshotResult:
    """A snapshot and its verdict, as the run yields them (not kept: see Row)."""

    snapshot: Snapshot
    verdict: Verdict

    @property
    def verdict_name(self) -> str:
        return self.verdict.name

    def row(self) -> Row:
        s, v = self.snapshot, self.verdict
        terms, eos, note = v.cells
        revision = s.short + (f" ({', '.join(s.refs)})" if s.refs else "")
        return Row(s.repo_id, revision, terms, eos, v.name, note)

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry: result_to_dict's keys (as `eosfix check` per folder) plus
        repo_id, revision, refs and verdict."""
        s, v = self.snapshot, self.verdict
        entry: dict[str, Any] = {
            "path": str(s.path),
            "name": s.label,
            "repo_id": s.repo_id,
            "revision": s.commit,
            "refs": list(s.refs),
            "verdict": v.name,
        }
        entry.update(v.detail or {"status": v.status, "error": v.error, "written": list(v.written)})
        return entry


def _key_digest(key: Key) -> bytes:
    return hashlib.blake2b(repr(key).encode(), digest_size=16).digest()


class CacheRun:
    """One `eosfix cache` run, streamed: iterate it (once) for the SnapshotResults in cache
    order. Each analysis is dropped as soon as its result is yielded; the run keeps counts
    (and, with ``keep_rows``, one small Row per snapshot) and owns the exit code.

    Snapshots with the same key share one analysis while it is among the last LRU_SIZE
    distinct ones (revisions of a repo come together); ``analyses`` counts those run.
    """

    def __init__(
        self,
        scan: CacheScan,
        *,
        fix: bool = False,
        detail: bool = False,
        workers: int = WORKERS,
        progress: Progress | None = None,
        keep_rows: bool = False,
    ) -> None:
        self.cache_dir = scan.cache_dir
        self.fixing = fix
        self.corrupted: list[Corrupted] = []
        self.analyses = 0  # analyses run (distinct file sets)
        self.snapshots = 0
        self.repos = 0
        self.rows: list[Row] | None = [] if keep_rows else None
        self._counts = dict.fromkeys(VERDICTS, 0)
        self._group: str | None = None
        self._group_ids: set[str] = set()
        self._stream = self._run(scan, fix, detail, workers, progress or Progress())

    def __iter__(self) -> Iterator[SnapshotResult]:
        return self._stream

    def drain(self) -> CacheRun:
        for _ in self._stream:
            pass
        return self

    @property
    def results(self) -> list[Row]:
        """The rows kept (``keep_rows``), after the run was iterated."""
        return self.rows if self.rows is not None else []

    @property
    def exit_code(self) -> int:
        c = self._counts
        if self.corrupted or c["error"]:
            return EXIT_INPUT
        if c["fixed"] or c["fixable"] or c["problems"]:
            return EXIT_FINDINGS
        return EXIT_OK

    def counts(self) -> dict[str, int]:
        return {**self._counts, "corrupted": len(self.corrupted)}

    def summary(self) -> dict[str, int]:
        return {"snapshots": self.snapshots, "analyses": self.analyses, **self.counts()}

    def _count(self, result: SnapshotResult) -> None:
        s = result.snapshot
        self.snapshots += 1
        self._counts[result.verdict.name] += 1
        group = s.repo_id.lower()  # the scan yields a repo's snapshots (any case) together
        if group != self._group:
            self._group, self._group_ids = group, set()
        if s.repo_id not in self._group_ids:
            self._group_ids.add(s.repo_id)
            self.repos += 1
        if self.rows is not None:
            self.rows.append(result.row())

    def _run(
        self, scan: CacheScan, fix: bool, detail: bool, workers: int, progress: Progress
    ) -> Iterator[SnapshotResult]:
        progress.start(
            "fixing" if fix else "checking", scan.estimate() if progress.wants_total else None
        )
        jobs = _Jobs(detail, workers)
        try:
            pairs = self._analyzed(self._snapshots(scan), jobs, detail)
            if fix:
                pairs = self._fixed(pairs, jobs)
            for snapshot, verdict in pairs:
                result = SnapshotResult(snapshot, verdict)
                self._count(result)
                progress.advance()
                yield result
        finally:
            jobs.close()
        self.corrupted.sort(key=lambda c: c.name)

    def _snapshots(self, scan: CacheScan) -> Iterator[Snapshot]:
        for item in scan:
            if isinstance(item, Corrupted):
                self.corrupted.append(item)
            else:
                yield item

    def _analyzed(
        self, snapshots: Iterable[Snapshot], jobs: _Jobs, detail: bool
    ) -> Iterator[tuple[Snapshot, Verdict]]:
        """(snapshot, verdict) in order; each distinct key analyzed once while in the LRU.
        At most WINDOW snapshots wait for their analysis: memory stays bounded."""
        lru = _Lru(LRU_DETAIL if detail else LRU_SIZE)
        pending: dict[bytes, Ticket] = {}
        window: deque[tuple[Snapshot, bytes, Verdict | Ticket]] = deque()

        def settle() -> tuple[Snapshot, Verdict]:
            snapshot, key, got = window.popleft()
            if isinstance(got, Verdict):
                return snapshot, got
            verdict = jobs.result(got)
            if pending.get(key) is got:
                del pending[key]
                lru.put(key, verdict)
            return snapshot, verdict

        for snapshot in snapshots:
            key = _key_digest(snapshot.key)
            got: Verdict | Ticket | None = lru.get(key) or pending.get(key)
            if got is None:
                got = pending[key] = jobs.submit(analyze_snapshot, snapshot.path)
                self.analyses += 1
            window.append((snapshot, key, got))
            if len(window) > WINDOW:
                yield settle()
        jobs.flush()
        while window:
            yield settle()

    @staticmethod
    def _fixed(
        pairs: Iterable[tuple[Snapshot, Verdict]], jobs: _Jobs
    ) -> Iterator[tuple[Snapshot, Verdict]]:
        """Fix, in order, each snapshot whose verdict has patches (each its own fix)."""
        window: deque[tuple[Snapshot, Verdict | Ticket]] = deque()

        def settle() -> tuple[Snapshot, Verdict]:
            snapshot, got = window.popleft()
            return snapshot, got if isinstance(got, Verdict) else jobs.result(got)

        for snapshot, verdict in pairs:
            window.append(
                (
                    snapshot,
                    jobs.submit(fix_snapshot, snapshot.path) if verdict.has_patches else verdict,
                )
            )
            if len(window) > WINDOW:
                yield settle()
        jobs.flush()
        while window:
            yield settle()


def run_cache(
    scan: CacheScan,
    *,
    fix: bool = False,
    detail: bool = False,
    workers: int = WORKERS,
    progress: Progress | None = None,
) -> CacheRun:
    """The whole run at once, keeping one Row per snapshot in ``results``."""
    return CacheRun(
        scan, fix=fix, detail=detail, workers=workers, progress=progress, keep_rows=True
    ).drain()


def _dumps(value: Any, indent: str) -> str:
    """json.dumps(indent=2) of a value nested at ``indent``, as in the whole document."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def write_json(run: CacheRun, out: TextIO) -> None:
    """Stream the run as JSON, each snapshot's entry written as soon as it is made:
    the same text as json.dumps(document, indent=2), where the document is
    {"cache_dir", "repos": [SnapshotResult.to_dict()...], "corrupted", "summary", "exit_code"}.
    """
    out.write('{\n  "cache_dir": ' + _dumps(str(run.cache_dir), "  ") + ',\n  "repos": [')
    sep = "\n    "
    for result in run:
        out.write(sep + _dumps(result.to_dict(), "    "))
        sep = ",\n    "
    out.write("]" if sep == "\n    " else "\n  ]")
    footer = {
        "corrupted": [
            {"name": c.name, "repo_id": c.repo_id, "error": c.message} for c in run.corrupted
        ],
        "summary": run.summary(),
        "exit_code": run.exit_code,
    }
    out.writelines(f',\n  "{key}": ' + _dumps(value, "  ") for key, value in footer.items())
    out.write("\n}\n")
