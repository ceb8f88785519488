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

Every result names its file (``org/repo/file.gguf``) and says, in its typed origin fields
(``eosfix.result``), the repo id, its revision and commit (``hub``), the group's files with
their requests and bytes and what the group differs in (``gguf``), what ollama gets and the
params a pull request would write (``ollama_hub``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from eosfix import pipeline
from eosfix.analysis.template import render
from eosfix.containers.gguf.container import HubGguf
from eosfix.containers.gguf.format import CONTROL, SPLIT_COUNT_KEY
from eosfix.containers.gguf.hubparams import PARAMS_FILE, OllamaParams, ParamsPlan, ollama_params
from eosfix.containers.gguf.read import (
    GgufModel,
    Header,
    KnownFields,
    model_from_header,
    split_count,
)
from eosfix.containers.gguf.remote import differences, group_alike, read_remote_header
from eosfix.containers.gguf.runtime_table import HubTable
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.result import GgufGroup, HubOrigin, OllamaHub, RemoteGguf, RepoResult
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

    def hub_file(self) -> RemoteGguf:
        """What a result says of the file (the header itself stays here)."""
        end = self.header.kv_end if self.header is not None else None
        return RemoteGguf(
            self.path, self.quant, self.size, self.requests, self.bytes_read, end, self.shards,
            self.error,
        )  # fmt: skip


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
    hub, group = _origin(entry), _group(entry, reads, differs, main)
    try:
        model = model_from_header(first.header, shards=tuple(Path(s) for s in first.shards))
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label, container="gguf", hub=hub, gguf=group)
    params = ollama_params(model, params_file, render)
    result = pipeline.check_container(
        HubGguf(model, params), root, label=label, keep_ids=keep_ids, pins=pins
    )
    table = result.runtimes
    plan = table.params_plan if isinstance(table, HubTable) else None
    return result._replace(hub=hub, gguf=group, ollama_hub=_ollama_hub(model, params, plan))


def _origin(entry: HubEntry) -> HubOrigin:
    return HubOrigin(entry.repo_id, entry.revision, entry.sha)


def _group(
    entry: HubEntry, reads: Sequence[FileRead], differs: Sequence[str], main: str | None
) -> GgufGroup:
    first = reads[0]
    picks = {
        "llama.cpp": llama_cpp_pick(entry.ggufs),
        "ollama": ollama_pick(entry.ggufs),
    }
    paths = {f.path for f in reads}
    return GgufGroup(
        first.path,
        tuple(f.hub_file() for f in reads),
        first.quant,
        main if differs and main is not None else None,
        tuple(differs) if main is not None else (),
        tuple(who for who, p in picks.items() if p in paths),
    )


def _ollama_hub(model: GgufModel, params: OllamaParams, plan: ParamsPlan | None) -> OllamaHub:
    """What ``ollama run hf.co/...`` gets, and the params a pull request would write (planned
    once, with the runtime table: ``eosfix.containers.gguf.runtime_table.HubTable``)."""
    if plan is None:
        return OllamaHub(params, file=PARAMS_FILE)
    types = model.token_types or ()
    ids = model.vocab.text_ids

    def control(strings: Sequence[str]) -> tuple[str, ...]:
        """The strings that are a control token's text: ollama 0.30+ never sees them."""
        return tuple(
            s for s in strings
            if (i := ids.get(s)) is not None and i < len(types) and types[i] == CONTROL
        )  # fmt: skip

    return OllamaHub(params, plan, control(plan.added), control(plan.removed), PARAMS_FILE)


def _error_result(entry: HubEntry, f: FileRead) -> RepoResult:
    label = f"{entry.repo_id}/{f.path}"
    error = RepoLoadError(f.error or "cannot be read", path=label)
    group = GgufGroup(f.path, (f.hub_file(),), read=False)
    return RepoResult(
        Path(label), error=error, label=label, container="gguf", hub=_origin(entry), gguf=group
    )


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
