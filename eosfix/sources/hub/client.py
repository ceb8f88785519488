"""One request to the Hub, bounded: in bytes, in time, in where it goes, and interruptible.
One module: the socket layer's limits and the request that sets them are one mechanism.

``fetch`` sends one request and reads its answer under the limits of
``eosfix.sources.hub.bounds``:

- **bytes**: an answer over its cap is refused on its ``Content-Length`` before a byte of
  its body is read, and while it streams (no length given, or compressed: a gzip body is
  inflated a bounded step at a time) the moment it goes over; a redirect's body is never
  read. A file goes to a sink (a temporary file of the store) as it comes, never whole in
  memory;
- **time**: the head must come within the request's timeout, and the whole answer by its
  deadline (the timeout plus the time its declared size, else its cap, needs at
  ``SLOWEST_RATE``): every socket read and write waits at most what is left, so a body dripped
  a byte at a time ends there. Waits are cut into short slices that look at the request's
  ``aborting`` event, so a shutdown (a second Ctrl-C, SIGTERM) ends a request blocked on a
  silent server within a quarter of a second;
- **where**: redirects are followed here, at most MAX_REDIRECTS; the token goes only to the
  configured Hub's origin (``HF_ENDPOINT``), never to a CDN or any other host.

Requests share one process-wide connection pool, and no cookie is ever kept: an answer's
``Set-Cookie`` is refused, so nothing one identity was given (a signed-in user's session on
the page, the bot's token) goes out with another's requests. huggingface_hub's own shared
client (``HfApi``: pull requests, discussions) is made to keep none either where identities
share a process (``keep_no_cookies``, from ``eosfix.targets.session.HubSession``).

The time limits live in the socket layer (an httpcore network backend whose streams read the
current request's ``Limit``, a context variable set around each request), because httpx's
timeouts apply to each read, not to a request.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import IO, Any
from urllib.parse import urlsplit

import httpcore2
import httpx2
from huggingface_hub import constants, get_session
from huggingface_hub.errors import OfflineModeIsEnabled

from eosfix.sources.hub.bounds import (
    DEFAULT_DEADLINE,
    ERROR_BODY,
    MAX_REDIRECTS,
    SLOT_LEASE,
    SLOWEST_RATE,
    Cap,
)

SLICE = 0.25  # seconds: how often a blocked read looks at its aborting event


class Stopped(Exception):
    """The batch (or the server) is ending: a request that waits gives up."""


class TooLarge(Exception):
    """An answer over its cap: not read further, not kept, not retried. ``name``: the file,
    when the caller knows which (the message starts with it)."""

    def __init__(self, url: str, cap: Cap, size: int, declared: bool) -> None:
        super().__init__(url, cap, size, declared)
        self.url, self.cap, self.size, self.declared = url, cap, size, declared
        self.name: str | None = None

    def __str__(self) -> str:
        said = f"{self.size:,} bytes" if self.declared else "more bytes than that"
        where = f"{self.name}: " if self.name else ""
        return f"{where}larger than the {self.cap} eosfix reads ({said}): not downloaded"


class TooSlow(Exception):
    """The answer's head came, but its body did not come whole by the deadline: not
    retried (a server that slow would be as slow again)."""

    def __init__(self, url: str, seconds: float) -> None:
        self.url, self.seconds = url, seconds
        super().__init__(f"the answer took over {seconds:.0f} s to come whole: {url}")


class BadEncoding(Exception):
    """A body compressed in a way eosfix did not ask for."""

    def __init__(self, url: str, encoding: str) -> None:
        self.url, self.encoding = url, encoding
        super().__init__(f"the answer is compressed as {encoding!r}, which eosfix did not ask for")


class _Overdue(Exception):
    """The request's deadline passed during a socket read or write (raised by the stream)."""


@dataclass
class Limit:
    """The current request's deadline (``time.monotonic``) and what stops it; ``on_lease``
    is called once (in the request's thread) if it is still waiting on the network at
    ``lease``."""

    deadline: float
    aborting: threading.Event
    lease: float = math.inf
    on_lease: Callable[[], None] | None = None

    def waiting(self, now: float) -> None:
        """The request waits on the network at ``now``."""
        if self.on_lease is not None and now >= self.lease:
            call, self.on_lease = self.on_lease, None
            call()


_LIMIT: contextvars.ContextVar[Limit | None] = contextvars.ContextVar("eosfix_hub_limit")


class _Stream(httpcore2.NetworkStream):
    """A socket whose every read and write ends by the current request's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        limit = _LIMIT.get(None)
        if limit is None:
            return self._inner.read(max_bytes, timeout)
        until = limit.deadline if timeout is None else min(limit.deadline, _now() + timeout)
        while True:
            if limit.aborting.is_set():
                raise Stopped
            now = _now()
            limit.waiting(now)
            left = until - now
            if left <= 0:
                if until >= limit.deadline:
                    raise _Overdue
                raise httpcore2.ReadTimeout("timed out")
            try:
                return self._inner.read(max_bytes, min(SLICE, left))
            except httpcore2.ReadTimeout:
                continue  # nothing came in this slice (nothing was consumed): look again

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _bounded(timeout), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _bounded(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _now() -> float:
    return time.monotonic()


def _bounded(timeout: float | None) -> float | None:
    """``timeout``, but no later than the current request's deadline (a write or a connect
    is not cut into slices: a half-sent request cannot be taken up again)."""
    limit = _LIMIT.get(None)
    if limit is None:
        return timeout
    if limit.aborting.is_set():
        raise Stopped
    left = limit.deadline - _now()
    if left <= 0:
        raise _Overdue
    return left if timeout is None else min(timeout, left)


# --- the process's client --------------------------------------------------------------------


class _NoCookies(DefaultCookiePolicy):
    """Refuses every cookie an answer sets, so none is ever sent."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


def _jar() -> CookieJar:
    return CookieJar(policy=_NoCookies())


_client: httpx2.Client | None = None
_client_lock = threading.Lock()


def _shared() -> httpx2.Client:
    """The process's client: env proxies and CA bundles as httpx reads them, its sockets
    bounded by each request's ``Limit``, no cookie kept."""
    global _client
    with _client_lock:
        if _client is None:
            client = httpx2.Client(
                follow_redirects=False,
                cookies=_jar(),
                timeout=None,  # the request's Limit bounds every socket wait instead
                headers={"Accept-Encoding": "gzip, deflate"},  # what _read can bound
            )
            transports = [client._transport, *client._mounts.values()]
            for transport in transports:
                # httpx builds its pools without a way to give them a network backend
                pool = getattr(transport, "_pool", None)
                if pool is not None:
                    pool._network_backend = _Backend(pool._network_backend)
            _client = client
        return _client


def close() -> None:
    """Close the process's client and its pooled connections (the next request opens a new
    one); also at exit."""
    global _client
    with _client_lock:
        client, _client = _client, None
    if client is not None:
        client.close()


atexit.register(close)


def keep_no_cookies() -> None:
    """huggingface_hub's shared client (the one ``HfApi`` sends with: pull requests,
    discussions) keeps no cookie from now on either."""
    session = get_session()
    if not isinstance(getattr(session.cookies.jar, "_policy", None), _NoCookies):
        # the jar itself: httpx2 2.0 copies a Cookies given here into a jar of its own
        session.cookies = _jar()


def hub_origin() -> str:
    return origin(str(constants.ENDPOINT))


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


# --- one request --------------------------------------------------------------------------------


@contextlib.contextmanager
def limited(limit: Limit) -> Iterator[Limit]:
    """Every socket read and write of this thread's request obeys ``limit`` meanwhile."""
    token = _LIMIT.set(limit)
    try:
        yield limit
    finally:
        _LIMIT.reset(token)


def fetch(
    method: str,
    url: str,
    *,
    params: list[tuple[str, Any]] | None,
    data: Mapping[str, Any] | None,
    headers: Mapping[str, str],
    cap: Cap,
    timeout: float | None,
    aborting: threading.Event,
    sink: IO[bytes] | None = None,
    truncate: bool = False,
    on_lease: Callable[[], None] | None = None,
) -> httpx2.Response:
    """One request, its answer read under ``cap`` (see the module); redirects followed.

    The answer comes back whole (``content``), except a successful body given to ``sink``
    (then ``content`` is empty). ``truncate``: a body over the cap is cut there instead of
    refused (a byte range from a server that ignored the range). The head must come within
    ``timeout`` seconds (else ``httpx2.ReadTimeout``, a timeout like any); the rest by the
    deadline (else ``TooSlow``). ``on_lease``: called once if the request still waits on the
    network ``SLOT_LEASE`` seconds after it began. Raises ``TooLarge``, ``BadEncoding``,
    ``Stopped``, and httpx's transport errors."""
    if constants.is_offline_mode():
        raise OfflineModeIsEnabled(f"Cannot reach {url}: offline mode is enabled (HF_HUB_OFFLINE)")
    client = _shared()
    started = _now()
    head_by = started + (timeout if timeout is not None else DEFAULT_DEADLINE)
    limit = Limit(head_by, aborting, started + SLOT_LEASE, on_lease)
    request = client.build_request(method, url, params=params, data=data, headers=headers)
    _scope_token(request)
    history: list[httpx2.Response] = []
    with limited(limit):
        while True:
            response = _send(client, request)
            if not response.has_redirect_location or len(history) >= MAX_REDIRECTS:
                break
            follow = response.next_request
            response.close()  # a redirect's body is never read
            history.append(_head_only(response))
            if follow is None:
                raise httpx2.RemoteProtocolError(
                    "a redirect without a usable Location", request=request
                )
            request = follow
            _scope_token(request)
        if response.has_redirect_location:
            response.close()
            raise httpx2.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)
        ok = response.status_code < 300
        body_cap = cap if ok else ERROR_BODY
        declared = _length(response)
        expected = body_cap.bytes if declared is None else min(declared, body_cap.bytes)
        limit.deadline = head_by + expected / SLOWEST_RATE
        try:
            content = _read(
                response, body_cap, declared, sink if ok else None, truncate or not ok, url
            )
        except _Overdue:
            raise TooSlow(url, limit.deadline - started) from None
        finally:
            response.close()
    headers_out = [
        (k, v) for k, v in response.headers.multi_items() if k.lower() != "content-encoding"
    ]
    return httpx2.Response(
        response.status_code,
        headers=headers_out,
        content=content,
        request=request,
        history=history,
    )


def _send(client: httpx2.Client, request: httpx2.Request) -> httpx2.Response:
    """The request sent and its head read (the body is left on the wire)."""
    try:
        return client.send(request, stream=True, follow_redirects=False)
    except _Overdue:
        raise httpx2.ReadTimeout("timed out", request=request) from None


def _scope_token(request: httpx2.Request) -> None:
    """The token goes to the configured Hub only (a CDN's signed URL needs none)."""
    if origin(str(request.url)) != hub_origin():
        request.headers.pop("authorization", None)
    request.headers.pop("cookie", None)


def _head_only(response: httpx2.Response) -> httpx2.Response:
    return httpx2.Response(
        response.status_code, headers=response.headers.multi_items(), request=response.request
    )


def _length(response: httpx2.Response) -> int | None:
    value = response.headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None


def _read(
    response: httpx2.Response,
    cap: Cap,
    declared: int | None,
    sink: IO[bytes] | None,
    truncate: bool,
    url: str,
) -> bytes:
    """The body, at most ``cap.bytes`` of it (decoded), into ``sink`` or returned."""
    if declared is not None and declared > cap.bytes and not truncate:
        raise TooLarge(url, cap, declared, declared=True)
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    chunks: Iterator[bytes] = response.iter_raw()
    if encoding in ("gzip", "x-gzip", "deflate"):
        chunks = _inflate(chunks, cap.bytes + 1, 31 if "gzip" in encoding else 15)
    elif encoding not in ("identity", ""):
        raise BadEncoding(url, encoding)
    parts: list[bytes] = []
    got = 0
    for chunk in chunks:
        room = cap.bytes - got
        if len(chunk) > room:
            if not truncate:
                raise TooLarge(url, cap, got + len(chunk), declared=False)
            chunk = chunk[:room]
        got += len(chunk)
        if sink is not None:
            sink.write(chunk)
        else:
            parts.append(chunk)
        if got >= cap.bytes and truncate:
            break
    return b"".join(parts)


def _inflate(chunks: Iterator[bytes], most: int, wbits: int) -> Iterator[bytes]:
    """A compressed body inflated a bounded step at a time: never more than ``most`` bytes in
    all (a few kB of gzip can stand for gigabytes)."""
    inflater = zlib.decompressobj(wbits)
    made = 0
    try:
        for raw in chunks:
            pending = raw
            while pending and made < most:
                out = inflater.decompress(pending, most - made)
                made += len(out)
                pending = inflater.unconsumed_tail
                if out:
                    yield out
            if made >= most:
                return
        tail = inflater.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise httpx2.DecodingError(f"the answer's compressed body is broken: {exc}") from None
