"""The service's limits, for every route of the app (the webhook, health, metrics, and any page
added later): ``create_app`` puts a ``Guard`` on the app, and ``server`` serves the app with
it. Counts go to the bot's ``/metrics``.

- **Body**: a ``Content-Length`` over ``max_body`` is refused (413) before a byte of the body
  is read; a body without one (chunked) is counted as it arrives and refused once over. A
  response sent before the whole body was read closes the connection (nothing more of it is
  read). ``too_large`` counts them. A route that takes uploads (``Guard.uploads``: the page's
  dropped files) has its own bound instead.
- **Slow clients**: a request must arrive whole (head and body) within ``request_timeout``
  seconds of its connection opening, or of the previous response on it; otherwise the
  connection is closed (``timed_out``). A client sending a byte at a time gains nothing. An
  upload gets the time its body needs at ``UPLOAD_RATE`` more (the size it declares, else its
  route's bound): a 35 MB tokenizer.json comes through a slow link, a dripped one ends there.
- **Connections**: at most ``connection_cap`` open at once, under the open-file limit with
  room left for the bot's own files and Hub connections. One more closes the oldest
  connection still waiting for its request's bytes (a slow or idle client), or is itself
  closed when every one is being answered (``connections_closed``). A webhook sent whole
  gets through while hundreds of slow clients hang.
- **The page's checks** (``eosfix.serve.page``): a ``Limiter`` gives each client
  ``page_rate`` checks a minute (429 with ``Retry-After`` past it), and ``Slots`` runs at most
  ``page_workers`` checks at once, with at most 32 times that many waiting (503 past it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from eosfix.serve.config import ServeConfig, ServeConfigError
from eosfix.serve.headers import with_headers
from eosfix.sources.hub.bounds import SLOWEST_RATE
from eosfix.sources.hub.http import stop_every_gate

log = logging.getLogger("eosfix.serve.limits")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
T = TypeVar("T")


def connection_cap(config: ServeConfig) -> int:
    """``max_connections``, lowered to leave a quarter of the open-file limit (and at least
    64 descriptors) to the bot's journal, reads and Hub connections."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to mind
        return config.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return config.max_connections
    return max(1, min(config.max_connections, soft - max(64, soft // 4)))


UPLOAD_RATE = SLOWEST_RATE  # bytes a second an upload is given time for (the Hub reads' rate)


class Guard:
    """The limits of one app, and their counts; ``uploads``: the bound of each route (a
    POST to that path) that takes uploads, in place of ``max_body``."""

    def __init__(self, config: ServeConfig, counts: Counter[str]) -> None:
        self.max_body = config.max_body
        self.timeout = config.request_timeout
        self.cap = connection_cap(config)
        self.counts = counts
        self.uploads: dict[str, int] = {}

    def _upload(self, scope: Scope) -> int | None:
        if scope.get("method") == "POST":
            return self.uploads.get(scope.get("path", ""))
        return None

    def body_limit(self, scope: Scope) -> int:
        """The most bytes the request's body may hold."""
        upload = self._upload(scope)
        return self.max_body if upload is None else upload

    def upload_time(self, scope: Scope) -> float:
        """The seconds an upload's body gets beyond ``timeout`` (0: not an upload)."""
        limit = self._upload(scope)
        if limit is None:
            return 0.0
        declared = _declared_length(scope)
        return min(limit, declared if declared is not None else limit) / UPLOAD_RATE


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = with_headers(
        [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
    )
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int | None:
    """The request's Content-Length (h11 refused the request if it was not a number)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def _chunked(scope: Scope) -> bool:
    return any(name == b"transfer-encoding" for name, _ in scope.get("headers", ()))


class BoundedBody:
    """ASGI middleware: the body bound (see the module)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.guard.body_limit(scope)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            self.guard.counts["too_large"] += 1
            await _refuse(send, 413, f"body too large ({declared} bytes, limit {limit})")
            return
        state = {"read": 0, "whole": not declared and not _chunked(scope), "started": False}

        async def bounded() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                state["whole"] = not message.get("more_body", False)
                if state["read"] > limit:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
                if not state["whole"]:  # answered before the body was read: read no more
                    headers = [*message.get("headers", ()), (b"connection", b"close")]
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, bounded, watched)
        except _TooLarge:
            self.guard.counts["too_large"] += 1
            if not state["started"]:
                await _refuse(send, 413, f"body too large (over {limit} bytes)")
        except _Gone:  # the client went away (closed for being slow): no one to answer
            pass


def protocol_class(guard: Guard) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11) with the request deadline and the connection cap."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    waiting_states = (h11.IDLE, h11.SEND_BODY)  # the client owes us (the rest of) a request

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _since: float = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            live = [c for c in self.connections if not c.transport.is_closing()]
            if len(live) > guard.cap:
                self._make_room(live)

        def _arm(self) -> None:
            self._disarm()
            self._since = self.loop.time()
            self._deadline = self.loop.call_later(guard.timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _waiting(self) -> bool:
            return self.conn.their_state in waiting_states

        def _expire(self) -> None:
            self._deadline = None
            if self._waiting() and not self.transport.is_closing():
                guard.counts["timed_out"] += 1
                log.info("request timed out", extra={"fields": {"client": self.client}})
                self.transport.close()

        def _make_room(self, live: list[Any]) -> None:
            slow = [c for c in live if c is not self and c._waiting()]
            victim = min(slow, key=lambda c: c._since) if slow else self
            guard.counts["connections_closed"] += 1
            log.info("too many connections", extra={"fields": {"closed": victim.client}})
            victim.transport.close()

        _upload: bool = False  # the deadline of this request was given an upload's time

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self._waiting():  # the whole request is in: the app has it
                self._disarm()
                return
            scope = getattr(self, "scope", None)  # set once the request's head is in
            if scope is not None and not self._upload and self._deadline is not None:
                more = guard.upload_time(scope)
                if more > 0:
                    self._upload = True
                    left = guard.timeout - (self.loop.time() - self._since) + more
                    self._deadline.cancel()
                    self._deadline = self.loop.call_later(max(left, 0.0), self._expire)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._upload = False
            self._arm()  # the next request on this connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            """uvicorn's own answer to bytes that are no HTTP request (the app never sees
            them), with the headers every answer of the service carries."""
            plain = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
            events = (
                h11.Response(status_code=400, headers=with_headers(plain), reason=b"Bad Request"),
                h11.Data(data=msg.encode("ascii", "replace")),
                h11.EndOfMessage(),
            )
            for event in events:
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return Guarded


def loopback(host: str) -> bool:
    """Whether every address ``host`` names is this machine's loopback (127.0.0.0/8, ::1)."""
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).partition("%")[0] for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def server(app: Any, *, host: str, port: int, **options: Any) -> Any:
    """A uvicorn server for ``app`` (made by ``create_app``) with its guard's limits;
    ``options`` go to ``uvicorn.Config`` (``log_config``, ``log_level``). An app that must be
    reached from this machine only (``app.state.loopback_only`` says why: mocked sign-in) is
    refused any other address."""
    import uvicorn

    why = getattr(app.state, "loopback_only", None)
    if why and not loopback(host):
        raise ServeConfigError(f"{why} listens on the loopback only (--host 127.0.0.1), not {host}")
    guard: Guard = app.state.guard

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # The page's Hub requests (checks, audits) give up now, whatever they wait for,
            # so the connections they hold close and the shutdown goes on; the bot's work
            # gets its grace (the app's lifespan). Not under the signal: a gate's lock.
            keep = (app.state.bot.session.reader.http.gate,)
            threading.Thread(target=stop_every_gate, args=(keep,), daemon=True).start()

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(guard),
        ws="none",  # no WebSocket route: an upgrade request is plain HTTP
        timeout_graceful_shutdown=None,
        **options,
    )
    return Server(config)


class Busy(Exception):
    """Too many checks wait for a slot."""


class RateLimited(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after


class Limiter:
    """Per-client token buckets: ``rate`` checks a minute, a burst of ``rate``."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}

    def take(self, client: str) -> None:
        now = self.clock()
        tokens, since = self.buckets.get(client, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - since) * self.rate / 60.0)
        if tokens < 1.0:
            self.buckets[client] = (tokens, now)
            raise RateLimited(math.ceil((1.0 - tokens) * 60.0 / self.rate))
        self.buckets[client] = (tokens - 1.0, now)
        if len(self.buckets) > 10_000:  # forget the full buckets of clients long gone
            full = [k for k, (t, s) in self.buckets.items() if now - s > 60.0]
            for k in full:
                del self.buckets[k]


class Slots:
    """At most ``n`` checks at once; at most ``32 * n`` waiting, then ``Busy``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.semaphore = asyncio.Semaphore(n)
        self.waiting = 0

    async def run(self, work: Callable[[], T]) -> T:
        if self.waiting >= 32 * self.n:
            raise Busy
        self.waiting += 1
        try:
            await self.semaphore.acquire()
        finally:
            self.waiting -= 1
        try:
            return await run_in_threadpool(work)
        finally:
            self.semaphore.release()
