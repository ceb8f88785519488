"""The Hugging Face Hub as a source of repos: list a slice of it, bring small files in.

One module: the listing, the per-repo info and the downloads share one reader and one store.

Vocabulary:

- **listing**: ``GET /api/models?author=ORG&expand=sha&expand=siblings&...`` (or any
  ``ListingQuery``: search, tags, pipeline tag, sort, limit), paged by ``Link`` headers: each
  repo's commit sha and file names (names only: the Hub gives no file id in a listing), for
  one request per page. No HEAD: then a file's content id comes from its download, or from
  one ``paths-info`` request per repo (``eosfix.batch.hubfetch`` chooses).
- **entry**: one repo of a listing, or given by id (its sha and files then come from one
  info call): the revision asked, its commit sha, its stop-relevant files.
- **store**: ``eosfix.sources.hub.store``: small files by commit and by content. A commit
  already there costs no request, so a second audit of an unchanged organisation only reads
  the listing; a content already there is not downloaded again.

Weights are never downloaded: only ``eosfix.core.repo.RELEVANT_FILES`` and
``additional_chat_templates/*.jinja``, plus tokenizer.json when an id cannot be resolved
without it. The token is whatever huggingface_hub finds unless one is given; it is never
printed or logged. Nothing here checks or prints: ``eosfix.batch.hub`` runs an audit,
``eosfix.targets.session`` checks a few repos. Requests go through ``eosfix.sources.hub.http``
(retries, rate limits); pull requests and uploads through ``eosfix.sources.hub.write``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import RemoteEntryNotFoundError

from eosfix.core.errors import EosfixError
from eosfix.core.repo import MODEL_FOLDER_FILES, TOKENIZER_JSON, is_relevant_file
from eosfix.sources import holds_a_model
from eosfix.sources.hub.gguf import OLLAMA_FILES, model_files
from eosfix.sources.hub.http import HubHttp, describe_error, hub_errors, hub_response
from eosfix.sources.hub.store import Manifest, Store, git_sha1

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_ID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# gguf: the Hub's summary of a GGUF repo (chat template, bos/eos texts, architecture): a
# repo with GGUF files is read by its headers (eosfix.targets.gguf_hub), not its small files.
_EXPAND = (("expand", "sha"), ("expand", "siblings"), ("expand", "gguf"))
# What an audit reads of each listed repo: its commit and file names (the files to fetch),
# its tags (``base_model:...``: which repos were made from one another), whether it is gated,
# and its downloads (the report's order). The listing gives file names only, never their ids
# or sizes (huggingface_hub ``RepoSibling``: "only the file names are returned when listing").
LISTING_EXPAND = ("sha", "siblings", "tags", "gated", "downloads")
# ``--sort`` words -> what the Hub sorts by (huggingface_hub list_models, hf_api.py 2468-2477)
SORTS = {
    "downloads": "downloads",
    "likes": "likes",
    "created": "createdAt",
    "modified": "lastModified",
    "trending": "trendingScore",
}

is_relevant = is_relevant_file  # the small files eosfix reads (never weights)


class HubError(EosfixError):
    """A Hub repo could not be read or written (not found, gated, rate limited, offline...)."""

    def __init__(self, message: str, *, repo_id: str, status: int | None = None) -> None:
        super().__init__(message, path=repo_id)
        self.repo_id = repo_id
        self.status = status


@dataclass(frozen=True)
class ListingQuery:
    """Which repos a listing gives, in huggingface_hub ``list_models``' vocabulary: ``author``,
    ``search`` (a substring of the repo id), ``filters`` (tags, every one required; a library
    such as ``mlx`` is a tag, as list_models has folded ``library=`` into ``filter=`` since
    0.26), ``pipeline_tag``, ``sort`` (a SORTS word: always descending), ``limit`` (the
    first N; the Hub's ``limit`` is its page size, so the reader stops by itself)."""

    author: str | None = None
    search: str | None = None
    filters: tuple[str, ...] = ()
    pipeline_tag: str | None = None
    sort: str | None = None
    limit: int | None = None

    def params(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.author:
            out.append(("author", self.author))
        if self.search:
            out.append(("search", self.search))
        out += [("filter", f) for f in self.filters]
        if self.pipeline_tag:
            out.append(("pipeline_tag", self.pipeline_tag))
        if self.sort:
            out.append(("sort", SORTS[self.sort]))
        if self.limit is not None:
            out.append(("limit", str(self.limit)))
        return out

    def as_json(self) -> dict[str, Any]:
        """The options given, by their list_models names (a JSON report's ``listing``)."""
        out: dict[str, Any] = {"author": self.author, "search": self.search}
        out |= {"filter": list(self.filters) or None, "pipeline_tag": self.pipeline_tag}
        out |= {"sort": self.sort, "limit": self.limit}
        return {k: v for k, v in out.items() if v is not None}

    @property
    def label(self) -> str:
        """What the messages call it: the author alone, else the query (``models?filter=mlx``)."""
        params = self.params()
        if params == [("author", self.author)]:
            return str(self.author)
        return "models?" + "&".join(f"{k}={v}" for k, v in params)


@dataclass(frozen=True, slots=True)
class HubEntry:
    """One repo to check: the revision asked and, once known, its commit and files."""

    repo_id: str
    revision: str = "main"
    sha: str | None = None
    files: tuple[str, ...] | None = None  # its stop-relevant files (None: not known yet)
    tokenizer_json: bool = False  # it has tokenizer.json
    model: bool = True  # False: no config, no weights (``eosfix.sources.holds_a_model``)
    ggufs: tuple[str, ...] = ()  # its .gguf files, in listing order
    ollama_files: tuple[str, ...] = ()  # which of template, system, params it has
    gguf: dict[str, Any] | None = field(default=None, compare=False)  # expand=gguf
    # What the listing said of it: every field asked for (``expand``), as the Hub wrote it
    # (``siblings`` all its file names, ``tags``, ``downloads``, ``gguf``...); None for a repo
    # given by id.
    listed: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # tokenizer.json's content id, when a paths-info answer gave it (fetched only if needed)
    tokenizer_id: str | None = field(default=None, compare=False, repr=False)

    @property
    def downloads(self) -> int:
        value = (self.listed or {}).get("downloads")
        return value if isinstance(value, int) else 0

    @property
    def tags(self) -> tuple[str, ...]:
        tags = (self.listed or {}).get("tags")
        return tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()

    @property
    def is_gguf(self) -> bool:
        """A GGUF repo: it has GGUF model files and no tokenizer or template files of a
        folder (a repo with both is checked as a folder, and says it has GGUF files)."""
        return bool(model_files(self.ggufs)) and not self.folder_files

    @property
    def folder_files(self) -> bool:
        return self.tokenizer_json or any(f in MODEL_FOLDER_FILES for f in self.files or ())

    container = "folder"  # an audit's unit is a repo, whatever its files

    @property
    def row_name(self) -> str:
        return self.repo_id

    @property
    def revision_cell(self) -> str:
        short = self.sha[:8] if self.sha else "-"
        return short if self.revision == self.sha else f"{short} ({self.revision})"

    def fields(self) -> dict[str, Any]:
        return {
            "path": self.repo_id,
            "name": self.repo_id,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "sha": self.sha,
        }


def entry_of(data: dict[str, Any], revision: str = "main", *, listed: bool = False) -> HubEntry:
    """The entry of one model in a listing (``listed``: kept whole) or info answer."""
    names = [s["rfilename"] for s in data.get("siblings") or () if "rfilename" in s]
    ggufs = tuple(n for n in names if n.endswith(".gguf"))
    gguf = data.get("gguf")
    return HubEntry(
        str(data.get("id") or data.get("modelId")),
        revision,
        data.get("sha"),
        tuple(sorted(n for n in names if is_relevant(n))),
        TOKENIZER_JSON in names,
        holds_a_model(names) or not data.get("siblings"),  # no file list: assume a model
        ggufs,
        tuple(n for n in OLLAMA_FILES if n in names),
        gguf if isinstance(gguf, dict) else None,
        listed=data if listed else None,
    )


@dataclass(frozen=True)
class FetchedRepo:
    """One repo's small files in a local folder (``fetch_repo_files``); the folder is shared
    and must not be written: copy it first."""

    repo_id: str
    revision: str
    sha: str
    path: Path
    files: tuple[str, ...]
    has_tokenizer_json: bool
    model: bool = True  # False: the repo holds no config and no weights (tokenizer files only)


class HubReader:
    """Reads the Hub for a batch: listings, repo info, files into the store."""

    def __init__(
        self,
        *,
        token: str | bool | None = None,  # False: no token, not even the local one
        timeout: float | None = 30.0,
        workers: int = 16,
        store: Store | None = None,
    ) -> None:
        self.http = HubHttp(token=token, timeout=timeout, workers=workers)
        self.store = store or Store()
        self.listing_pages = 0

    @property
    def endpoint(self) -> str:
        return str(constants.ENDPOINT).rstrip("/")

    def list_author(self, author: str) -> Iterator[HubEntry]:
        """Every model repo of a user or organisation, page by page (``Link: rel=next``)."""
        return self.list_models(ListingQuery(author=author))

    def list_models(
        self, query: ListingQuery, expand: Iterable[str] = LISTING_EXPAND
    ) -> Iterator[HubEntry]:
        """The repos ``query`` selects, in the Hub's order, page by page (following ``Link:
        rel=next``, whose URL repeats the query), up to ``query.limit``. Each entry carries
        the ``expand`` fields the listing gave (``HubEntry.listed``)."""
        url: str | None = f"{self.endpoint}/api/models"
        fields = dict.fromkeys(("sha", "siblings", *expand))
        params: list[tuple[str, str]] | None = [
            *query.params(), *(("expand", f) for f in fields)
        ]  # fmt: skip
        left = query.limit
        while url is not None and left != 0:
            response = self.http.get_checked(url, params, _json_problem)
            self.listing_pages += 1
            for data in response.json():
                if left is not None:
                    if left == 0:
                        return
                    left -= 1
                yield entry_of(data, listed=True)
            url, params = response.links.get("next", {}).get("url"), None

    def identities(self, entry: HubEntry, paths: Iterable[str]) -> dict[str, str]:
        """Each of ``paths``' content id at the entry's commit, from one ``paths-info``
        request (an API request): the git blob sha1 of a file kept in git (what its resolve
        answers as ``ETag``), the sha256 of one kept in LFS (``lfs.oid``: its ``oid`` is the
        pointer's). A path the answer leaves out (absent) is left out."""
        assert entry.sha is not None
        asked = list(dict.fromkeys(paths))
        if not asked:
            return {}
        url = f"{self.endpoint}/api/models/{entry.repo_id}/paths-info/{entry.sha}"
        form = {"paths": asked, "expand": "false"}
        answer = self.http.checked("POST", url, None, form, _json_problem).json()
        self.http.stats["paths_info"] += 1
        out: dict[str, str] = {}
        for item in answer if isinstance(answer, list) else ():
            if not isinstance(item, dict) or item.get("type") != "file":
                continue
            lfs = item.get("lfs")
            oid = lfs.get("oid") if isinstance(lfs, dict) else item.get("oid")
            if isinstance(oid, str) and _ID_RE.match(oid) and item.get("path") in asked:
                out[item["path"]] = oid
        return out

    def fetch(
        self, repo_id: str, sha: str, path: str, expect: str | None = None
    ) -> tuple[bytes, str]:
        """One file at a commit, checked against the Hub's hash (and ``expect``, the content
        id a paths-info answer gave): its bytes and its content id (git sha1, or sha256 for
        an LFS file)."""
        data, etag = self._fetch(repo_id, sha, path, expect=expect)
        return data, etag if _ID_RE.match(etag) else git_sha1(data)

    def resolve(self, entry: HubEntry) -> HubEntry:
        """The entry with its commit and files: from the store when the revision is a commit
        already there, else one info request."""
        if entry.sha is not None and entry.files is not None:
            return entry
        if _SHA_RE.match(entry.revision):
            kept = self.store.manifest(entry.revision)
            if kept is not None:
                files = tuple(sorted(p for p in kept.files if p != TOKENIZER_JSON))
                return dataclasses.replace(
                    entry,
                    sha=entry.revision,
                    files=files,
                    tokenizer_json=kept.tokenizer_json,
                    model=kept.model,
                )
        rev = quote(entry.revision, safe="")
        url = f"{self.endpoint}/api/models/{entry.repo_id}/revision/{rev}"
        answer = self.http.get_checked(url, _EXPAND, _json_problem)
        found = entry_of(answer.json(), entry.revision)
        if found.sha is None:
            raise HubError("the Hub did not return a commit sha", repo_id=entry.repo_id)
        return dataclasses.replace(found, repo_id=entry.repo_id)

    def download(self, entry: HubEntry) -> Manifest:
        """The entry's files in the store: nothing to do for a commit already there, else
        one GET per file."""
        assert entry.sha is not None
        assert entry.files is not None
        kept = self.store.manifest(entry.sha)
        if kept is not None:
            return kept
        files = {p: self.keep(*self.fetch(entry.repo_id, entry.sha, p)) for p in entry.files}
        manifest = Manifest(files, entry.tokenizer_json, entry.model)
        self.store.publish(entry.sha, manifest)
        return manifest

    def keep(self, data: bytes, content_id: str) -> str:
        """Keep a fetched file in the store (indexed by its Hub content id); its git sha1."""
        return self.store.add_blob(data, content_id)

    def add_tokenizer_json(self, entry: HubEntry) -> Manifest:
        assert entry.sha is not None
        data, content_id = self.fetch(entry.repo_id, entry.sha, TOKENIZER_JSON)
        return self.store.add_file(entry.sha, TOKENIZER_JSON, self.keep(data, content_id))

    def read_file(self, repo_id: str, revision: str, path: str) -> bytes | None:
        """One file at any revision (a PR's ``refs/pr/N``), not kept; None if it is absent."""
        try:
            return self._file(repo_id, revision, path, check=False)
        except RemoteEntryNotFoundError:
            return None

    def _file(self, repo_id: str, revision: str, path: str, *, check: bool = True) -> bytes:
        return self._fetch(repo_id, revision, path, check=check)[0]

    def _fetch(
        self,
        repo_id: str,
        revision: str,
        path: str,
        *,
        check: bool = True,
        expect: str | None = None,
    ) -> tuple[bytes, str]:
        """The file's bytes and the Hub's etag of it (normalised as huggingface_hub does:
        ``X-Linked-Etag`` of an LFS file's redirect, else ``ETag``)."""
        rev = quote(revision, safe="")
        url = f"{self.endpoint}/{repo_id}/resolve/{rev}/{quote(path)}"

        def problem(response: httpx2.Response) -> str | None:
            if not check:
                return None
            data, etag = response.content, _etag(response)
            if not _matches(data, etag):
                return f"{path}: downloaded bytes do not match the Hub's hash"
            if expect is not None and not _matches_strictly(data, expect):
                return f"{path}: downloaded bytes do not match the id the Hub gave"
            return None

        response = self.http.get_checked(url, None, problem)
        return response.content, _etag(response)


def _json_problem(response: httpx2.Response) -> str | None:
    """Why a Hub API answer is not a JSON document (cut short by a proxy or a dropped
    connection that still ended cleanly), or None."""
    try:
        json.loads(response.content)
    except ValueError:
        return "the Hub's answer is not complete JSON (cut short?)"
    return None


def _etag(response: httpx2.Response) -> str:
    """The Hub's etag of a downloaded file: the ``X-Linked-Etag`` its resolve answered (an LFS
    file: the sha256, on the redirect to the CDN), else the answer's ``ETag``; quotes and
    ``W/`` removed (huggingface_hub ``_normalize_etag``)."""
    hub = hub_response(response)
    etag = hub.headers.get("x-linked-etag") or response.headers.get("etag") or ""
    return etag.removeprefix("W/").strip('"')


def _matches_strictly(data: bytes, content_id: str) -> bool:
    if len(content_id) == 64:
        return hashlib.sha256(data).hexdigest() == content_id
    return git_sha1(data) == content_id


def _matches(data: bytes, etag: str) -> bool:
    """Whether the bytes match the Hub's etag: git sha1 (regular files) or sha256 (LFS).
    Other etags (a CDN's) say nothing: the transfer's own length check stands."""
    if re.fullmatch(r"[0-9a-f]{40}", etag):
        return git_sha1(data) == etag
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        return hashlib.sha256(data).hexdigest() == etag
    return True


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """No huggingface_hub progress bars while the Hub is read: eosfix shows its own."""
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def fetch_repo_files(
    repo_id: str,
    revision: str | None = None,
    *,
    token: str | None = None,
    tokenizer_json: bool = False,
    reader: HubReader | None = None,
    entry: HubEntry | None = None,
) -> FetchedRepo:
    """Bring one Hub repo's small stop-relevant files into a local folder and return it.

    The folder is eosfix's store (``$EOSFIX_CACHE``, else ``~/.cache/eosfix``), shared and
    read-only by convention: copy it before editing. ``tokenizer_json`` also brings
    tokenizer.json when the repo has one; ``entry``: the repo already resolved (no second
    info request). Raises HubError (one line) when it cannot.
    """
    reader = reader or HubReader(token=token, workers=4)
    try:
        entry = reader.resolve(entry or HubEntry(repo_id, revision or "main"))
        manifest = reader.download(entry)
        if tokenizer_json and entry.tokenizer_json and TOKENIZER_JSON not in manifest.files:
            manifest = reader.add_tokenizer_json(entry)
    except hub_errors() as exc:
        message, status = describe_error(exc)
        raise HubError(message, repo_id=repo_id, status=status) from None
    assert entry.sha is not None
    return FetchedRepo(
        repo_id,
        entry.revision,
        entry.sha,
        reader.store.snapshot(entry.sha),
        tuple(sorted(manifest.files)),
        entry.tokenizer_json,
        entry.model,
    )
