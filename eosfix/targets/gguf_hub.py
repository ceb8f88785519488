"""A GGUF repo on the Hub, checked by its files' headers, never their weights: what ``eosfix
check ORG/REPO-GGUF`` (``hf.co/ORG/REPO:QUANT``, ``ORG/REPO/FILE.gguf``) and ``eosfix hub``
do with a repo of GGUF files.

Steps, for one repo at one commit:

1. **files**: the repo's GGUF model files (``eosfix.sources.hub.gguf``: a split by its first
   shard, whose other shards must all be listed), or the one a tag or a path names;
2. **headers**: each file's key/value section by byte ranges (``eosfix.sources.hub.ranges``,
   ``eosfix.containers.gguf.remote``): the first file alone, then the others in parallel, each
   in one request sized from the first; the token arrays they share are compared, not walked
   again (``KNOWN``, shared by every repo of the process); requests and bytes per file kept;
3. **groups**: files with equal stop fields are one group, checked once (the biggest group
   first; another group is a file that differs, with the keys it differs in);
4. **check**: each group's first file through the pipeline as a ``HubGguf`` (llama.cpp's set,
   and ``ollama run hf.co/...`` with the params the Hub hands ollama: the repo's ``params``
   file, fetched when the listing names it, else the Hub's conversion of the template).

Every result names its file (``org/repo/file.gguf``) and holds, in ``extra``, the repo id, its
revision and commit, the group's files with their requests and bytes, what the group differs
in, what ollama gets and the params a pull request would write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosfix import pipeline
from eosfix.analysis.template import render
from eosfix.containers.gguf.container import HubGguf
from eosfix.containers.gguf.format import CONTROL, SPLIT_COUNT_KEY
from eosfix.containers.gguf.hubparams import PARAMS_FILE, OllamaParams, ollama_params, plan_params
from eosfix.containers.gguf.read import (
    GgufModel,
    Header,
    KnownFields,
    model_from_header,
    split_count,
)
from eosfix.containers.gguf.remote import differences, group_alike, read_remote_header
from eosfix.containers.gguf.runtime_table import ollama_stops
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.pipeline import RepoResult
from eosfix.runtimes import Pins
from eosfix.sources.hub.gguf import (
    llama_cpp_pick,
    model_files,
    model_stem,
    ollama_pick,
    quant_label,
    shards,
    split_of,
)
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.ranges import HubFile, resolve_url
from eosfix.sources.hub.read import HubEntry, HubReader

KNOWN = KnownFields()  # the large fields of headers read so far, by every repo of the process
PARALLEL = 8  # files of one repo read at once (the HTTP gate bounds the whole batch)


@dataclass(frozen=True)
class FileRead:
    """One GGUF file's header, read by ranges: what it cost, and what it gave."""

    path: str  # in the repo
    size: int | None
    requests: int
    bytes_read: int
    header: Header | None = None
    error: str | None = None
    shards: tuple[str, ...] = ()

    @property
    def quant(self) -> str | None:
        return quant_label(self.path)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "quant": self.quant,
            "size": self.size,
            "requests": self.requests,
            "bytes_read": self.bytes_read,
            "metadata_bytes": self.header.kv_end if self.header is not None else None,
        }
        if len(self.shards) > 1:
            out["shards"] = list(self.shards)
        if self.error is not None:
            out["error"] = self.error
        return out


def choose_files(
    entry: HubEntry, *, tag: str | None = None, path: str | None = None
) -> tuple[str, ...]:
    """The files a check reads: the one ``path`` names, the one a ``tag`` picks (as ollama's
    Hub does), else every model file. RepoLoadError when the tag or path names none."""
    files = model_files(entry.ggufs)
    if path is not None:
        if path not in entry.ggufs:
            raise RepoLoadError(f"no such file in the repo: {path}", path=entry.repo_id)
        return (model_files([path]) or (path,))[:1]
    if tag is not None:
        picked = ollama_pick(entry.ggufs, tag)
        if picked is None:
            labels = ", ".join(dict.fromkeys(q for f in files if (q := quant_label(f)))) or "none"
            raise RepoLoadError(
                f"no GGUF file for the tag {tag!r} (quant labels here: {labels})",
                path=entry.repo_id,
            )
        return (picked,)
    return files


def read_files(
    reader: HubReader,
    entry: HubEntry,
    paths: Sequence[str],
    *,
    known: KnownFields | None = KNOWN,
) -> tuple[FileRead, ...]:
    """Every file's header: the first alone, the others in parallel (a quantisation of the
    same model, by its name, in one read sized from the first)."""
    if not paths:
        return ()
    first = read_file(reader, entry, paths[0], known=known)
    if len(paths) == 1:
        return (first,)
    stem = model_stem(paths[0])

    def read(path: str) -> FileRead:  # a sibling quantisation is read in one request
        hint = first.header if model_stem(path) == stem else None
        return read_file(reader, entry, path, known=known, hint=hint)

    workers = min(PARALLEL, len(paths) - 1)
    with ThreadPoolExecutor(workers, thread_name_prefix="eosfix-gguf") as pool:
        return (first, *pool.map(read, paths[1:]))


def read_file(
    reader: HubReader,
    entry: HubEntry,
    path: str,
    *,
    known: KnownFields | None = KNOWN,
    hint: Header | None = None,
) -> FileRead:
    """One file's header (an error is the file's own, in one line)."""
    assert entry.sha is not None
    name = f"{entry.repo_id}/{path}"
    source = HubFile(
        reader.http, resolve_url(reader.endpoint, entry.repo_id, entry.sha, path), name
    )
    try:
        header = read_remote_header(name, source, known=known, hint=hint)
        parts = _shards(entry, path, header)
    except RepoLoadError as exc:
        return _failed(path, source, exc.message)
    except hub_errors() as exc:
        return _failed(path, source, describe_error(exc)[0])
    return FileRead(path, source.size, source.requests, source.fetched, header, None, parts)


def _failed(path: str, source: HubFile, why: str) -> FileRead:
    return FileRead(path, source.size, source.requests, source.fetched, error=why)


def _shards(entry: HubEntry, path: str, header: Header) -> tuple[str, ...]:
    """A split's shards, as llama.cpp names them from the first; each must be in the repo."""
    count = split_count(header)
    split = split_of(path)
    if count <= 1:
        if split.count > 1:
            raise RepoLoadError(
                f"named as shard {split.no} of {split.count}, but its header holds no "
                f"{SPLIT_COUNT_KEY} (a later shard: its metadata is in the first)",
                path=f"{entry.repo_id}/{path}",
            )
        return (path,)
    names = shards(path, count)
    if split.no != 1 or split.count != count:
        raise RepoLoadError(
            f"split into {count} files ({SPLIT_COUNT_KEY}), but its name does not end in "
            f"-00001-of-{count:05d}.gguf, so llama.cpp cannot find the other shards",
            path=f"{entry.repo_id}/{path}",
        )
    missing = [n for n in names if n not in entry.ggufs]
    if missing:
        raise RepoLoadError(
            f"shard 1 of {count}; missing from the repo: {', '.join(missing)} (llama.cpp "
            "loads every shard of a split)",
            path=f"{entry.repo_id}/{path}",
        )
    return names


@dataclass(frozen=True)
class GgufRepoCheck:
    """One GGUF repo checked: every file read, and one result per group of alike files (the
    biggest first), then one per file that could not be read."""

    entry: HubEntry
    files: tuple[FileRead, ...]
    results: tuple[RepoResult, ...]
    params: bytes | None  # the repo's params file (None: it has none)

    @property
    def requests(self) -> int:
        return sum(f.requests for f in self.files)

    @property
    def bytes_read(self) -> int:
        return sum(f.bytes_read for f in self.files)

    @property
    def size(self) -> int:
        return sum(f.size or 0 for f in self.files)


def check_gguf_repo(
    reader: HubReader,
    entry: HubEntry,
    *,
    tag: str | None = None,
    path: str | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    known: KnownFields | None = KNOWN,
) -> GgufRepoCheck:
    """Check a GGUF repo (``entry`` resolved: commit and files known) by its files' headers
    (see the module). A file that cannot be read is its own error result; a failure to read
    the params file fails the whole repo (HubError-like errors propagate)."""
    paths = _default_first(entry, choose_files(entry, tag=tag, path=path))
    params = _params_file(reader, entry)
    files = read_files(reader, entry, paths, known=known)
    headers = [(f.path, f.header) for f in files if f.header is not None]
    by_path = {f.path: f for f in files}
    groups = group_alike(headers)
    results: list[RepoResult] = []
    main = groups[0] if groups else None
    for group in groups:
        reads = [by_path[p] for p in group.names]
        differs = differences(main.fields, group.fields) if main is not None else ()
        results.append(
            _check_group(
                entry, reads, params, differs, main.names[0] if main else None, keep_ids, pins
            )
        )
    for f in files:
        if f.error is not None:
            results.append(_error_result(entry, f))
    return GgufRepoCheck(entry, files, tuple(results), params)


def _default_first(entry: HubEntry, paths: Sequence[str]) -> tuple[str, ...]:
    """The file llama.cpp's -hf loads by default first: it stands for its group."""
    pick = llama_cpp_pick(entry.ggufs)
    return tuple(sorted(paths, key=lambda p: p != pick))


def _params_file(reader: HubReader, entry: HubEntry) -> bytes | None:
    if PARAMS_FILE not in entry.ollama_files:
        return None
    assert entry.sha is not None
    return reader.read_file(entry.repo_id, entry.sha, PARAMS_FILE)


def _check_group(
    entry: HubEntry,
    reads: Sequence[FileRead],
    params_file: bytes | None,
    differs: Sequence[str],
    main: str | None,
    keep_ids: Iterable[int],
    pins: Pins | None,
) -> RepoResult:
    first = reads[0]
    assert first.header is not None
    label = f"{entry.repo_id}/{first.path}"
    root = Path(label)
    extra = _extra(entry, reads, differs, main)
    try:
        model = model_from_header(first.header, shards=tuple(Path(s) for s in first.shards))
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label, container="gguf", extra=extra)
    params = ollama_params(model, params_file, render)
    result = pipeline.check_container(
        HubGguf(model, params), root, label=label, keep_ids=keep_ids, pins=pins
    )
    extra["ollama"] = _ollama_extra(result, model, params)
    return dataclasses.replace(result, extra=extra)


def _extra(
    entry: HubEntry, reads: Sequence[FileRead], differs: Sequence[str], main: str | None
) -> dict[str, Any]:
    first = reads[0]
    out: dict[str, Any] = {
        "repo_id": entry.repo_id,
        "revision": entry.revision,
        "sha": entry.sha,
        "file": first.path,
        "quant": first.quant,
        "alike": [f.path for f in reads[1:]],
        "files": [f.as_json() for f in reads],
    }
    if differs and main is not None:
        out["differs_from"] = main
        out["differs_in"] = list(differs)
    picks = {
        "llama.cpp": llama_cpp_pick(entry.ggufs),
        "ollama": ollama_pick(entry.ggufs),
    }
    paths = {f.path for f in reads}
    out["default_for"] = [who for who, p in picks.items() if p in paths]
    return out


def _ollama_extra(result: RepoResult, model: GgufModel, params: OllamaParams) -> dict[str, Any]:
    """What ``ollama run hf.co/...`` gets, and the params a pull request would write."""
    out: dict[str, Any] = {
        "params_from": params.source,
        "conversion": params.conversion.path if params.conversion is not None else None,
        "stop": list(params.stop),
        "params_problem": params.problem,
        "planned": None,
    }
    check = result.check
    if check is None or result.runtimes is None:
        return out
    plan = plan_params(check, model, params, ollama_stops(model).ids)
    if plan is not None:
        types = model.token_types or ()
        ids = model.vocab.text_ids

        def control(strings: Sequence[str]) -> list[str]:
            """The strings that are a control token's text: ollama 0.30+ never sees them."""
            return [
                s for s in strings
                if (i := ids.get(s)) is not None and i < len(types) and types[i] == CONTROL
            ]  # fmt: skip

        out["planned"] = {
            "stop": list(plan.after),
            "removed": list(plan.removed),
            "added": list(plan.added),
            "control": control(plan.added),
            "removed_control": control(plan.removed),
            "file": PARAMS_FILE,
            "old": plan.old,
            "new": plan.new,
        }
    return out


def _error_result(entry: HubEntry, f: FileRead) -> RepoResult:
    label = f"{entry.repo_id}/{f.path}"
    error = RepoLoadError(f.error or "cannot be read", path=label)
    extra: dict[str, object] = {"repo_id": entry.repo_id, "revision": entry.revision,
                                "sha": entry.sha, "file": f.path, "files": [f.as_json()]}  # fmt: skip
    return RepoResult(Path(label), error=error, label=label, container="gguf", extra=extra)


def summary(checked: GgufRepoCheck) -> str:
    """``N GGUF files read by their headers: R requests, B of S`` for a person."""
    n, r = len(checked.files), checked.requests
    what = "1 GGUF file read by its header" if n == 1 else f"{n} GGUF files read by their headers"
    return (
        f"{checked.entry.repo_id}: {what}: {r} request{'s' * (r != 1)}, "
        f"{size_text(checked.bytes_read)} of {size_text(checked.size)}"
    )


def size_text(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
