"""The Hugging Face hub cache: check every model snapshot, fix them without harming the cache.

Layout (huggingface_hub 2.x)::

    <cache>/models--org--name/blobs/<git sha1 or sha256>      content, named by its hash
    <cache>/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<hash>
    <cache>/models--org--name/refs/main                       the commit sha
    <cache>/models--org--name/.no_exist/<commit>/<path>       "not in this commit" marker

Snapshots are found with the scanner of ``huggingface_hub.scan_cache_dir``, run repo by repo
(its ``CorruptedCacheException`` warnings name the corrupted repos, reported and skipped). Each distinct set of stop-relevant file contents is
analyzed once: the key of a snapshot is its (repo path, blob hash) pairs, and a blob's name *is*
its content hash, so revisions and repos that share files share one analysis. Many distinct
analyses run in 2 worker processes. Fixing re-analyzes each snapshot under its lock and writes
through ``api.fix(replace_symlinks=True)``: the link is replaced by a regular file, a blob is
never written. A ``.no_exist`` marker for a written file is deleted, or transformers would not
see the new file offline.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import multiprocessing
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from eosfix import api
from eosfix.errors import EosfixError, WriteError
from eosfix.patch import FilePatch
from eosfix.repo import RELEVANT_FILES, TEMPLATE_DIR, TOKENIZER_JSON
from eosfix.report import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, result_to_dict

KEY_FILES = frozenset((*RELEVANT_FILES, TOKENIZER_JSON))
POOL_MIN = 24  # fewer distinct analyses than this run in-process (a pool costs ~50 ms)
WORKERS = 2
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


@dataclass(frozen=True)
class CacheScan:
    cache_dir: Path
    snapshots: tuple[Snapshot, ...]
    corrupted: tuple[Corrupted, ...]


def _is_key_file(rel: str) -> bool:
    if rel in KEY_FILES:
        return True
    head, _, tail = rel.partition("/")
    return head == TEMPLATE_DIR and "/" not in tail and tail.endswith(".jinja")


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


def _repo_scanner() -> Callable[[Path], Iterator[Any]] | None:
    """scan_cache_dir's own per-repo scanner (same rules, same CorruptedCacheException), so
    the cache is read one repo at a time and memory stays flat. None if this
    huggingface_hub has no such function: then the whole scan_cache_dir() is used."""
    try:
        from huggingface_hub.utils import _cache_manager as cm
        from huggingface_hub.utils import _shared_blobs as sb

        scan_repo, ignored = cm._scan_cached_repo, set(cm.FILES_TO_IGNORE)
        store_name, is_store = sb.SHARED_BLOBS_DIR_NAME, sb.is_shared_blobs_dir
    except (ImportError, AttributeError):  # pragma: no cover - other huggingface_hub versions
        return None

    def scan(root: Path) -> Iterator[Any]:
        """Yield CachedRepoInfo or CorruptedCacheException, repo by repo, like scan_cache_dir."""
        for path in sorted(root.iterdir()):
            if path.name in ignored or path.name in (".locks", "CACHEDIR.TAG"):
                continue
            if path.name == store_name and is_store(path):
                continue
            try:
                yield scan_repo(path)
            except cm.CorruptedCacheException as exc:
                yield exc

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
                    pairs.append((rel, file_identity(f.file_path, f.blob_path)))
        yield Snapshot(repo.repo_id, rev.commit_hash, tuple(sorted(rev.refs)),
                       rev.snapshot_path, tuple(sorted(pairs)))


def scan_cache(cache_dir: str | Path) -> CacheScan:
    """Every model snapshot of the cache, with its analysis key; corrupted repos apart.

    Same rules and warnings as ``huggingface_hub.scan_cache_dir``, but read repo by repo
    and reduced to what eosfix needs: scan_cache_dir keeps an object per file of the whole
    cache (45,000 for 5,000 snapshots), which made peak memory grow with the cache.
    """
    from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

    root = Path(cache_dir).expanduser().resolve()
    if not root.exists():
        raise CacheError("no Hugging Face cache here (set HF_HUB_CACHE or pass --cache-dir)",
                         path=root)
    if not root.is_dir():
        raise CacheError("not a directory", path=root)
    scanner = _repo_scanner() or _scan_all
    snapshots: list[Snapshot] = []
    warnings: list[Exception] = []
    try:
        for item in scanner(root):
            if isinstance(item, CorruptedCacheException):
                warnings.append(item)
            elif item.repo_type == "model":
                snapshots.extend(_snapshots_of(item))
    except (CacheNotFound, ValueError, OSError) as exc:
        raise CacheError(f"cannot scan the cache: {exc}", path=root) from None
    snapshots.sort(key=lambda s: (s.repo_id.lower(), "main" not in s.refs, s.refs, s.commit))
    corrupted = sorted(_corrupted(root, warnings), key=lambda c: c.name)
    return CacheScan(root, tuple(snapshots), tuple(corrupted))


def select(scan: CacheScan, repos: Sequence[str] = (), revisions: Sequence[str] = ()) -> CacheScan:
    """Keep snapshots whose repo id matches a glob (case-insensitive) and whose refs or commit
    match a revision: a ref name ("main", "refs/pr/1") or a commit sha (or its prefix)."""

    def repo_ok(repo_id: str | None) -> bool:
        if not repos:
            return True
        return repo_id is not None and any(
            fnmatch.fnmatchcase(repo_id.lower(), p.lower()) for p in repos
        )

    def rev_ok(s: Snapshot) -> bool:
        if not revisions:
            return True
        return any(
            r in s.refs or f"refs/heads/{r}" in s.refs or r.removeprefix("refs/heads/") in s.refs
            or (len(r) >= 7 and s.commit.startswith(r.lower()))
            for r in revisions
        )

    return CacheScan(
        scan.cache_dir,
        tuple(s for s in scan.snapshots if repo_ok(s.repo_id) and rev_ok(s)),
        tuple(c for c in scan.corrupted if not repos or repo_ok(c.repo_id)),
    )


# --- analysis: compact, picklable results ----------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What one analysis (or fix) of a snapshot found, small enough to keep thousands."""

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


def _error_text(exc: EosfixError, root: Path) -> str:
    """The error with its path relative to the snapshot (the analysis may be shared)."""
    if exc.path is not None:
        try:
            return f"{Path(exc.path).relative_to(root).as_posix()}: {exc.message}"
        except ValueError:
            pass
    return str(exc)


def to_verdict(result: api.RepoResult, detail: bool) -> Verdict:
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
        raise WriteError(f"written, but its .no_exist marker stays: {exc.strerror or exc}",
                         path=marker) from None


def fix_snapshot(path: Path, detail: bool) -> Verdict:
    """Fix one snapshot: replace the link, never the blob; drop the .no_exist marker."""
    callback = functools.partial(drop_no_exist_marker, path)
    return to_verdict(api.fix(path, replace_symlinks=True, after_write=callback), detail)


# --- running the batch ------------------------------------------------------------------------


class Progress:
    """Progress hooks; the CLI passes a rich progress bar, the default does nothing."""

    def start(self, stage: str, total: int) -> None:
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


def run_many(
    fn: Callable[[Path, bool], Verdict],
    paths: Sequence[Path],
    detail: bool,
    *,
    workers: int = WORKERS,
    progress: Progress | None = None,
) -> Iterator[Verdict]:
    """``fn`` over ``paths`` in order: in-process when few, else in ``workers`` processes."""
    progress = progress or Progress()
    workers = min(workers, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < POOL_MIN:
        for path in paths:
            yield fn(path, detail)
            progress.advance()
        return
    chunk = max(1, min(16, len(paths) // (workers * 8)))
    done = 0
    try:
        with ProcessPoolExecutor(workers, mp_context=_mp_context()) as pool:
            for verdict in pool.map(fn, paths, repeat(detail), chunksize=chunk):
                done += 1
                yield verdict
                progress.advance()
    except BrokenProcessPool:
        # A worker died (killed, out of memory): report what is left instead of aborting.
        for _ in paths[done:]:
            yield Verdict("error", error="the analysis process died (out of memory?)")
            progress.advance()


@dataclass(frozen=True)
class SnapshotResult:
    snapshot: Snapshot
    verdict: Verdict

    @property
    def verdict_name(self) -> str:
        v = self.verdict
        if v.status == "error":
            return "error"
        if v.written:
            return "fixed"
        if v.status == "ok" and v.codes:
            return "warned"
        return v.status


@dataclass
class CacheRun:
    """The outcome of one `eosfix cache` run; owns the exit code."""

    cache_dir: Path
    fixing: bool
    results: list[SnapshotResult] = field(default_factory=list)
    corrupted: list[Corrupted] = field(default_factory=list)
    analyses: int = 0  # distinct file sets analyzed

    @property
    def exit_code(self) -> int:
        names = [r.verdict_name for r in self.results]
        if self.corrupted or "error" in names:
            return EXIT_INPUT
        if any(n in ("fixed", "fixable", "problems") for n in names):
            return EXIT_FINDINGS
        return EXIT_OK

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(
            ("fixed", "fixable", "problems", "warned", "ok", "no_template", "error"), 0
        )
        for r in self.results:
            out[r.verdict_name] += 1
        out["corrupted"] = len(self.corrupted)
        return out


def run_cache(
    scan: CacheScan,
    *,
    fix: bool = False,
    detail: bool = False,
    workers: int = WORKERS,
    progress: Progress | None = None,
) -> CacheRun:
    """Analyze each distinct file set once; with ``fix``, fix every snapshot that needs it."""
    progress = progress or Progress()
    groups: dict[Key, list[Snapshot]] = {}
    for snap in scan.snapshots:
        groups.setdefault(snap.key, []).append(snap)
    reps = [members[0].path for members in groups.values()]
    progress.start("analyzing", len(reps))
    verdicts = dict(zip(groups, run_many(analyze_snapshot, reps, detail, workers=workers,
                                         progress=progress), strict=True))
    by_snapshot = {s: verdicts[s.key] for s in scan.snapshots}
    if fix:
        todo = [s for s in scan.snapshots if by_snapshot[s].has_patches]
        progress.start("fixing", len(todo))
        fixed = run_many(fix_snapshot, [s.path for s in todo], detail, workers=workers,
                         progress=progress)
        by_snapshot.update(zip(todo, fixed, strict=True))
    results = [SnapshotResult(s, by_snapshot[s]) for s in scan.snapshots]
    return CacheRun(scan.cache_dir, fix, results, list(scan.corrupted), len(reps))


def run_to_dict(run: CacheRun) -> dict[str, Any]:
    """The JSON shape: ``repos`` holds one entry per snapshot, as `eosfix check` does per
    folder (result_to_dict keys) plus repo_id, revision, refs and verdict."""
    repos = []
    for r in run.results:
        s, v = r.snapshot, r.verdict
        entry: dict[str, Any] = {"path": str(s.path), "name": s.label, "repo_id": s.repo_id,
                                 "revision": s.commit, "refs": list(s.refs),
                                 "verdict": r.verdict_name}
        entry.update(v.detail or {"status": v.status, "error": v.error,
                                  "written": list(v.written)})
        repos.append(entry)
    return {
        "cache_dir": str(run.cache_dir),
        "repos": repos,
        "corrupted": [{"name": c.name, "repo_id": c.repo_id, "error": c.message}
                      for c in run.corrupted],
        "summary": {"snapshots": len(run.results), "analyses": run.analyses, **run.counts()},
        "exit_code": run.exit_code,
    }
