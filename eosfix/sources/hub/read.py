"""The Hugging Face Hub as a source of repos: list an organisation, bring small files in.

Vocabulary:

- **listing**: ``GET /api/models?author=ORG&expand=sha&expand=siblings``, paged by ``Link``
  headers: each repo's commit sha and file names, for one request per page. No per-repo
  info call and no HEAD: then one GET per stop-relevant file the repo has.
- **entry**: one repo of a listing, or given by id (its sha and files then come from one
  info call): the revision asked, its commit sha, its stop-relevant files.
- **store**: ``eosfix.sources.hub.store``: small files by commit. A commit already there
  costs no request, so a second audit of an unchanged organisation only reads the listing.

Weights are never downloaded: only ``eosfix.core.repo.RELEVANT_FILES`` and
``additional_chat_templates/*.jinja``, plus tokenizer.json when an id cannot be resolved
without it. The token is whatever huggingface_hub finds unless one is given; it is never
printed or logged. Nothing here checks or prints: ``eosfix.batch.hub`` runs an audit,
``eosfix.batch.session`` checks a few repos. Requests go through ``eosfix.sources.hub.http``
(retries, rate limits); pull requests and uploads through ``eosfix.sources.hub.write``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import RemoteEntryNotFoundError

from eosfix.core.errors import EosfixError
from eosfix.core.repo import TOKENIZER_JSON, is_relevant_file
from eosfix.sources import holds_a_model
from eosfix.sources.hub.http import HubHttp, describe_error, hub_errors
from eosfix.sources.hub.store import Manifest, Store, git_sha1

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_EXPAND = (("expand", "sha"), ("expand", "siblings"))

is_relevant = is_relevant_file  # the small files eosfix reads (never weights)


class HubError(EosfixError):
    """A Hub repo could not be read or written (not found, gated, rate limited, offline...)."""

    def __init__(self, message: str, *, repo_id: str, status: int | None = None) -> None:
        super().__init__(message, path=repo_id)
        self.repo_id = repo_id
        self.status = status


@dataclass(frozen=True, slots=True)
class HubEntry:
    """One repo to check: the revision asked and, once known, its commit and files."""

    repo_id: str
    revision: str = "main"
    sha: str | None = None
    files: tuple[str, ...] | None = None  # its stop-relevant files (None: not known yet)
    tokenizer_json: bool = False  # it has tokenizer.json
    model: bool = True  # False: no config, no weights (``eosfix.sources.holds_a_model``)

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


def entry_of(data: dict[str, Any], revision: str = "main") -> HubEntry:
    """The entry of one model in a listing (or info) answer."""
    names = [s["rfilename"] for s in data.get("siblings") or () if "rfilename" in s]
    return HubEntry(
        str(data.get("id") or data.get("modelId")),
        revision,
        data.get("sha"),
        tuple(sorted(n for n in names if is_relevant(n))),
        TOKENIZER_JSON in names,
        holds_a_model(names) or not data.get("siblings"),  # no file list: assume a model
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

    @property
    def endpoint(self) -> str:
        return str(constants.ENDPOINT).rstrip("/")

    def list_author(self, author: str) -> Iterator[HubEntry]:
        """Every model repo of a user or organisation, page by page (``Link: rel=next``)."""
        url: str | None = f"{self.endpoint}/api/models"
        params: list[tuple[str, str]] | None = [("author", author), *_EXPAND]
        while url is not None:
            response = self.http.get_checked(url, params, _json_problem)
            for data in response.json():
                yield entry_of(data)
            url, params = response.links.get("next", {}).get("url"), None

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
        files = {
            p: self.store.add_blob(self._file(entry.repo_id, entry.sha, p)) for p in entry.files
        }
        manifest = Manifest(files, entry.tokenizer_json, entry.model)
        self.store.publish(entry.sha, manifest)
        return manifest

    def add_tokenizer_json(self, entry: HubEntry) -> Manifest:
        assert entry.sha is not None
        data = self._file(entry.repo_id, entry.sha, TOKENIZER_JSON)
        return self.store.add_file(entry.sha, TOKENIZER_JSON, data)

    def read_file(self, repo_id: str, revision: str, path: str) -> bytes | None:
        """One file at any revision (a PR's ``refs/pr/N``), not kept; None if it is absent."""
        try:
            return self._file(repo_id, revision, path, check=False)
        except RemoteEntryNotFoundError:
            return None

    def _file(self, repo_id: str, revision: str, path: str, *, check: bool = True) -> bytes:
        rev = quote(revision, safe="")
        url = f"{self.endpoint}/{repo_id}/resolve/{rev}/{quote(path)}"

        def problem(response: httpx2.Response) -> str | None:
            etag = response.headers.get("x-linked-etag") or response.headers.get("etag") or ""
            if not check or _matches(response.content, etag.removeprefix("W/").strip('"')):
                return None
            return f"{path}: downloaded bytes do not match the Hub's hash"

        return self.http.get_checked(url, None, problem).content


def _json_problem(response: httpx2.Response) -> str | None:
    """Why a Hub API answer is not a JSON document (cut short by a proxy or a dropped
    connection that still ended cleanly), or None."""
    try:
        json.loads(response.content)
    except ValueError:
        return "the Hub's answer is not complete JSON (cut short?)"
    return None


def _matches(data: bytes, etag: str) -> bool:
    """Whether the bytes match the Hub's etag: git sha1 (regular files) or sha256 (LFS).
    Other etags (a CDN's) say nothing: the transfer's own length check stands."""
    if re.fullmatch(r"[0-9a-f]{40}", etag):
        return git_sha1(data) == etag
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        return hashlib.sha256(data).hexdigest() == etag
    return True


def fetch_repo_files(
    repo_id: str,
    revision: str | None = None,
    *,
    token: str | None = None,
    tokenizer_json: bool = False,
    reader: HubReader | None = None,
) -> FetchedRepo:
    """Bring one Hub repo's small stop-relevant files into a local folder and return it.

    The folder is eosfix's store (``$EOSFIX_CACHE``, else ``~/.cache/eosfix``), shared and
    read-only by convention: copy it before editing. ``tokenizer_json`` also brings
    tokenizer.json when the repo has one. Raises HubError (one line) when it cannot.
    """
    reader = reader or HubReader(token=token, workers=4)
    try:
        entry = reader.resolve(HubEntry(repo_id, revision or "main"))
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
