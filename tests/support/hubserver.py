"""A local stand-in for the Hugging Face Hub HTTP API, for tests.

`FakeHub` is a stdlib `ThreadingHTTPServer` bound to 127.0.0.1 on a free port and run in a
daemon thread. It serves the routes that the *real* `huggingface_hub` client (2.4.0, httpx2)
uses for reading model repos, downloading files, opening pull requests through
`HfApi.create_commit(create_pr=True)` and listing/reading discussions, so the client is
exercised end to end without any network access.

Use the `fake_hub` fixture (pyproject sets `pythonpath = ["."]`, so `tests.support.hubserver` is
importable; register it in `tests/conftest.py` with
`pytest_plugins = ["tests.support.hubserver"]` or `from tests.support.hubserver import fake_hub`)::

    def test_x(fake_hub):
        fake_hub.add_repo("org/model", {"config.json": b"{}"})
        path = huggingface_hub.hf_hub_download("org/model", "config.json")

The fixture points `huggingface_hub` (environment *and* the already-imported
`huggingface_hub.constants`) at the fake server and at temporary cache/home directories, and
makes the client's retry back-off sleeps instant. Pass a token with indirect parametrization::

    @pytest.mark.parametrize("fake_hub", [{"token": "hf_secret"}], indirect=True)

Behaviour notes (mirroring the real Hub):

- Commit shas are deterministic: sha1 over the parent sha, the commit title and the sorted
  `(path, git blob sha1)` pairs. File etags/oids are git blob sha1s (`git_sha1`).
- Private repos: when the hub has a token, requests without `Authorization: Bearer <token>` get
  401 + `X-Error-Code: RepoNotFound` (-> `RepositoryNotFoundError`). A wrong token gets 401
  "Invalid credentials in Authorization header" (-> plain `HfHubHTTPError`). Without a hub
  token, authentication is not enforced.
- Gated repos: like the real Hub, metadata (model_info, tree, discussions) stays public; file
  downloads (`/resolve/`) get 401 (anonymous) or 403 (authenticated, not granted) with
  `X-Error-Code: GatedRepo` (-> `GatedRepoError`), unless `FakeRepo.gated_access` is true and
  the request is authenticated. Set `FakeRepo.gate_api=True` to also gate the API routes.
- `create_commit(create_pr=True)` creates `refs/pr/N` = base files + the commit's changes, and a
  pull-request discussion authored by "eosfix-user" with a comment event (the description) and a
  commit event (`DiscussionCommit.oid` is the PR head sha).
- The listing (`GET /api/models`) takes `author`, `search`, `filter` (tags, all required),
  `pipeline_tag`, `sort` (always descending), `limit` (the page size: the client stops by
  itself), `expand` (only the fields named), `full`, `config`; its `siblings` are file names
  only, whatever `blobs` says (the ids come one repo at a time: `model_info` with `blobs=true`,
  the tree, or `POST /api/models/{id}/paths-info/{rev}`). `expand=config` is the Hub's parsed
  subset (`hub_config`), `expand=gguf` a repo's `FakeRepo.gguf`. See `listing_fields`.
- Files matching `FakeRepo.lfs` are kept in LFS: their resolve is a 302 to a CDN (this server as
  `localhost`, `FakeHub.cdn_url`) with `X-Linked-Etag` (sha256) and `X-Linked-Size`; the tree and
  paths-info give `lfs: {oid, size, pointerSize}` with `oid` the pointer's git sha1.
- Quotas (`rate_limit`): fixed windows per bucket ("api": `/api/` URLs; "resolvers": `/resolve/`
  URLs; the CDN hop counts in none), `RateLimit`/`RateLimit-Policy` on every answer of the
  bucket, 429 with `Retry-After` past the quota.
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import fnmatch
import functools
import hashlib
import json
import math
import re
import socket
import struct
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pytest

USER = "eosfix-user"
LFS_ROUTE = "cdn-lfs"  # where an LFS file's resolve redirects (the stand-in's CDN)
PATHS_INFO_MAX = 1000
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@functools.lru_cache(maxsize=4096)  # GGUF repos hold many large files, often the same bytes
def git_sha1(data: bytes) -> str:
    """The git blob sha1 of `data` (what the Hub uses as etag/oid of non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def commit_sha(files: dict[str, bytes], parent: str = "", title: str = "") -> str:
    """Deterministic 40-hex commit id of a file set (plus parent and title)."""
    h = hashlib.sha1()
    h.update(f"parent {parent}\0title {title}\0".encode())
    for path in sorted(files):
        h.update(f"{path}\0{git_sha1(files[path])}\n".encode())
    return h.hexdigest()


@dataclass
class FakeCommit:
    sha: str
    parent: str | None
    files: dict[str, bytes]
    title: str
    description: str = ""
    author: str = USER
    date: str = field(default_factory=_now)


@dataclass
class FakeDiscussion:
    num: int
    title: str
    description: str
    is_pull_request: bool
    author: str = USER
    status: str = "open"  # open | closed | merged | draft
    created_at: str = field(default_factory=_now)
    base_ref: str = "main"  # target branch (for PRs)
    base_sha: str | None = None  # commit the PR started from
    merge_commit: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def git_ref(self) -> str | None:
        return f"refs/pr/{self.num}" if self.is_pull_request else None


@dataclass
class FakeRepo:
    """A model repo. `files` is the content at the head of `main`.

    Change content with `FakeHub.push(...)` (or assign a new dict to `files`: the next request
    turns it into a new commit on main).
    """

    repo_id: str
    files: dict[str, bytes]
    private: bool = False
    gated: bool = False
    gated_access: bool = False  # authenticated requests may download gated files
    gate_api: bool = False  # gated repo also blocks /api/models/... (older Hub behaviour)
    can_write: bool = True  # False: direct commits to branches get 403 (PRs still allowed)
    commits: list[str] = field(default_factory=list)  # history of main, head = commits[-1]
    commit_objects: dict[str, FakeCommit] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # "main" / "refs/pr/1" -> sha
    discussions: list[FakeDiscussion] = field(default_factory=list)
    created_at: str = field(default_factory=_now)
    # What the Hub's listing says of a repo besides its files (``listing_fields``): tags
    # (library, pipeline, ``conversational``, ``base_model:quantized:ORG/NAME``...),
    # downloads over 30 days, likes, the pipeline tag, the library, and the ``gguf`` summary
    # the Hub parses from one GGUF file of the repo.
    tags: list[str] = field(default_factory=list)
    downloads: int = 0
    likes: int = 0
    trending_score: int = 0
    pipeline_tag: str | None = None
    library_name: str | None = "transformers"
    gguf: dict[str, Any] | None = None
    # Files kept in Git LFS (fnmatch patterns over paths, as .gitattributes names them): a
    # resolve answers them with a redirect to a CDN (``lfs_resolve``).
    lfs: tuple[str, ...] = ()

    @property
    def head(self) -> str:
        return self.refs["main"]

    @property
    def author(self) -> str:
        return self.repo_id.split("/")[0]

    def pr_files(self, num: int) -> dict[str, bytes]:
        return self.commit_objects[self.refs[f"refs/pr/{num}"]].files

    def files_at(self, rev: str) -> dict[str, bytes]:
        sha = self.resolve(rev)
        if sha is None:
            raise KeyError(rev)
        return self.commit_objects[sha].files

    # --- internals -------------------------------------------------------------------------
    def _add_commit(
        self, files: dict[str, bytes], *, parent: str | None, title: str, description: str = ""
    ) -> FakeCommit:
        sha = commit_sha(files, parent or "", title)
        commit = FakeCommit(sha, parent, dict(files), title, description)
        self.commit_objects[sha] = commit
        return commit

    def _set_branch(self, branch: str, commit: FakeCommit) -> None:
        self.refs[branch] = commit.sha
        if branch == "main":
            self.commits.append(commit.sha)
            self.files = dict(commit.files)

    def _sync(self) -> None:
        """Turn an in-place replacement of `files` into a commit on main."""
        if "main" not in self.refs:
            self._set_branch(
                "main", self._add_commit(self.files, parent=None, title="initial commit")
            )
        elif self.commit_objects[self.refs["main"]].files != self.files:
            files = {k: _as_bytes(v) for k, v in self.files.items()}
            self._set_branch(
                "main", self._add_commit(files, parent=self.head, title="Update files")
            )

    def resolve(self, rev: str) -> str | None:
        rev = rev.removeprefix("refs/heads/")
        if rev in self.refs:
            return self.refs[rev]
        if _SHA_RE.match(rev) and rev in self.commit_objects:
            return rev
        return None

    def is_branch(self, rev: str) -> bool:
        rev = rev.removeprefix("refs/heads/")
        return rev in self.refs and not rev.startswith("refs/")

    def last_commit_for(self, sha: str, path: str, is_dir: bool = False) -> FakeCommit:
        """Newest commit (walking parents from `sha`) that changed `path`."""

        def view(files: dict[str, bytes]) -> dict[str, str]:
            if is_dir:
                prefix = path + "/"
                return {p: git_sha1(d) for p, d in files.items() if p.startswith(prefix)}
            return {path: git_sha1(files[path])} if path in files else {}

        commit = self.commit_objects[sha]
        while commit.parent is not None:
            parent = self.commit_objects[commit.parent]
            if view(parent.files) != view(commit.files):
                return commit
            commit = parent
        return commit


@dataclass
class _Failure:
    repo_id: str
    status: int
    times: int | None
    headers: dict[str, str | None]
    delay: float
    match: re.Pattern[str] | None
    method: str | None
    until: threading.Event | None = None
    cut: int | None = None


class Headers(dict):
    """Case-insensitive header mapping (keys stored lower-case)."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__((str(k).lower(), v) for k, v in items)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RequestRecord:
    method: str
    path: str  # raw (still percent-encoded) path, no query
    query: dict[str, list[str]]
    headers: Headers  # case-insensitive
    repo_id: str | None
    status: int = 0  # 0: connection dropped
    time: float = field(default_factory=time.monotonic)  # when the request arrived


@dataclass
class _Quota:
    """A fixed-window request quota of one bucket, as the Hub counts them (5-minute windows)."""

    limit: int
    window: float
    start: float = 0.0
    used: int = 0

    def take(self, now: float) -> tuple[bool, int, int]:
        """Count one request: (allowed, remaining, seconds until the window resets)."""
        if now - self.start >= self.window:
            self.start, self.used = now, 0
        self.used += 1
        reset = max(1, math.ceil(self.start + self.window - now))
        return self.used <= self.limit, max(0, self.limit - self.used), reset


@dataclass
class _CountQuota:
    """A quota counted in requests, not seconds (``FakeHub.rate_limit_count``)."""

    limit: int
    retry_after: int
    seen: int = 0

    def take(self) -> bool:
        """Count one request: False for every (limit + 1)-th one of the bucket."""
        self.seen += 1
        return self.seen % (self.limit + 1) != 0


@dataclass
class Hold:
    """Requests kept unanswered until ``release()`` (``FakeHub.hold``)."""

    match: re.Pattern[str]
    query: str | None
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


class _HTTPError(Exception):
    def __init__(
        self, status: int, message: str, code: str | None = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, hub: FakeHub) -> None:
        self.hub = hub
        self.connections: set[socket.socket] = set()
        self.threads: set[threading.Thread] = set()
        self.conn_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _make_handler(hub))

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._run, args=(request, client_address), daemon=True, name="fakehub-conn"
        )
        with self.conn_lock:
            self.connections.add(request)
            self.threads.add(t)
        t.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.conn_lock:
                self.connections.discard(request)
                self.threads.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet
        pass


class FakeHub:
    """In-process fake of the Hugging Face Hub API (model repos only).

    Attributes:
        url: "http://127.0.0.1:PORT" once started.
        repos: repo_id -> FakeRepo.
        requests: (method, raw path) of every request, in order.
        request_log: full `RequestRecord`s (query, headers, response status).
        commits_received: one dict per accepted commit: repo_id, revision, create_pr, summary,
            description, parent_commit, files {path: bytes}, deleted [paths], commit_oid, pr_num.
        server_errors: unexpected exceptions raised by the fake itself (should stay empty).
        backoff_sleeps: sleeps requested by huggingface_hub's retry loops (recorded, not slept)
            when the `fake_hub` fixture is used.
        page_size: page size for Link-header pagination (list_models, list_repo_tree).
        latency: seconds every request waits before it is answered (a far-away Hub); requests
            wait in parallel, as they would on the network.
    """

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[tuple[str, str]] = []
        self.request_log: list[RequestRecord] = []
        self.commits_received: list[dict[str, Any]] = []
        self.server_errors: list[BaseException] = []
        self.backoff_sleeps: list[float] = []
        self.page_size = 1000
        self.discussions_page_size = 50
        self.latency = 0.0
        # GGUF repos (see "GGUF repos" below): redirect .gguf downloads to a CDN host, serve
        # files larger than the bytes held (zeros after them), and what reached the CDN.
        self.cdn = False
        self.ignore_ranges = False  # answer a ranged GET with 200 and the whole file
        self.declared_sizes: dict[tuple[str, str], int] = {}
        self.cdn_requests: list[RequestRecord] = []
        self._quotas: dict[str, _Quota] = {}
        self._count_quotas: dict[str, _CountQuota] = {}
        self._holds: list[Hold] = []
        self.lfs_objects: dict[str, bytes] = {}  # sha256 -> bytes the CDN serves
        self.url = ""
        self._failures: list[_Failure] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- setup API ---------------------------------------------------------------------------
    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | str],
        *,
        private: bool = False,
        gated: bool = False,
        **kwargs: Any,
    ) -> FakeRepo:
        if repo_id.count("/") != 1:
            raise ValueError(f"repo_id must be 'namespace/name', got {repo_id!r}")
        data = {path: _as_bytes(content) for path, content in files.items()}
        repo = FakeRepo(repo_id, data, private=private, gated=gated, **kwargs)
        with self._lock:
            repo._sync()
            self.repos[repo_id] = repo
        return repo

    def push(
        self,
        repo_id: str,
        files: dict[str, bytes | str] | None = None,
        *,
        delete: list[str] | tuple[str, ...] = (),
        message: str = "Update files",
        replace: bool = False,
    ) -> str:
        """Commit to main (as if someone else pushed). Returns the new head sha."""
        with self._lock:
            repo = self.repos[repo_id]
            repo._sync()
            new = {} if replace else dict(repo.files)
            new.update({p: _as_bytes(c) for p, c in (files or {}).items()})
            for path in delete:
                new.pop(path, None)
            commit = repo._add_commit(new, parent=repo.head, title=message)
            repo._set_branch("main", commit)
            return commit.sha

    def fail(
        self,
        repo_id: str,
        status: int,
        *,
        times: int | None = None,
        headers: dict[str, str | None] | None = None,
        delay: float = 0.0,
        match: str | None = None,
        method: str | None = None,
        until: threading.Event | None = None,
        cut: int | None = None,
    ) -> None:
        """Inject failures for requests concerning `repo_id` ("*" = any request).

        status: HTTP status to answer (401/403/404/429/500/...), or 0 to drop the connection
            without any response (the client sees `httpx2.RemoteProtocolError`: retried by
            `http_backoff` users such as list_repo_tree/preupload, but NOT caught by
            hf_hub_download's first HEAD). For a timeout use `delay` with a small client timeout.
            With a status other than an error (e.g. 200) plus `delay`, the request is answered
            normally after the delay. Default `X-Error-Code`: 401/404 -> RepoNotFound, 403 -> GatedRepo;
            `headers` are merged over the defaults (a None value removes a header).
        times: how many matching requests fail (None = all, until `clear_failures()`).
        delay: seconds to wait before answering (e.g. with a small client timeout, to provoke a
            real `httpx2.ReadTimeout`); interrupted when the server stops.
        match: regex searched in the raw request path (e.g. r"/resolve/", r"/commit/").
        method: only requests with this HTTP method.
        until: hold each matching request until this event is set (or the server stops), then
            answer it: a run that cannot finish before the test lets it (no timing guess).
        cut: with status 200, answer normally but send only the first `cut` bytes of the body
            (Content-Length says so too: a well-formed response whose JSON or file is cut
            short, as a proxy or a dying connection can deliver; the etag is the whole file's).
        """
        with self._lock:
            self._failures.append(
                _Failure(
                    repo_id,
                    status,
                    times,
                    dict(headers or {}),
                    delay,
                    re.compile(match) if match else None,
                    method.upper() if method else None,
                    until,
                    cut,
                )
            )

    def hold(self, match: str, *, query: str | None = None) -> Hold:
        """Keep requests whose raw path matches the regex ``match`` (and whose query string
        contains ``query``) unanswered until ``release()``: a test waits for ``arrived`` (an
        event, set when the first such request came in) instead of a wall-clock window."""
        hold = Hold(re.compile(match), query)
        with self._lock:
            self._holds.append(hold)
        return hold

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    def rate_limit(self, limit: int, window: float = 300.0, *, bucket: str = "resolvers") -> None:
        """Enforce a fixed-window quota of `limit` requests per `window` seconds on a bucket,
        as the real Hub does (https://huggingface.co/docs/hub/rate-limits): "resolvers" is every
        `/resolve/` URL, "api" every `/api/` URL. Each response of the bucket carries the IETF
        draft headers the Hub sends (`RateLimit: "api";r=<remaining>;t=<reset>` and
        `RateLimit-Policy`); a request over the quota gets 429 with `Retry-After: <reset>`.
        A window starts with the first request after the last one ended (when the Hub's
        windows start is not documented). huggingface_hub reads whole seconds only: a scaled
        window (5 minutes as a few seconds) is a whole number of seconds."""
        if bucket not in ("resolvers", "api"):
            raise ValueError(f"unknown bucket {bucket!r}")
        with self._lock:
            self._quotas[bucket] = _Quota(limit, window)

    def rate_limit_count(
        self, limit: int, retry_after: int = 1, *, bucket: str = "resolvers"
    ) -> None:
        """A quota counted in requests, not seconds: of a bucket's requests (as in
        `rate_limit`), `limit` are served, the next one gets 429 with `Retry-After:
        <retry_after>` (and no `RateLimit` headers), the next `limit` are served, and so on.
        How many 429s a run gets depends only on how many requests it sends (each refused one
        sent again counts too), not on the machine's speed: no window runs out while a slow
        run is still sending."""
        if bucket not in ("resolvers", "api"):
            raise ValueError(f"unknown bucket {bucket!r}")
        with self._lock:
            self._count_quotas[bucket] = _CountQuota(limit, retry_after)

    def clear_rate_limits(self) -> None:
        """No quota any more (``rate_limit`` again starts fresh windows)."""
        with self._lock:
            self._quotas.clear()
            self._count_quotas.clear()

    def _quota_headers(self, raw_path: str) -> tuple[bool, dict[str, str]]:
        """Count a request against its bucket's quota: (allowed, headers to send)."""
        bucket = "resolvers" if "/resolve/" in raw_path else "api"
        with self._lock:
            counted = self._count_quotas.get(bucket)
            if counted is not None and (bucket == "resolvers" or raw_path.startswith("/api/")):
                if counted.take():
                    return True, {}
                return False, {"Retry-After": str(counted.retry_after)}
            quota = self._quotas.get(bucket)
            if quota is None or (bucket == "api" and not raw_path.startswith("/api/")):
                return True, {}
            allowed, remaining, reset = quota.take(time.monotonic())
        headers = {
            "RateLimit": f'"{bucket}";r={remaining};t={reset}',
            "RateLimit-Policy": f'"fixed window";"{bucket}";q={quota.limit};w={quota.window:g}',
        }
        if not allowed:
            headers["Retry-After"] = str(reset)
        return allowed, headers

    def downloads(self, repo_id: str | None = None) -> list[str]:
        """Repo file paths fetched with GET /{repo}/resolve/... (in order)."""
        out = []
        for rec in self.request_log:
            if rec.method != "GET" or "/resolve/" not in rec.path:
                continue
            head, _, tail = rec.path.lstrip("/").partition("/resolve/")
            if repo_id is None or unquote(head) == repo_id:
                out.append(unquote(tail.partition("/")[2]))
        return out

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeHub:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        if self._thread is not None:
            self._thread.join(5)
        with server.conn_lock:
            conns = list(server.connections)
            threads = list(server.threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(5)
        server.server_close()

    @property
    def cdn_url(self) -> str:
        """Where LFS files are served from: this server under another name (``localhost``),
        so a client sees another origin, as the Hub's CDN is (huggingface_hub then reads the
        file's metadata from the redirect and does not follow it: utils/_http.py 735-782)."""
        return self.url.replace("//127.0.0.1:", "//localhost:", 1)

    def __enter__(self) -> FakeHub:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- request handling (called from server threads) ---------------------------------------
    def _find_failure(self, method: str, path: str, repo_id: str | None) -> _Failure | None:
        with self._lock:
            for f in self._failures:
                if f.repo_id != "*" and f.repo_id != repo_id:
                    continue
                if f.method and f.method != method:
                    continue
                if f.match and not f.match.search(path):
                    continue
                if f.times is not None:
                    if f.times <= 0:
                        continue
                    f.times -= 1
                return f
        return None

    def intercept(self, handler: Any, method: str, raw_path: str) -> bool:
        """Answer a request some other way than the Hub would (``tests.support.hostilehub``): True
        when ``handler`` has answered it (or dropped it); the stand-in Hub never does."""
        return False

    def _authenticated(self, headers: Any) -> bool:
        """True if the request carries an acceptable bearer token. Raises on a wrong one."""
        auth = headers.get("Authorization") or ""
        if not auth.lower().startswith("bearer "):
            return False
        if self.token is not None and auth[7:].strip() != self.token:
            raise _HTTPError(401, "Invalid credentials in Authorization header")
        return True

    def _repo_for_read(self, repo_id: str, authed: bool, *, files: bool = False) -> FakeRepo:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise _HTTPError(404, "Repository not found", "RepoNotFound")
        if repo.private and self.token is not None and not authed:
            raise _HTTPError(401, "Repository not found", "RepoNotFound")
        if repo.gated and (files or repo.gate_api) and not (authed and repo.gated_access):
            raise _HTTPError(
                403 if authed else 401,
                f"Access to model {repo_id} is restricted. You must have access to it and be"
                " authenticated to access it. Please log in.",
                "GatedRepo",
            )
        repo._sync()
        return repo

    def _repo_for_write(self, repo_id: str, authed: bool) -> FakeRepo:
        repo = self._repo_for_read(repo_id, authed)
        if self.token is not None and not authed:
            raise _HTTPError(401, "You must be authenticated to write", "RepoNotFound")
        return repo


def _split(path: str) -> list[str]:
    return [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []


def _repo_id_of(raw_path: str) -> str | None:
    parts = _split(raw_path)
    if len(parts) >= 4 and parts[0] == "api" and parts[1] == "models":
        return f"{parts[2]}/{parts[3]}"
    if len(parts) >= 3 and parts[2] == "resolve":
        return f"{parts[0]}/{parts[1]}"
    return None


# --- what the Hub says of a repo: the listing, ``expand``, LFS ---------------------------------
#
# Modelled on the Hub as documented (sources in each comment): huggingface_hub 2.4.0
# (``hf_api.py``), huggingface.js (``packages/tasks/src/model-data.ts``, ``tokenizer-data.ts``,
# ``packages/hub/src/lib/list-models.ts``), hub-docs ``docs/hub/rate-limits.md``. What no
# source settles is marked "not documented" and chosen plainly.

# ``/api/models`` items without ``expand`` or ``full``: what the Hub answers by default (the
# properties huggingface.js reads of a plain listing item, list-models.ts 167-177, plus the
# ones it always asks for, 9-16).
LISTING_DEFAULT = (
    "_id", "id", "likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag",
    "library_name", "createdAt", "modelId",
)  # fmt: skip
LISTING_FULL = (*LISTING_DEFAULT, "author", "sha", "lastModified", "siblings", "gated",
                "disabled", "spaces")  # fmt: skip
INFO_FIELDS = (*LISTING_FULL, "config", "gguf", "usedStorage")
# ``expand`` values the listing refuses: "only accepted when using the /api/models/repo_id
# endpoint" (PR huggingface/huggingface_hub#3182). The answer's shape is not documented: 400.
LISTING_REFUSED = frozenset({"baseModels", "childrenModelCount", "usedStorage"})
# ``sort`` as list_models sends it (``created_at`` -> ``createdAt`` ..., hf_api.py 2468-2477);
# always descending ("Sorting is always descending.", hfh commit fc185e9e2).
SORT_KEYS = {
    "downloads": lambda r: r.downloads,
    "likes": lambda r: r.likes,
    "trendingScore": lambda r: r.trending_score,
    "createdAt": lambda r: r.created_at,
    "lastModified": lambda r: r.commit_objects[r.head].date,
}
# What ``config`` holds of tokenizer_config.json (huggingface.js ``TokenizerConfig``,
# tokenizer-data.ts 1-32) and of config.json (``ModelData.config``, model-data.ts 25-76).
_TOKENIZER_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                   "mask_token", "use_default_system_prompt", "chat_template")  # fmt: skip
_CONFIG_KEYS = ("architectures", "auto_map", "model_type")
_QUANT_KEYS = ("bits", "load_in_4bit", "load_in_8bit", "quant_method")


def _values(query: dict[str, list[str]], name: str) -> list[str]:
    return query.get(name) or query.get(name + "[]") or []


def _truthy(query: dict[str, list[str]], name: str) -> bool:
    values = query.get(name)
    return bool(values) and values[-1].lower() in ("1", "true", "yes", "")


def listing_fields(query: dict[str, list[str]], *, listing: bool) -> tuple[str, ...]:
    """The fields an answer carries: ``expand`` names them all ("When used, only the
    properties in the list will be returned", list_models' docstring; ``_id`` and ``id``
    always come); else ``full`` (and ``config``) for a listing, everything for a repo's info."""
    expand = _values(query, "expand")
    if expand:
        refused = sorted(LISTING_REFUSED.intersection(expand)) if listing else []
        if refused:
            raise _HTTPError(400, f"Invalid expand value for the listing: {', '.join(refused)}")
        return ("_id", "id", *dict.fromkeys(e for e in expand if e not in ("_id", "id")))
    if not listing:
        return INFO_FIELDS
    names = LISTING_FULL if _truthy(query, "full") else LISTING_DEFAULT
    return (*names, "config") if _truthy(query, "config") else names


def repo_tags(repo: FakeRepo) -> list[str]:
    """The repo's tags as the listing shows them: its own, with its library and pipeline tag
    (the Hub computes these tags; ``filter`` matches them)."""
    extra = [t for t in (repo.library_name, repo.pipeline_tag) if t]
    return list(dict.fromkeys([*repo.tags, *extra]))


def _json_of(data: bytes | None) -> Any:
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def hub_config(files: dict[str, bytes]) -> dict[str, Any]:
    """``config`` as the Hub parses it: a few keys of config.json, tokenizer_config.json's
    special tokens and chat template (as text, no ids), chat_template.jinja's text
    (``chat_template_jinja``), processor_config.json's template. Never generation_config.json,
    ``eos_token_id`` or ``added_tokens_decoder``; a GGUF-only repo has ``{}``."""
    out: dict[str, Any] = {}
    config = _json_of(files.get("config.json"))
    if isinstance(config, dict):
        out.update((k, config[k]) for k in _CONFIG_KEYS if k in config)
        quant = config.get("quantization_config")
        if isinstance(quant, dict):
            out["quantization_config"] = {k: quant[k] for k in _QUANT_KEYS if k in quant}
    tok = _json_of(files.get("tokenizer_config.json"))
    if isinstance(tok, dict):
        out["tokenizer_config"] = {k: tok[k] for k in _TOKENIZER_KEYS if k in tok}
    processor = _json_of(files.get("processor_config.json"))
    if isinstance(processor, dict) and "chat_template" in processor:
        out["processor_config"] = {"chat_template": processor["chat_template"]}
    if "chat_template.jinja" in files:
        out["chat_template_jinja"] = files["chat_template.jinja"].decode("utf-8", "replace")
    return out


def is_lfs(repo: FakeRepo, path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in repo.lfs)


def lfs_pointer(data: bytes) -> bytes:
    """The Git LFS pointer a repo's git tree holds for ``data`` (the git-lfs spec's three
    lines): its git blob sha1 is the file's ``oid``/``blobId``, "not the actual file content"
    (huggingface_hub ``_commit_api.py``); the content's id is the sha256 (``lfs.oid``)."""
    sha256 = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()


def file_entry(repo: FakeRepo, path: str, data: bytes) -> dict[str, Any]:
    """A file as the tree and paths-info routes describe it: ``oid`` the git blob sha1 (of
    the LFS pointer for an LFS file), its size, and ``lfs`` {oid: sha256, size, pointerSize}."""
    if not is_lfs(repo, path):
        return {"type": "file", "oid": git_sha1(data), "size": len(data), "path": path}
    pointer = lfs_pointer(data)
    lfs = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
           "pointerSize": len(pointer)}  # fmt: skip
    return {"type": "file", "oid": git_sha1(pointer), "size": len(data), "path": path, "lfs": lfs}


def _sibling(repo: FakeRepo, path: str, data: bytes, blobs: bool) -> dict[str, Any]:
    """A ``siblings`` item: the name only, unless a repo's info is asked with ``blobs=true``
    ("only the file names are returned when listing repositories", ``RepoSibling``, hf_api.py
    648-678; the blob id, size and LFS details come "from one repo at a time")."""
    if not blobs:
        return {"rfilename": path}
    entry = file_entry(repo, path, data)
    out: dict[str, Any] = {"rfilename": path, "blobId": entry["oid"], "size": entry["size"]}
    if "lfs" in entry:
        lfs = entry["lfs"]
        out["lfs"] = {"sha256": lfs["oid"], "size": lfs["size"], "pointerSize": lfs["pointerSize"]}
    return out


def model_fields(
    repo: FakeRepo, sha: str, names: tuple[str, ...], *, blobs: bool
) -> dict[str, Any]:
    """The named fields of ``repo`` at commit ``sha`` (a field the repo lacks, ``gguf`` of a
    repo without GGUF files, is left out)."""
    commit = repo.commit_objects[sha]
    makers: dict[str, Any] = {
        "_id": lambda: hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
        "id": lambda: repo.repo_id,
        "modelId": lambda: repo.repo_id,
        "author": lambda: repo.author,
        "sha": lambda: sha,
        "lastModified": lambda: commit.date,
        "createdAt": lambda: repo.created_at,
        "private": lambda: repo.private,
        "gated": lambda: "manual" if repo.gated else False,
        "disabled": lambda: False,
        "downloads": lambda: repo.downloads,
        "likes": lambda: repo.likes,
        "trendingScore": lambda: repo.trending_score,
        "tags": lambda: repo_tags(repo),
        "pipeline_tag": lambda: repo.pipeline_tag,
        "library_name": lambda: repo.library_name,
        "siblings": lambda: [_sibling(repo, p, d, blobs) for p, d in sorted(commit.files.items())],
        "spaces": list,
        "usedStorage": lambda: sum(len(d) for d in commit.files.values()),
        "config": lambda: hub_config(commit.files),
        "gguf": lambda: repo.gguf,
    }
    out: dict[str, Any] = {}
    for name in names:
        make = makers.get(name)
        value = make() if make is not None else None
        if make is not None and (value is not None or name in ("pipeline_tag", "library_name")):
            out[name] = value
    return out


def select_models(hub: FakeHub, query: dict[str, list[str]], authed: bool) -> list[FakeRepo]:
    """The repos ``/api/models`` lists for a query, in order: ``author``; ``search``, a
    substring of the repo id (case-insensitive); ``filter``, tags, every one required (how the
    Hub combines several is not documented: AND, as the website's tag filters do);
    ``pipeline_tag``; ``sort`` (SORT_KEYS, descending; ties by id, not documented), else by
    id. A private repo only with the token."""
    author = (_values(query, "author") or [None])[-1]
    search = ((_values(query, "search") or [""])[-1]).lower()
    tags = set(_values(query, "filter"))
    pipeline = (_values(query, "pipeline_tag") or [None])[-1]
    sort = (_values(query, "sort") or [None])[-1]
    if sort is not None and sort not in SORT_KEYS:
        raise _HTTPError(400, f"Invalid sort: {sort}")
    out = []
    for repo in sorted(hub.repos.values(), key=lambda r: r.repo_id):
        repo._sync()
        if repo.private and hub.token is not None and not authed:
            continue
        if author and repo.author != author:
            continue
        if search and search not in repo.repo_id.lower():
            continue
        if tags and not tags <= set(repo_tags(repo)):
            continue
        if pipeline and repo.pipeline_tag != pipeline:
            continue
        out.append(repo)
    if sort is not None:
        out.sort(key=SORT_KEYS[sort], reverse=True)  # stable: ties stay by id
    return out


def _make_handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.hub = hub
    return Handler


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1.0"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # every verb goes through _dispatch
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # --- plumbing ----------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str = "application/json",
        headers: dict[str, str | None] | None = None,
    ) -> None:
        self.record.status = status
        self.send_response(status)
        all_headers: dict[str, str | None] = {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "X-Request-Id": f"fakehub-{len(self.hub.request_log)}",
            **getattr(self, "extra_headers", {}),
        }
        all_headers.update(headers or {})
        cut = getattr(self, "cut", None)
        if cut is not None and self.command != "HEAD":
            body = body[:cut]
            all_headers["Content-Length"] = str(len(body))
        for key, value in all_headers.items():
            if value is not None:
                self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, data: Any, status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers=headers)

    def _error(self, err: _HTTPError) -> None:
        headers: dict[str, str | None] = {"X-Error-Message": err.message}
        if err.code:
            headers["X-Error-Code"] = err.code
        headers.update(err.headers)
        self._json({"error": err.message}, err.status, headers)

    def _dispatch(self, method: str) -> None:
        hub = self.hub
        split = urlsplit(self.path)
        raw_path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        repo_id = _repo_id_of(raw_path)
        self.record = RequestRecord(method, raw_path, query, Headers(self.headers.items()), repo_id)
        self.query = query
        with hub._lock:
            hub.requests.append((method, raw_path))
            hub.request_log.append(self.record)
        body = self._read_body()
        self.extra_headers: dict[str, str] = {}
        self.cut: int | None = None
        try:
            with hub._lock:
                holds = [
                    h
                    for h in hub._holds
                    if h.match.search(raw_path) and (h.query is None or h.query in split.query)
                ]
            for hold in holds:
                hold.arrived.set()
                while not (hold.released.wait(0.05) or hub._stopping.is_set()):
                    pass
            if hub.latency:
                hub._stopping.wait(hub.latency)
            allowed, self.extra_headers = hub._quota_headers(raw_path)
            if not allowed:
                raise _HTTPError(429, "You have been rate-limited", headers=self.extra_headers)
            if hub.intercept(self, method, raw_path):
                return
            failure = hub._find_failure(method, raw_path, repo_id)
            if failure is not None and failure.delay:
                hub._stopping.wait(failure.delay)
            if failure is not None and failure.until is not None:
                while not (failure.until.wait(0.05) or hub._stopping.is_set()):
                    pass
            if failure is not None and (failure.status == 0 or failure.status >= 400):
                self._inject(failure)
                return
            if failure is not None:
                self.cut = failure.cut
            authed = hub._authenticated(self.headers)
            with hub._lock:
                self._route(method, raw_path, body, authed)
        except _HTTPError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001  (a bug in the fake: record it, answer 500)
            hub.server_errors.append(exc)
            with contextlib.suppress(OSError):
                self._json({"error": f"fake hub error: {exc!r}"}, 500)

    def _inject(self, failure: _Failure) -> None:
        if failure.status == 0:
            self.record.status = 0
            self.close_connection = True
            return
        defaults = {401: "RepoNotFound", 404: "RepoNotFound", 403: "GatedRepo"}
        headers: dict[str, str | None] = {
            "X-Error-Code": defaults.get(failure.status),
            "X-Error-Message": f"Injected failure {failure.status}",
        }
        headers.update(failure.headers)
        self._json({"error": f"Injected failure {failure.status}"}, failure.status, headers)

    # --- routing -----------------------------------------------------------------------------
    def _route(self, method: str, raw_path: str, body: bytes, authed: bool) -> None:
        parts = _split(raw_path)
        raw_parts = raw_path.strip("/").split("/")
        if method in ("GET", "HEAD") and len(parts) >= 5 and parts[2] == "resolve":
            rev = parts[3]
            self._resolve(f"{parts[0]}/{parts[1]}", rev, "/".join(parts[4:]), authed)
            return
        if method in ("GET", "HEAD") and len(parts) == 2 and parts[0] == LFS_ROUTE:
            self._lfs_object(parts[1])
            return
        if method in ("GET", "HEAD") and parts and parts[0] == CDN_PREFIX:
            self._cdn(parts[1:])
            return
        if len(parts) < 2 or parts[0] != "api":
            raise _HTTPError(404, f"Not found: {method} {raw_path}")
        if parts[1] == "whoami-v2" and method == "GET":
            self._whoami(authed)
            return
        if parts[1] == "validate-yaml" and method == "POST":
            self._json({"errors": [], "warnings": []})
            return
        if parts[1] != "models":
            raise _HTTPError(404, f"Not found: {method} {raw_path}")
        if len(parts) == 2 and method == "GET":
            self._list_models(authed)
            return
        if len(parts) < 4:
            raise _HTTPError(404, f"Not found: {method} {raw_path}")
        repo_id = f"{parts[2]}/{parts[3]}"
        rest = parts[4:]
        raw_rest = raw_parts[4:]
        if method == "GET" and not rest:
            self._model_info(repo_id, "main", authed)
        elif method == "GET" and len(rest) == 2 and rest[0] == "revision":
            self._model_info(repo_id, rest[1], authed)
        elif method == "GET" and rest and rest[0] == "tree" and len(raw_rest) >= 2:
            # revision is one raw segment (refs%2Fpr%2F1); path_in_repo is quoted with safe=""
            self._tree(repo_id, unquote(raw_rest[1]), unquote("/".join(raw_rest[2:])), authed)
        elif method == "GET" and rest == ["refs"]:
            self._refs(repo_id, authed)
        elif method == "POST" and len(rest) == 2 and rest[0] == "paths-info":
            self._paths_info(repo_id, rest[1], body, authed)
        elif method == "POST" and len(rest) == 2 and rest[0] == "preupload":
            self._preupload(repo_id, rest[1], body, authed)
        elif method == "POST" and len(rest) == 2 and rest[0] == "commit":
            self._commit(repo_id, rest[1], body, authed)
        elif rest and rest[0] == "discussions":
            self._discussions(method, repo_id, rest[1:], body, authed)
        else:
            raise _HTTPError(404, f"Not found: {method} {raw_path}")

    # --- handlers ----------------------------------------------------------------------------
    def _whoami(self, authed: bool) -> None:
        if not authed:
            raise _HTTPError(401, "Invalid credentials in Authorization header")
        token = (self.headers.get("Authorization") or "")[7:].strip()
        self._json(
            {
                "type": "user",
                "id": "0" * 24,
                "name": USER,
                "fullname": "Eosfix User",
                "avatarUrl": "/avatars/eosfix-user.svg",
                "email": None,
                "emailVerified": False,
                "isPro": False,
                "canPay": False,
                "orgs": [
                    {"type": "org", "name": ns, "fullname": ns, "roleInOrg": "write"}
                    for ns in sorted({r.author for r in self.hub.repos.values()})
                ],
                "auth": {
                    "type": "access_token",
                    "accessToken": {
                        "displayName": "fake",
                        "role": "write",
                        "createdAt": "2024-01-01T00:00:00.000Z",
                    },
                },
                "_token_tail": token[-4:],
            }
        )

    def _repo_json(self, repo: FakeRepo, sha: str, *, listing: bool = False) -> dict[str, Any]:
        """A repo as ``/api/models/{id}`` (or, ``listing``, one item of ``/api/models``)
        answers it: the fields ``listing_fields`` names for this request's query."""
        names = listing_fields(self.query, listing=listing)
        return model_fields(repo, sha, names, blobs=not listing and self._flag("blobs"))

    def _flag(self, name: str) -> bool:
        values = self.query.get(name)
        return bool(values) and values[-1].lower() in ("1", "true", "yes", "")

    def _resolve_rev(self, repo: FakeRepo, rev: str) -> str:
        sha = repo.resolve(rev)
        if sha is None:
            raise _HTTPError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return sha

    def _model_info(self, repo_id: str, rev: str, authed: bool) -> None:
        repo = self.hub._repo_for_read(repo_id, authed)
        self._json(self._repo_json(repo, self._resolve_rev(repo, rev)))

    def _list_models(self, authed: bool) -> None:
        repos = select_models(self.hub, self.query, authed)
        names = listing_fields(self.query, listing=True)  # refuses what the listing refuses
        # ``limit`` is the page size: the next page's link keeps it, and the client stops
        # after as many as it wants (huggingface_hub's list_models: ``limit`` sent, then
        # ``islice``); a Hub developer's example of the Link header, PR
        # huggingface/huggingface_hub#1176: ``...?limit=10&sort=likes&direction=-1&cursor=...``
        limit = (self.query.get("limit") or [None])[-1]
        size = min(self.hub.page_size, int(limit)) if limit else self.hub.page_size
        self._paginated(repos, lambda r: model_fields(r, r.head, names, blobs=False), size)

    def _paginated(self, items: list[Any], render: Any = None, size: int | None = None) -> None:
        size = max(1, self.hub.page_size if size is None else size)
        cursor = int((self.query.get("cursor") or ["0"])[-1])
        page = items[cursor : cursor + size]
        if render is not None:
            page = [render(item) for item in page]
        headers = {}
        if cursor + size < len(items):
            params = [(k, v) for k, vs in self.query.items() if k != "cursor" for v in vs]
            params.append(("cursor", str(cursor + size)))
            qs = "&".join(f"{quote(k)}={quote(v)}" for k, v in params)
            path = urlsplit(self.path).path
            headers["Link"] = f'<{self.hub.url}{path}?{qs}>; rel="next"'
        self._json(page, headers=headers)

    def _tree(self, repo_id: str, rev: str, path: str, authed: bool) -> None:
        repo = self.hub._repo_for_read(repo_id, authed)
        sha = self._resolve_rev(repo, rev)
        files = repo.commit_objects[sha].files
        path = path.strip("/")
        recursive = self._flag("recursive")
        expand = self._flag("expand")
        prefix = f"{path}/" if path else ""
        under = {p: d for p, d in files.items() if p.startswith(prefix)}
        if path and not under:
            raise _HTTPError(404, f"{path} does not exist on {rev}", "EntryNotFound")
        dirs: set[str] = set()
        entries: list[dict[str, Any]] = []
        for p in sorted(under):
            rel_parts = p[len(prefix) :].split("/")
            for i in range(1, len(rel_parts)):
                dirs.add(prefix + "/".join(rel_parts[:i]))
        for d in sorted(dirs):
            if not recursive and "/" in d[len(prefix) :]:
                continue
            sub = {p: files[p] for p in files if p.startswith(d + "/")}
            entry: dict[str, Any] = {
                "type": "directory",
                "path": d,
                "oid": commit_sha(sub),
                "size": 0,
            }
            entries.append(entry)
        for p, data in sorted(under.items()):
            if not recursive and "/" in p[len(prefix) :]:
                continue
            entries.append(file_entry(repo, p, data))
        entries.sort(key=lambda e: e["path"])
        if expand:
            for e in entries:
                c = repo.last_commit_for(sha, e["path"], is_dir=e["type"] == "directory")
                e["lastCommit"] = {"id": c.sha, "title": c.title, "date": c.date}
        self._paginated(entries)

    def _refs(self, repo_id: str, authed: bool) -> None:
        repo = self.hub._repo_for_read(repo_id, authed)

        def info(name: str, ref: str) -> dict[str, str]:
            return {"name": name, "ref": ref, "targetCommit": repo.refs[name]}

        branches = [info(n, f"refs/heads/{n}") for n in repo.refs if not n.startswith("refs/")]
        prs = [info(n, n) for n in repo.refs if n.startswith("refs/pr/")]
        data: dict[str, Any] = {"branches": branches, "converts": [], "tags": []}
        if self._flag("include_prs"):
            data["pullRequests"] = prs
        self._json(data)

    def _resolve(self, repo_id: str, rev: str, path: str, authed: bool) -> None:
        repo = self.hub._repo_for_read(repo_id, authed, files=True)
        sha = self._resolve_rev(repo, rev)
        files = repo.commit_objects[sha].files
        if path not in files:
            raise _HTTPError(
                404, "Entry not found", "EntryNotFound", headers={"X-Repo-Commit": sha}
            )
        data = files[path]
        size = self.hub.declared_sizes.get((repo_id, path), len(data))
        if self.hub.cdn and path.endswith(".gguf"):  # a GGUF repo's publisher (signed URLs)
            self._redirect_to_cdn(repo_id, sha, path, data, size)
            return
        if is_lfs(repo, path):
            self._lfs_redirect(sha, data)
            return
        headers: dict[str, str | None] = {
            "X-Repo-Commit": sha,
            "ETag": f'"{git_sha1(data)}"',
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{Path(path).name}"',
        }
        self._send_file(data, size, headers)

    # --- GGUF repos: ranges, a CDN, files larger than the bytes held ----------------------
    def _send_file(self, data: bytes, size: int, headers: dict[str, str | None]) -> None:
        """A file's bytes (``data``, then zeros up to ``size``), whole or the one range asked
        (``bytes=a-b`` or ``bytes=a-``): 206 with ``Content-Range``, 416 past the end."""
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if not (m and self.command == "GET") or self.hub.ignore_ranges:
            self._send_whole(data, size, headers)
            return
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if start >= size:
            headers["Content-Range"] = f"bytes */{size}"
            self._send(416, b"", content_type="application/octet-stream", headers=headers)
            return
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        body = _span(data, start, end + 1)
        self._send(206, body, content_type="application/octet-stream", headers=headers)

    def _send_whole(self, data: bytes, size: int, headers: dict[str, str | None]) -> None:
        """200 and the whole file, its zeros written a chunk at a time (never held whole: a
        client that stops reading closes the connection)."""
        if size <= len(data):
            self._send(200, data[:size], content_type="application/octet-stream", headers=headers)
            return
        self.record.status = 200
        self.send_response(200)
        all_headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size),
                       **headers}  # fmt: skip
        for key, value in all_headers.items():
            if value is not None:
                self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.write(data)
        zeros, left = bytes(1 << 20), size - len(data)
        while left > 0:
            self.wfile.write(zeros[: min(left, len(zeros))])
            left -= len(zeros)

    def _redirect_to_cdn(self, repo_id: str, sha: str, path: str, data: bytes, size: int) -> None:
        """As the Hub does for an LFS/Xet file: 302 to a signed URL on another host (here
        ``localhost`` instead of ``127.0.0.1``), with the X-Linked-* headers."""
        port = self.server.server_address[1]
        target = f"http://localhost:{port}/{CDN_PREFIX}/{quote(repo_id)}/{sha}/{quote(path)}"
        headers: dict[str, str | None] = {
            "Location": f"{target}?X-Amz-Expires=3600&X-Amz-Signature=fake",
            "X-Repo-Commit": sha,
            "X-Linked-Size": str(size),
            "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
        }
        self._send(302, b"", headers=headers)

    def _cdn(self, rest: list[str]) -> None:
        """The CDN's answer to a signed URL: the file's bytes, ranges honoured; every request
        is kept in ``hub.cdn_requests`` (a test checks that no token reached it)."""
        self.hub.cdn_requests.append(self.record)
        if len(rest) < 4:
            raise _HTTPError(404, "no such object")
        repo_id, sha, path = f"{rest[0]}/{rest[1]}", rest[2], "/".join(rest[3:])
        repo = self.hub.repos.get(repo_id)
        files = repo.commit_objects[sha].files if repo and sha in repo.commit_objects else {}
        if path not in files:
            raise _HTTPError(404, "no such object")
        data = files[path]
        size = self.hub.declared_sizes.get((repo_id, path), len(data))
        self._send_file(data, size, {"Accept-Ranges": "bytes", "ETag": '"cdn-etag"'})

    def _lfs_redirect(self, sha: str, data: bytes) -> None:
        """An LFS file's resolve: a redirect to the CDN carrying the file's metadata, which
        huggingface_hub reads from this very answer (``X-Linked-Etag`` or ``ETag``,
        ``X-Linked-Size`` or ``Content-Length``: file_download.py 1678-1688; "the file
        metadata is carried by this very response", utils/_http.py 735-782). ``X-Linked-Etag``
        is the sha256 of the content ("its sha256 if stored in git-lfs", file_download.py 269);
        the redirect's own ``ETag`` is the git oid of the pointer."""
        sha256 = hashlib.sha256(data).hexdigest()
        with self.hub._lock:
            self.hub.lfs_objects[sha256] = data
        headers: dict[str, str | None] = {
            "X-Repo-Commit": sha,
            "ETag": f'"{git_sha1(lfs_pointer(data))}"',
            "X-Linked-Etag": f'"{sha256}"',
            "X-Linked-Size": str(len(data)),
            "Location": f"{self.hub.cdn_url}/{LFS_ROUTE}/{sha256}",
        }
        self._send(302, b"", content_type="text/plain", headers=headers)

    def _lfs_object(self, sha256: str) -> None:
        """The CDN's answer: the bytes (ranges too), with the CDN's own ETag (an md5, as a
        storage service names objects), no ``X-Repo-Commit``. Not a ``/resolve/`` URL: no
        quota counts it (hub-docs rate-limits.md: Resolvers are "all the URLs that contain a
        /resolve/ segment"; whether the Hub counts the CDN hop is not documented)."""
        with self.hub._lock:
            data = self.hub.lfs_objects.get(sha256)
        if data is None:
            raise _HTTPError(404, "NoSuchKey")
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        self._send_file(data, len(data), {"ETag": f'"{etag}"', "Accept-Ranges": "bytes"})

    def _paths_info(self, repo_id: str, rev: str, body: bytes, authed: bool) -> None:
        """``POST /api/models/{id}/paths-info/{rev}``, form-encoded ``paths`` (repeated) and
        ``expand`` (huggingface_hub ``get_paths_info``, hf_api.py 4270-4345): what the tree
        says of each path asked, in the order asked; "If a path do not exist, it is ignored".
        At most 1,000 paths ("Otherwise we get 413", ``_commit_api.py`` 45-50)."""
        repo = self.hub._repo_for_read(repo_id, authed)
        sha = self._resolve_rev(repo, rev)
        files = repo.commit_objects[sha].files
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        paths = form.get("paths", [])
        if len(paths) > PATHS_INFO_MAX:
            raise _HTTPError(413, "Payload Too Large: too many parameters")
        expand = (form.get("expand") or ["false"])[-1].lower() == "true"
        out: list[dict[str, Any]] = []
        for path in dict.fromkeys(p.strip("/") for p in paths):
            if path in files:
                entry = file_entry(repo, path, files[path])
            elif any(p.startswith(path + "/") for p in files):
                sub = {p: d for p, d in files.items() if p.startswith(path + "/")}
                entry = {"type": "directory", "oid": commit_sha(sub), "size": 0, "path": path}
            else:
                continue
            if expand:
                c = repo.last_commit_for(sha, path, is_dir=entry["type"] == "directory")
                entry["lastCommit"] = {"id": c.sha, "title": c.title, "date": c.date}
            out.append(entry)
        self._json(out)

    def _preupload(self, repo_id: str, rev: str, body: bytes, authed: bool) -> None:
        repo = self.hub._repo_for_write(repo_id, authed)
        sha = self._resolve_rev(repo, rev)
        files = repo.commit_objects[sha].files
        payload = json.loads(body or b"{}")
        out = []
        for f in payload.get("files", []):
            entry: dict[str, Any] = {
                "path": f["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
            }
            if f["path"] in files:
                entry["oid"] = git_sha1(files[f["path"]])
            out.append(entry)
        self._json({"files": out, "commitOid": sha})

    def _commit(self, repo_id: str, rev: str, body: bytes, authed: bool) -> None:
        hub = self.hub
        repo = hub._repo_for_write(repo_id, authed)
        create_pr = self._flag("create_pr")
        rev = rev.removeprefix("refs/heads/")
        header: dict[str, Any] = {}
        added: dict[str, bytes] = {}
        deleted: list[str] = []
        deleted_folders: list[str] = []
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item.get("key"), item.get("value") or {}
            if key == "header":
                header = value
            elif key == "file":
                if value.get("encoding", "base64") != "base64":
                    raise _HTTPError(400, f"Unsupported encoding {value.get('encoding')}")
                added[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                deleted.append(value["path"])
            elif key == "deletedFolder":
                deleted_folders.append(value["path"].rstrip("/"))
            else:
                raise _HTTPError(400, f"Unsupported commit operation {key!r} (fake hub: no LFS)")
        summary = header.get("summary") or ""
        if not summary:
            raise _HTTPError(400, "Commit summary is required")
        description = header.get("description") or ""
        parent_commit = header.get("parentCommit")

        if create_pr:
            if not repo.is_branch(rev):
                raise _HTTPError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            base_sha = self._resolve_rev(repo, parent_commit or rev)
        else:
            base_sha = self._resolve_rev(repo, rev)
            if repo.is_branch(rev) and not repo.can_write:
                raise _HTTPError(
                    403,
                    f"You don't have the rights to push to {repo_id}; open a pull request instead",
                )
            if parent_commit and parent_commit != base_sha:
                raise _HTTPError(412, "A commit has happened since. Please refresh and try again.")
        new = dict(repo.commit_objects[base_sha].files)
        for path in deleted:
            if path not in new:
                raise _HTTPError(
                    404, f"A file with this name doesn't exist: {path}", "EntryNotFound"
                )
            del new[path]
        for folder in deleted_folders:
            gone = [p for p in new if p.startswith(folder + "/")]
            if not gone:
                raise _HTTPError(404, f"Folder doesn't exist: {folder}", "EntryNotFound")
            for p in gone:
                del new[p]
        new.update(added)
        commit = repo._add_commit(new, parent=base_sha, title=summary, description=description)

        pr_num: int | None = None
        reply: dict[str, Any] = {
            "success": True,
            "commitOid": commit.sha,
            "commitUrl": f"{hub.url}/{repo_id}/commit/{commit.sha}",
            "hookOutput": "",
        }
        if create_pr:
            pr_num = len(repo.discussions) + 1
            disc = FakeDiscussion(
                pr_num, summary, description, True, base_ref=rev, base_sha=base_sha
            )
            disc.events.append(_comment_event(description))
            disc.events.append(_commit_event(commit))
            repo.discussions.append(disc)
            repo.refs[f"refs/pr/{pr_num}"] = commit.sha
            reply["pullRequestUrl"] = f"{hub.url}/{repo_id}/discussions/{pr_num}"
        elif rev.startswith("refs/pr/"):
            repo.refs[rev] = commit.sha
            pr_num = int(rev.rsplit("/", 1)[1])
            for d in repo.discussions:
                if d.num == pr_num:
                    d.events.append(_commit_event(commit))
        else:
            repo._set_branch(rev, commit)
        hub.commits_received.append(
            {
                "repo_id": repo_id,
                "revision": rev,
                "create_pr": create_pr,
                "summary": summary,
                "description": description,
                "parent_commit": parent_commit,
                "files": added,
                "deleted": deleted + [f + "/" for f in deleted_folders],
                "commit_oid": commit.sha,
                "pr_num": pr_num,
            }
        )
        self._json(reply)

    # --- discussions -------------------------------------------------------------------------
    def _discussion_json(self, repo: FakeRepo, d: FakeDiscussion) -> dict[str, Any]:
        return {
            "num": d.num,
            "title": d.title,
            "status": d.status,
            "isPullRequest": d.is_pull_request,
            "author": _author(d.author),
            "createdAt": d.created_at,
            "repo": {"name": repo.repo_id, "type": "model"},
            "pinned": False,
            "numComments": sum(1 for e in d.events if e["type"] == "comment"),
            "topReactions": [],
        }

    def _discussions(
        self, method: str, repo_id: str, rest: list[str], body: bytes, authed: bool
    ) -> None:
        hub = self.hub
        repo = hub._repo_for_read(repo_id, authed)
        if method == "GET" and not rest:
            self._list_discussions(repo)
            return
        if method == "POST" and not rest:
            hub._repo_for_write(repo_id, authed)
            payload = json.loads(body or b"{}")
            num = len(repo.discussions) + 1
            is_pr = bool(payload.get("pullRequest"))
            d = FakeDiscussion(
                num,
                payload.get("title", ""),
                payload.get("description", ""),
                is_pr,
                status="draft" if is_pr else "open",
                base_sha=repo.head if is_pr else None,
            )
            d.events.append(_comment_event(d.description))
            repo.discussions.append(d)
            if is_pr:
                repo.refs[f"refs/pr/{num}"] = repo.head
            self._json({"num": num, "url": f"{hub.url}/{repo_id}/discussions/{num}"})
            return
        try:
            num = int(rest[0])
            d = next(x for x in repo.discussions if x.num == num)
        except (ValueError, StopIteration):
            raise _HTTPError(404, "Discussion not found") from None
        if method == "GET" and len(rest) == 1:
            data = self._discussion_json(repo, d)
            data["events"] = d.events
            data["locked"] = False
            if d.is_pull_request:
                data["changes"] = {"base": f"refs/heads/{d.base_ref}"}
                if d.merge_commit:
                    data["changes"]["mergeCommitId"] = d.merge_commit
                data["filesWithConflicts"] = []
                if self._flag("diff"):
                    data["diff"] = _diff(
                        repo.commit_objects[d.base_sha or repo.head].files,
                        repo.pr_files(d.num),
                    )
            self._json(data)
            return
        if method != "POST" or len(rest) != 2:
            raise _HTTPError(404, f"Not found: {method} discussions/{'/'.join(rest)}")
        hub._repo_for_write(repo_id, authed)
        payload = json.loads(body or b"null") or {}
        action = rest[1]
        if action == "comment":
            event = _comment_event(payload.get("comment", ""))
            d.events.append(event)
            self._json({"newMessage": event})
        elif action == "status":
            d.status = payload["status"]
            event = _event("status-change", {"status": d.status})
            d.events.append(event)
            if payload.get("comment"):
                d.events.append(_comment_event(payload["comment"]))
            self._json({"newStatus": event})
        elif action == "merge" and d.is_pull_request and d.status in ("open", "draft"):
            base = repo.commit_objects[d.base_sha or repo.head].files
            head = repo.pr_files(d.num)
            new = dict(repo.commit_objects[repo.refs[d.base_ref]].files)
            for p in set(base) - set(head):
                new.pop(p, None)
            new.update({p: c for p, c in head.items() if base.get(p) != c})
            commit = repo._add_commit(
                new, parent=repo.refs[d.base_ref], title=f"Merge PR #{d.num}: {d.title}"
            )
            repo._set_branch(d.base_ref, commit)
            d.status, d.merge_commit = "merged", commit.sha
            d.events.append(_event("status-change", {"status": "merged"}))
            self._json({})
        else:
            raise _HTTPError(400, f"Cannot {action} discussion {d.num}")

    def _list_discussions(self, repo: FakeRepo) -> None:
        items = list(reversed(repo.discussions))  # newest first, like the Hub
        kind = (self.query.get("type") or ["all"])[-1]
        status = (self.query.get("status") or ["all"])[-1]
        author = (self.query.get("author") or [None])[-1]
        if kind == "pull_request":
            items = [d for d in items if d.is_pull_request]
        elif kind == "discussion":
            items = [d for d in items if not d.is_pull_request]
        if status == "open":
            items = [d for d in items if d.status in ("open", "draft")]
        elif status == "closed":
            items = [d for d in items if d.status in ("closed", "merged")]
        if author:
            items = [d for d in items if d.author == author]
        size = self.hub.discussions_page_size
        page = int((self.query.get("p") or ["0"])[-1])
        self._json(
            {
                "discussions": [
                    self._discussion_json(repo, d) for d in items[page * size : (page + 1) * size]
                ],
                "count": len(items),
                "start": page * size,
                "numClosedDiscussions": sum(
                    1 for d in repo.discussions if d.status in ("closed", "merged")
                ),
            }
        )


def _author(name: str) -> dict[str, Any]:
    return {
        "_id": hashlib.sha1(name.encode()).hexdigest()[:24],
        "name": name,
        "fullname": name,
        "avatarUrl": "",
        "type": "user",
        "isPro": False,
        "isHf": False,
        "isOwner": False,
        "isOrgMember": False,
    }


_EVENT_COUNTER = iter(range(1, 1 << 62))


def _event(kind: str, data: dict[str, Any], author: str = USER) -> dict[str, Any]:
    return {
        "id": f"{next(_EVENT_COUNTER):024x}",
        "type": kind,
        "createdAt": _now(),
        "author": _author(author),
        "data": data,
    }


def _comment_event(text: str) -> dict[str, Any]:
    return _event(
        "comment",
        {
            "edited": False,
            "hidden": False,
            "latest": {"raw": text, "html": f"<p>{text}</p>", "updatedAt": _now()},
            "numEdits": 0,
            "editors": [USER],
            "reactions": [],
            "isReport": False,
        },
    )


def _commit_event(commit: FakeCommit) -> dict[str, Any]:
    return _event("commit", {"subject": commit.title, "oid": commit.sha})


def _diff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        a_lines = a.decode(errors="replace").splitlines(keepends=True) if a is not None else []
        b_lines = b.decode(errors="replace").splitlines(keepends=True) if b is not None else []
        out.extend(
            difflib.unified_diff(
                a_lines,
                b_lines,
                f"a/{path}" if a is not None else "/dev/null",
                f"b/{path}" if b is not None else "/dev/null",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


# --- GGUF repos ---------------------------------------------------------------------------------

CDN_PREFIX = "cdn"  # the path the stand-in CDN serves signed URLs under (FakeHub.cdn)


def _span(data: bytes, start: int, end: int) -> bytes:
    """Bytes [start, end) of a file held as ``data`` followed by zeros."""
    head = data[start:end] if start < len(data) else b""
    return head + bytes(max(0, end - max(start, len(data))))


def gguf_summary(data: bytes) -> dict[str, Any]:
    """What the Hub's ``expand=gguf`` says of a GGUF file, read with gguf-py (llama.cpp's
    reader, not eosfix's): its architecture, context length, chat template and the texts of
    its bos and eos tokens (packages/ollama-utils/README.md lines 12-25 at huggingface.js
    fe42e68; packages/tasks/src/model-data.ts lines 129-134)."""
    import tempfile

    import gguf

    with tempfile.NamedTemporaryFile(suffix=".gguf") as tmp:
        tmp.write(data)
        tmp.flush()
        reader = gguf.GGUFReader(tmp.name)
        fields = reader.fields

        def value(key: str) -> Any:
            f = fields.get(key)
            return None if f is None else f.contents()

        arch = value("general.architecture")
        tokens = value("tokenizer.ggml.tokens") or []
        out: dict[str, Any] = {"total": 0, "architecture": arch}
        ctx = value(f"{arch}.context_length")
        if ctx is not None:
            out["context_length"] = ctx
        template = value("tokenizer.chat_template")
        if template is not None:
            out["chat_template"] = template
        for role in ("bos", "eos"):
            i = value(f"tokenizer.ggml.{role}_token_id")
            if isinstance(i, int) and 0 <= i < len(tokens):
                out[f"{role}_token"] = tokens[i]
    return out


def add_gguf_repo(
    hub: FakeHub,
    repo_id: str,
    ggufs: dict[str, bytes],
    *,
    files: dict[str, bytes | str] | None = None,
    sizes: dict[str, int] | None = None,
    summary_of: str | None = None,
) -> FakeRepo:
    """A repo of GGUF files (and ``files`` beside them: README.md, params...): the listing's
    ``gguf`` summary is ``summary_of``'s (default: the first file), ``sizes`` declares files
    larger than the bytes held (a header standing for a multi-GB file)."""
    repo = hub.add_repo(repo_id, {**(files or {}), **ggufs})
    first = summary_of or next(iter(ggufs))
    try:
        repo.gguf = gguf_summary(ggufs[first])
    except Exception:  # noqa: BLE001 - a header gguf-py cannot read: the Hub says nothing
        repo.gguf = None
    for path, size in (sizes or {}).items():
        hub.declared_sizes[(repo_id, path)] = size
    return repo


# --- pytest integration ------------------------------------------------------------------------


def patch_huggingface_hub(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, home: Path, hub: FakeHub | None = None
) -> None:
    """Point huggingface_hub (env and already-imported constants) at `endpoint` and `home`.

    Also closes the shared httpx2 client (so no connection to another server is reused) and,
    if `hub` is given, makes huggingface_hub's retry back-off sleeps instant (recorded in
    `hub.backoff_sleeps`).
    """
    import huggingface_hub
    from huggingface_hub import constants, file_download, hf_api
    from huggingface_hub.utils import _cache_manager, _http

    home = Path(home)
    cache = home / "hub"
    cache.mkdir(parents=True, exist_ok=True)
    paths = {
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(cache),
        "HUGGINGFACE_HUB_CACHE": str(cache),
        "HF_ASSETS_CACHE": str(home / "assets"),
        "HF_XET_CACHE": str(home / "xet"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
    }
    env = {
        "EOSFIX_CACHE": str(home / "eosfix"),  # eosfix's store of Hub files (hubstore.py)
        "HF_ENDPOINT": endpoint,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        **{k: v for k, v in paths.items() if k != "HF_STORED_TOKENS_PATH"},
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_OIDC_RESOURCE",
        "HF_OIDC_ID_TOKEN",
        "HUGGINGFACE_CO_STAGING",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    ):
        monkeypatch.delenv(key, raising=False)

    consts: dict[str, Any] = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_UPDATE_CHECK": True,
        **paths,
    }
    for name, value in consts.items():
        monkeypatch.setattr(constants, name, value)
    monkeypatch.setattr(_cache_manager, "HF_HUB_CACHE", str(cache))
    # module-level HfApi() behind huggingface_hub.model_info & co. captured the endpoint at import
    monkeypatch.setattr(hf_api.api, "endpoint", endpoint)
    assets = sys.modules.get("huggingface_hub.utils._cache_assets")
    if assets is not None:
        monkeypatch.setattr(assets, "HF_ASSETS_CACHE", paths["HF_ASSETS_CACHE"])
    tf_hub = sys.modules.get("transformers.utils.hub")
    if tf_hub is not None and hasattr(tf_hub, "HF_MODULES_CACHE"):
        monkeypatch.setattr(tf_hub, "HF_MODULES_CACHE", str(home / "modules"))

    if hub is not None:
        import time as _time

        def _sleep(seconds: float) -> None:
            hub.backoff_sleeps.append(seconds)

        shim = types.SimpleNamespace(**{k: getattr(_time, k) for k in dir(_time) if k[0] != "_"})
        shim.sleep = _sleep
        monkeypatch.setattr(_http, "time", shim)
        monkeypatch.setattr(file_download, "time", shim)
        _instant_eosfix_waits(monkeypatch, hub)

    huggingface_hub.close_session()


def _instant_eosfix_waits(monkeypatch: pytest.MonkeyPatch, hub: FakeHub) -> None:
    """eosfix's backoffs and rate-limit pauses take no time (recorded in hub.backoff_sleeps):
    its clock jumps forward by each wait instead, so pauses end as they would."""
    from eosfix.sources.hub import http as hubhttp

    skipped = [0.0]
    lock = threading.Lock()

    def clock() -> float:
        return time.monotonic() + skipped[0]

    def sleep(seconds: float, stopping: threading.Event) -> None:
        with lock:
            hub.backoff_sleeps.append(seconds)
            skipped[0] += max(0.0, seconds)

    monkeypatch.setattr(hubhttp, "_clock", clock)
    monkeypatch.setattr(hubhttp, "_sleep", sleep)


@pytest.fixture
def fake_hub(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeHub]:
    """A started FakeHub with huggingface_hub pointed at it and at `tmp_path/hf_home`.

    Indirect parametrization may pass {"token": "..."} to require auth for private repos.
    The fixture fails at teardown if the fake itself raised (hub.server_errors).
    """

    params = getattr(request, "param", None) or {}
    with serving(FakeHub(token=params.get("token")), monkeypatch, tmp_path / "hf_home") as hub:
        yield hub


@contextlib.contextmanager
def serving(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, home: Path, *, instant: bool = True
) -> Iterator[FakeHub]:
    """``hub`` started, huggingface_hub and eosfix pointed at it (``instant``: eosfix's waits
    take no time), the clients closed after; fails if the stand-in itself raised."""
    with hub:
        patch_huggingface_hub(monkeypatch, hub.url, home, hub if instant else None)
        try:
            yield hub
        finally:
            close_clients()
    assert not hub.server_errors, f"the stand-in hub raised: {hub.server_errors!r}"


def close_clients() -> None:
    """huggingface_hub's client and eosfix's: no pooled connection outlives its server."""
    import huggingface_hub

    from eosfix.sources.hub import client

    huggingface_hub.close_session()
    client.close()


# --- a GGUF publisher ---------------------------------------------------------------------------

GGUF_ORG = "my-gguf-org"
QUANT_TYPES = {"Q2_K": 10, "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q8_0": 7}
GIGABYTE = 10**9


def _written(path: Path) -> bytes:
    data = path.read_bytes()
    path.unlink()
    return data


def add_gguf_org(hub: FakeHub, folder: Path, author: str = GGUF_ORG) -> dict[str, FakeRepo]:
    """A GGUF publisher, its files written with gguf-py (tests/support/ggufs.py), each declared a
    few GB (only the header and a tensor are held):

    - ``Chat-7B-GGUF``: six quantisations of a Command-R-style model whose converter set eot
      to ``<|END_OF_TURN_TOKEN|>``, but ``Q2_K`` comes from an older conversion without it;
    - ``Reasoner-GGUF``: user-defined turn tokens (``<|turn_end|>`` ends a reply,
      ``<|think_end|>`` ends the reasoning inside it), no eot, and a ``params`` file whose
      stop list cuts at ``<|think_end|>``;
    - ``Chat-70B-GGUF``: a split Q4_K_M (three shards) and a Q8_0;
    - ``Broken-GGUF``: a file cut short inside its header, and one whose header claims 2**40
      tokens;
    - ``ChatML-GGUF``: a ChatML model every runtime stops on.
    """
    from tests.support import ggufs

    folder.mkdir(parents=True, exist_ok=True)
    cmd_ids = {"bos": "<BOS_TOKEN>", "eos": "<EOS_TOKEN>"}
    chat = {}
    for quant, ftype in QUANT_TYPES.items():
        ids = cmd_ids if quant == "Q2_K" else {**cmd_ids, "eot": "<|END_OF_TURN_TOKEN|>"}
        path = ggufs.write_gguf(
            folder / f"Chat-7B-{quant}.gguf", ggufs.COMMAND_R_SPECIALS, template=ggufs.COMMAND_R,
            ids=ids, kv={"general.file_type": ftype}, tensor=bytes(64),
        )  # fmt: skip
        chat[path.name] = _written(path)
    reasoner = {}
    for quant in ("Q4_K_M", "Q8_0"):
        path = ggufs.reasoning(
            folder / f"Reasoner-{quant}.gguf", {"eos": "<|endoftext|>"}, control=False,
            kv={"general.file_type": QUANT_TYPES[quant]}, tensor=bytes(64),
        )  # fmt: skip
        reasoner[path.name] = _written(path)
    params = '{\n  "stop": ["<|think_end|>"],\n  "temperature": 0.6\n}\n'
    split = {}
    first = ggufs.chatml(folder / "Chat-70B-Q4_K_M.gguf", shards=3, tensor=bytes(64))
    for n in range(1, 4):
        shard = first.with_name(f"Chat-70B-Q4_K_M-0000{n}-of-00003.gguf")
        split[shard.name] = _written(shard)
    one = ggufs.chatml(folder / "Chat-70B-Q8_0.gguf", tensor=bytes(64))
    split[one.name] = _written(one)
    whole = _written(ggufs.chatml(folder / "whole.gguf", tensor=bytes(64)))
    tokens = ggufs.kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 1 << 40))
    broken = {
        "Broken-Q4_K_M.gguf": whole[: len(whole) // 2],
        "Broken-Q8_0.gguf": ggufs.raw_gguf(ggufs.chatml_pairs(**{"tokenizer.ggml.tokens": tokens})),
    }
    chatml = {"ChatML-Q4_K_M.gguf": _written(ggufs.chatml(folder / "ChatML-Q4_K_M.gguf"))}
    repos = {}
    for name, files, extra, summary in (
        ("Chat-7B-GGUF", chat, {}, "Chat-7B-Q4_K_M.gguf"),
        ("Reasoner-GGUF", reasoner, {"params": params}, None),
        ("Chat-70B-GGUF", split, {}, "Chat-70B-Q8_0.gguf"),
        ("Broken-GGUF", broken, {}, "Broken-Q8_0.gguf"),
        ("ChatML-GGUF", chatml, {}, None),
    ):
        repo_id = f"{author}/{name}"
        sizes = {p: 4 * GIGABYTE for p in files if p != "Broken-Q4_K_M.gguf"}  # cut: its size
        repos[repo_id] = add_gguf_repo(
            hub, repo_id, files, files={"README.md": f"# {name}\n", **extra}, sizes=sizes,
            summary_of=summary,
        )  # fmt: skip
    return repos
