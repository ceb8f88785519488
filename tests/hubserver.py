"""A local stand-in for the Hugging Face Hub HTTP API, for tests.

`FakeHub` is a stdlib `ThreadingHTTPServer` bound to 127.0.0.1 on a free port and run in a
daemon thread. It serves the routes that the *real* `huggingface_hub` client (2.4.0, httpx2)
uses for reading model repos, downloading files, opening pull requests through
`HfApi.create_commit(create_pr=True)` and listing/reading discussions, so the client is
exercised end to end without any network access.

Use the `fake_hub` fixture (pyproject sets `pythonpath = ["."]`, so `tests.hubserver` is
importable; register it in `tests/conftest.py` with `pytest_plugins = ["tests.hubserver"]` or
`from tests.hubserver import fake_hub`)::

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
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import hashlib
import json
import math
import re
import socket
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
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


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
        self._quotas: dict[str, _Quota] = {}
        self._count_quotas: dict[str, _CountQuota] = {}
        self._holds: list[Hold] = []
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
        `RateLimit-Policy`); a request over the quota gets 429 with `Retry-After: <reset>`."""
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

    def _repo_json(self, repo: FakeRepo, sha: str, *, full: bool = True) -> dict[str, Any]:
        commit = repo.commit_objects[sha]
        data: dict[str, Any] = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.author,
            "private": repo.private,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "library_name": "transformers",
            "createdAt": repo.created_at,
        }
        if full:
            blobs = self._flag("blobs")
            data.update(
                {
                    "sha": sha,
                    "lastModified": commit.date,
                    "siblings": [
                        {"rfilename": p, "size": len(d), "blobId": git_sha1(d)}
                        if blobs
                        else {"rfilename": p}
                        for p, d in sorted(commit.files.items())
                    ],
                    "spaces": [],
                    "usedStorage": sum(len(d) for d in commit.files.values()),
                }
            )
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            keep = set(expand) | {"_id", "id"}
            data = {k: v for k, v in data.items() if k in keep}
        return data

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
        author = (self.query.get("author") or [None])[-1]
        search = (self.query.get("search") or [None])[-1]
        full = self._flag("full") or bool(self.query.get("expand"))
        models = []
        for repo in sorted(self.hub.repos.values(), key=lambda r: r.repo_id):
            repo._sync()
            if repo.private and self.hub.token is not None and not authed:
                continue
            if author and repo.author != author:
                continue
            if search and search.lower() not in repo.repo_id.lower():
                continue
            models.append(self._repo_json(repo, repo.head, full=full))
        limit = (self.query.get("limit") or [None])[-1]
        if limit is not None:
            models = models[: int(limit)]
        self._paginated(models)

    def _paginated(self, items: list[Any]) -> None:
        size = max(1, self.hub.page_size)
        cursor = int((self.query.get("cursor") or ["0"])[-1])
        page = items[cursor : cursor + size]
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
            entries.append({"type": "file", "path": p, "size": len(data), "oid": git_sha1(data)})
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
        headers: dict[str, str | None] = {
            "X-Repo-Commit": sha,
            "ETag": f'"{git_sha1(data)}"',
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{Path(path).name}"',
        }
        status = 200
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if m and self.command == "GET":
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else len(data) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data = data[start : end + 1]
            status = 206
        self._send(status, data, content_type="application/octet-stream", headers=headers)

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
    import huggingface_hub

    params = getattr(request, "param", None) or {}
    hub = FakeHub(token=params.get("token"))
    with hub:
        patch_huggingface_hub(monkeypatch, hub.url, tmp_path / "hf_home", hub)
        try:
            yield hub
        finally:
            huggingface_hub.close_session()
    assert not hub.server_errors, f"fake hub raised: {hub.server_errors!r}"
