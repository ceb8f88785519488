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

What the Hub answers is followed only where it may lead: a listing's next page only on the
Hub's own host, never twice, only while pages bring new repos, at most ``bounds.MAX_PAGES``
(``BadListing``); a repo id, commit id or file name is checked as people's input is (the
repo-id grammar of ``eosfix.core.hubid``) before it goes into a URL or the store's
paths, and one that is not is the entry's ``problem`` (a failure row, never requested). A file
is streamed into the store under its cap (``bounds.file_cap``) and kept only once whole and
checked.

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
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import RemoteEntryNotFoundError

from eosfix.core.errors import EosfixError
from eosfix.core.hubid import is_hub_id
from eosfix.core.repo import MODEL_FOLDER_FILES, TOKENIZER_JSON, is_relevant_file
from eosfix.sources import holds_a_model
from eosfix.sources.hub.bounds import LONGEST_WAIT, MAX_PAGES, file_cap
from eosfix.sources.hub.client import origin
from eosfix.sources.hub.gguf import OLLAMA_FILES, model_files
from eosfix.sources.hub.http import (
    BadAnswer,
    HubHttp,
    TooLarge,
    describe_error,
    hub_errors,
    hub_response,
)
from eosfix.sources.hub.ranges import resolve_url
from eosfix.sources.hub.store import Manifest, Store, git_sha1_of, sha256_of

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


class BadListing(BadAnswer):
    """A listing whose pages cannot be followed: a next page on another host (the token
    would go there), pages that loop, more pages than ``MAX_PAGES``."""


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
    # Why the Hub's answer about it cannot be followed (an id outside the Hub's grammar, a
    # commit id that is not one, a file name leading out of the repo): it is reported as a
    # failure and nothing about it is requested.
    problem: str | None = field(default=None, compare=False)

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


def entry_of(
    data: dict[str, Any],
    revision: str = "main",
    *,
    listed: bool = False,
    repo_id: str | None = None,
) -> HubEntry:
    """The entry of one model in a listing (``listed``: kept whole) or info answer (of
    ``repo_id``: the id asked, not the one answered); what the Hub said is checked as
    people's input is (``problem``)."""
    siblings = data.get("siblings")
    names = [
        s["rfilename"]
        for s in (siblings if isinstance(siblings, list) else ())
        if isinstance(s, dict) and isinstance(s.get("rfilename"), str)
    ]
    ggufs = tuple(n for n in names if n.endswith(".gguf"))
    gguf = data.get("gguf")
    repo_id = repo_id or str(data.get("id") or data.get("modelId"))
    sha = data.get("sha")
    problem = _problem(repo_id, sha, names)
    return HubEntry(
        repo_id,
        revision,
        sha if isinstance(sha, str) and _SHA_RE.match(sha) else None,
        tuple(sorted(n for n in names if is_relevant(n))),
        TOKENIZER_JSON in names,
        holds_a_model(names) or not siblings,  # no file list: assume a model
        ggufs,
        tuple(n for n in OLLAMA_FILES if n in names),
        gguf if isinstance(gguf, dict) else None,
        listed=data if listed else None,
        problem=problem,
    )


def _problem(repo_id: str, sha: object, names: Iterable[str]) -> str | None:
    """Why an answer about a repo cannot be followed: every id and name it gives goes into a
    URL (with the token) and the store's paths, so each must be what the Hub allows."""
    if not is_hub_id(repo_id):
        return "the Hub gave a repo id that is not one (org/name): nothing requested"
    if sha is not None and not (isinstance(sha, str) and _SHA_RE.match(sha)):
        return f"the Hub gave a commit id that is not one ({str(sha)[:60]!r}): nothing requested"
    for name in names:
        if not _in_repo(name):
            shown = name[:120]
            return f"the Hub gave a file name outside the repo ({shown!r}): nothing requested"
    return None


def _in_repo(name: str) -> bool:
    """A path inside a repo: relative, no empty, ``.`` or ``..`` part (a URL normalises
    those away, out of the repo)."""
    return all(p not in ("", ".", "..") for p in name.split("/"))


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
        longest: float = LONGEST_WAIT,  # the longest wait the Hub may ask for (HubHttp)
    ) -> None:
        self.http = HubHttp(token=token, timeout=timeout, workers=workers, longest=longest)
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
        the ``expand`` fields the listing gave (``HubEntry.listed``); one the Hub described
        wrongly carries its ``problem`` instead of being requested. A next page is followed
        only on the Hub's own host, never twice, and only while pages bring repos the page
        before did not; at most ``MAX_PAGES`` (else ``BadListing``)."""
        url: str | None = f"{self.endpoint}/api/models"
        home = origin(f"{self.endpoint}/")
        fields = dict.fromkeys(("sha", "siblings", *expand))
        params: list[tuple[str, str]] | None = [
            *query.params(), *(("expand", f) for f in fields)
        ]  # fmt: skip
        left = query.limit
        visited: set[str] = set()
        before: set[str] = set()  # the ids of the page before
        while url is not None and left != 0:
            if len(visited) >= MAX_PAGES:
                raise BadListing(f"the listing has more than {MAX_PAGES:,} pages: stopped there")
            response = self.http.get_checked(url, params, _json_problem)
            visited.add(str(response.request.url))
            self.listing_pages += 1
            page = response.json()
            if not isinstance(page, list):
                raise BadListing("the Hub's listing page is not a list of repos")
            ids: set[str] = set()
            for data in page:
                if not isinstance(data, dict):
                    raise BadListing("the Hub's listing page holds something that is not a repo")
                if left is not None:
                    if left == 0:
                        return
                    left -= 1
                entry = entry_of(data, listed=True)
                ids.add(entry.repo_id)
                yield entry
            link = response.links.get("next", {}).get("url")
            if link is None:
                return
            url, params = str(response.request.url.join(link)), None
            if origin(url) != home:
                raise BadListing(
                    f"the listing's next page is on another host ({origin(url)}): not followed"
                )
            if url in visited or not ids - before:
                raise BadListing("the listing's pages loop (a page repeats one before): stopped")
            before = ids

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

    @contextlib.contextmanager
    def fetching(
        self, repo_id: str, sha: str, path: str, expect: str | None = None
    ) -> Iterator[Downloaded]:
        """One file at a commit in a temporary file of the store, checked against the Hub's
        hash (and ``expect``, the content id a paths-info answer gave): ``keep`` it in the
        block, or it is gone when the block ends. Streamed under its cap
        (``bounds.file_cap``): an answer over it is refused (``TooLarge``, naming the file),
        and nothing of it is kept."""
        with self.store.incoming() as sink:
            got = self._download(repo_id, sha, path, sink, expect)
            yield got

    def keep(self, got: Downloaded) -> str:
        """Keep a file ``fetching`` brought in the store (indexed by its Hub content id);
        its git sha1."""
        return self.store.adopt(got.file, got.content_id, got.sha)

    def fetch(self, repo_id: str, sha: str, path: str, expect: str | None = None) -> Downloaded:
        """``fetching`` and ``keep`` in one: the file in the store (``file`` is closed)."""
        with self.fetching(repo_id, sha, path, expect) as got:
            self.keep(got)
            return got

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
        data = answer.json()
        if not isinstance(data, dict):
            raise HubError("the Hub's repo info is not a JSON object", repo_id=entry.repo_id)
        found = entry_of(data, entry.revision, repo_id=entry.repo_id)
        if found.problem is not None:
            raise HubError(found.problem, repo_id=entry.repo_id)
        if found.sha is None:
            raise HubError("the Hub did not return a commit sha", repo_id=entry.repo_id)
        return found

    def download(self, entry: HubEntry) -> Manifest:
        """The entry's files in the store: nothing to do for a commit already there, else
        one GET per file."""
        assert entry.sha is not None
        assert entry.files is not None
        kept = self.store.manifest(entry.sha)
        if kept is not None:
            return kept
        files = {p: self.fetch(entry.repo_id, entry.sha, p).sha for p in entry.files}
        manifest = Manifest(files, entry.tokenizer_json, entry.model)
        self.store.publish(entry.sha, manifest)
        return manifest

    def add_tokenizer_json(self, entry: HubEntry) -> Manifest:
        assert entry.sha is not None
        got = self.fetch(entry.repo_id, entry.sha, TOKENIZER_JSON)
        return self.store.add_file(entry.sha, TOKENIZER_JSON, got.sha)

    def read_file(self, repo_id: str, revision: str, path: str) -> bytes | None:
        """One file at any revision (a PR's ``refs/pr/N``), not kept; None if it is absent.
        Read in memory, under its cap."""
        url = resolve_url(self.endpoint, repo_id, revision, path)
        try:
            response = self.http.get_checked(url, None, _nothing_wrong, cap=file_cap(path))
        except RemoteEntryNotFoundError:
            return None
        except TooLarge as exc:
            exc.name = path
            raise
        return response.content

    def _download(
        self, repo_id: str, revision: str, path: str, sink: IO[bytes], expect: str | None
    ) -> Downloaded:
        """The file's bytes into ``sink``, checked against the Hub's etag (normalised as
        huggingface_hub does: ``X-Linked-Etag`` of an LFS file's redirect, else ``ETag``)
        and ``expect``."""
        url = resolve_url(self.endpoint, repo_id, revision, path)
        got = Downloaded(sink, "", "")

        def problem(response: httpx2.Response) -> str | None:
            etag = _etag(response)
            got.sha = git_sha1_of(sink)
            wants_sha256 = len(etag) == 64 or (expect is not None and len(expect) == 64)
            sha256 = sha256_of(sink) if wants_sha256 else None
            if not _matches(got.sha, sha256, etag):
                return f"{path}: downloaded bytes do not match the Hub's hash"
            if expect is not None and not _matches(got.sha, sha256, expect, strict=True):
                return f"{path}: downloaded bytes do not match the id the Hub gave"
            got.content_id = etag if _ID_RE.match(etag) else got.sha
            return None

        try:
            self.http.get_checked(url, None, problem, cap=file_cap(path), sink=sink)
        except TooLarge as exc:
            exc.name = path
            raise
        return got


@dataclass
class Downloaded:
    """A file brought in by ``HubReader.fetching``: its temporary file, its git sha1 and the
    Hub's id of its content (the git sha1, or the sha256 of a file kept in LFS)."""

    file: IO[bytes]
    sha: str
    content_id: str


def _nothing_wrong(response: httpx2.Response) -> str | None:
    return None


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


def _matches(sha1: str, sha256: str | None, etag: str, *, strict: bool = False) -> bool:
    """Whether a file (its git sha1, and its sha256 when one was needed) matches the Hub's
    etag: git sha1 (regular files) or sha256 (LFS). Other etags (a CDN's) say nothing, unless
    ``strict``: the transfer's own length check stands."""
    if re.fullmatch(r"[0-9a-f]{40}", etag):
        return sha1 == etag
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        return sha256 == etag
    return not strict


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
