"""The Hugging Face hub cache as a source: its model snapshots, their refs, corrupted entries.
One module: the scan, what it yields (a snapshot, a GGUF file in one, a corrupted repo) and the
selection by repo and revision read the same layout.

Layout (huggingface_hub 2.x)::

    <cache>/models--org--name/blobs/<git sha1 or sha256>      content, named by its hash
    <cache>/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<hash>
    <cache>/models--org--name/refs/main                       the commit sha
    <cache>/models--org--name/.no_exist/<commit>/<path>       "not in this commit" marker

A model repo is read by a plain walk of its folders (``eosfix.sources.cachewalk``) that
accepts only the ordinary layout; anything else (a broken link, a ref to a missing commit, a
file where a folder belongs, any other top-level folder) goes to the scanner of
``huggingface_hub.scan_cache_dir``, run repo by repo, whose ``CorruptedCacheException``
warnings name the corrupted repos (reported and skipped). So the answer is scan_cache_dir's,
without its object per file of every snapshot, and memory does not grow with the cache. The key of a snapshot is its (repo path, blob hash)
pairs, and a blob's name *is* its content hash, so revisions and repos that share files share
one analysis (``eosfix.batch.cache`` runs them on the batch engine). Fixing a snapshot
replaces its link by a regular file and never writes a blob: ``eosfix.containers.folder.write``.
Nothing here checks, writes or prints.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosfix.core.errors import EosfixError
from eosfix.core.repo import READ_FILES, is_read_file
from eosfix.sources import Key, cachewalk, gguf_models, holds_a_model, holds_a_model_folder
from eosfix.sources.cachewalk import file_identity


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
    """One revision of a cached repo: checked as a folder when it holds a tokenizer's or a
    template's files, or no GGUF model file (``folder``); each GGUF model file it holds is
    checked on its own (``CachedGguf``), as ``eosfix check SNAPSHOT`` does."""

    repo_id: str
    commit: str
    refs: tuple[str, ...]
    path: Path  # <cache>/models--org--name/snapshots/<commit>
    key: Key
    model: bool = True  # False: the snapshot holds no model (sources.holds_a_model)
    folder: bool = True  # a tokenizer's or a template's files (sources.holds_a_model_folder)
    ggufs: tuple[tuple[str, str], ...] = ()  # its GGUF model files: (path, content identity)
    container = "folder"

    @property
    def checked_as_folder(self) -> bool:
        return self.folder or not self.ggufs

    @property
    def short(self) -> str:
        return self.commit[:8]

    @property
    def label(self) -> str:
        return f"{self.repo_id}@{self.short}"

    @property
    def row_name(self) -> str:
        return self.repo_id

    @property
    def revision_cell(self) -> str:
        return self.short + (f" ({', '.join(self.refs)})" if self.refs else "")

    def fields(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.label,
            "repo_id": self.repo_id,
            "revision": self.commit,
            "refs": list(self.refs),
        }


@dataclass(frozen=True)
class CachedGguf:
    """A GGUF model file of a snapshot (a split by its first shard): checked as ``eosfix
    check FILE`` checks it; its key is its content's (the blob's name), so the same file in
    another revision or repo shares one analysis."""

    snapshot: Snapshot
    file: str  # in the snapshot
    identity: str
    container = "gguf"
    model = True

    @property
    def repo_id(self) -> str:
        return self.snapshot.repo_id

    @property
    def path(self) -> Path:
        return self.snapshot.path / self.file

    @property
    def key(self) -> Key:
        return (("\0gguf", self.identity),)  # never a folder's key: no file is named so

    @property
    def revision_cell(self) -> str:
        return self.snapshot.revision_cell

    @property
    def row_name(self) -> str:
        return f"{self.repo_id}/{self.file}"

    def fields(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": f"{self.snapshot.label}/{self.file}",
            "repo_id": self.repo_id,
            "revision": self.snapshot.commit,
            "refs": list(self.snapshot.refs),
            "file": self.file,
        }


@dataclass(frozen=True)
class Corrupted:
    """A cache entry scan_cache_dir could not read (broken link, missing snapshot...)."""

    name: str  # top-level folder name in the cache, "" when unknown
    repo_id: str | None
    message: str


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


def _no_model(rev: Any) -> bool:
    """The snapshot has no config.json, no generation_config.json and no weights: tokenizer
    files only, no model any runtime loads (``eosfix.sources.holds_a_model``, the rule a Hub
    repo's file list is judged by)."""
    names = [f.file_path.relative_to(rev.snapshot_path).as_posix() for f in rev.files]
    return not holds_a_model(names)


def _snapshots_of(repo: Any) -> Iterator[Snapshot]:
    for rev in repo.revisions:
        pairs = []
        names, ids = [], {}
        for f in rev.files:
            rel = f.file_path.relative_to(rev.snapshot_path).as_posix()
            names.append(rel)
            if f.file_name.endswith(".gguf"):
                ids[rel] = file_identity(f.file_path, f.blob_path)
            if (f.file_name in READ_FILES or f.file_name.endswith(".jinja")) and is_read_file(rel):
                pairs.append((sys.intern(rel), file_identity(f.file_path, f.blob_path)))
        yield Snapshot(
            repo.repo_id,
            rev.commit_hash,
            tuple(sorted(rev.refs)),
            rev.snapshot_path,
            tuple(sorted(pairs)),
            not _no_model(rev),
            holds_a_model_folder(names),
            tuple((n, ids[n]) for n in gguf_models(sorted(ids))),
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
                walked = cachewalk.walk_repo(path)
                if walked is not None and repo_id is not None:
                    group.extend(
                        Snapshot(repo_id, *rev)
                        for rev in walked
                        if _rev_ok(rev.commit, rev.refs, self.revisions)
                    )
                    continue
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
