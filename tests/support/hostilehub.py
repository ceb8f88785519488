"""A hostile Hub and CDN for tests: the stand-in Hub (``tests.support.hubserver``) with answers of
its own, switched on per route.

``HostileHub.on(match, act)`` answers every request whose raw path matches the regex
``match`` (and whose query string contains ``query``, at most ``times`` of them) with ``act``
instead of the Hub's route; other requests are the stand-in Hub's. Acts, each a function of
the request's handler:

- ``stream(size, declare=...)``: a body of ``size`` bytes, written a MiB at a time, with a
  true ``Content-Length``, a lying one (``declare=N``) or none (the body ends when the
  connection closes); ``gzip=True`` sends it compressed (a few kB standing for ``size``);
- ``drip(body, every)``: the head at once, then the body a byte every ``every`` seconds;
  ``drip_head(every)``: a head that never ends, a byte at a time;
- ``redirect(location, size)``: a 302 with a body of ``size`` bytes;
- ``answer(status, body, headers)``: any answer (a 429 with ``Retry-After``, a listing page
  of ids the Hub never gives...);
- ``with_headers(headers)``: the Hub's own answer with these headers added (``Set-Cookie``,
  ``Link``, ``RateLimit``).

``hub.sent[rule]`` counts the body bytes the server wrote for a rule before the client stopped
reading (how much a client read, from the server's side); every request is in
``request_log`` as usual. Everything stops when the hub stops.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.hubserver import FakeHub, serving

MiB = 1024 * 1024
Act = Callable[[Any, "HostileHub"], bool]


@dataclass
class Rule:
    name: str
    match: re.Pattern[str]
    act: Act
    query: str | None = None
    times: int | None = None
    hits: int = 0
    done: threading.Event = field(default_factory=threading.Event)  # a request ended


class HostileHub(FakeHub):
    def __init__(self, token: str | None = None) -> None:
        super().__init__(token)
        self.rules: list[Rule] = []
        self.sent: Counter[str] = Counter()

    def on(
        self,
        match: str,
        act: Act,
        *,
        query: str | None = None,
        times: int | None = None,
        name: str | None = None,
    ) -> Rule:
        rule = Rule(name or match, re.compile(match), act, query, times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def hits(self, match: str) -> int:
        """Requests whose raw path matches ``match`` (the Hub's routes and the rules')."""
        pattern = re.compile(match)
        return sum(1 for r in self.request_log if pattern.search(r.path))

    def intercept(self, handler: Any, method: str, raw_path: str) -> bool:
        query = handler.path.partition("?")[2]
        with self._lock:
            rule = next(
                (
                    r
                    for r in self.rules
                    if r.match.search(raw_path)
                    and (r.query is None or r.query in query)
                    and (r.times is None or r.hits < r.times)
                ),
                None,
            )
            if rule is None:
                return False
            rule.hits += 1
        try:
            handler.rule = rule
            return rule.act(handler, self)
        finally:
            rule.done.set()


# --- acts -------------------------------------------------------------------------------------


def _head(handler: Any, status: int, headers: dict[str, str]) -> None:
    handler.record.status = status
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.flush()


def _write(handler: Any, hub: HostileHub, chunks: Iterator[bytes], every: float = 0.0) -> None:
    """Write the body until it ends, the client goes away or the hub stops; counted."""
    try:
        for chunk in chunks:
            if hub._stopping.is_set():
                break
            handler.wfile.write(chunk)
            handler.wfile.flush()
            hub.sent[handler.rule.name] += len(chunk)
            if every:
                hub._stopping.wait(every)
    except OSError:  # the client stopped reading
        pass
    handler.close_connection = True


def _filler(size: int, byte: bytes = b" ") -> Iterator[bytes]:
    block = byte * MiB
    left = size
    while left > 0:
        yield block[: min(left, MiB)]
        left -= MiB


def _gzipped(size: int) -> Iterator[bytes]:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    for block in _filler(size, b"\0"):
        out = packer.compress(block)
        if out:
            yield out
    yield packer.flush()


def stream(
    size: int, *, declare: int | str | None = "true", gzip: bool = False, status: int = 200
) -> Act:
    """``size`` bytes of body; ``declare``: "true" (its length), an int (a lying length) or
    None (no length: the body ends when the connection closes)."""

    def act(handler: Any, hub: HostileHub) -> bool:
        headers = {"Content-Type": "application/octet-stream", "ETag": '"' + "0" * 40 + '"'}
        if gzip:
            headers["Content-Encoding"] = "gzip"
            chunks: Iterator[bytes] = _gzipped(size)
        else:
            chunks = _filler(size)
        if declare == "true" and not gzip:
            headers["Content-Length"] = str(size)
        elif isinstance(declare, int):
            headers["Content-Length"] = str(declare)
        else:
            headers["Connection"] = "close"
        _head(handler, status, headers)
        _write(handler, hub, chunks)
        return True

    return act


def drip(body: bytes, every: float, headers: dict[str, str] | None = None) -> Act:
    """The head at once (with the body's true length), then a byte every ``every`` s."""

    def act(handler: Any, hub: HostileHub) -> bool:
        _head(handler, 200, {"Content-Length": str(len(body)), **(headers or {})})
        _write(handler, hub, (body[i : i + 1] for i in range(len(body))), every)
        return True

    return act


def drip_head(every: float) -> Act:
    """A status line, then a header that never ends, a byte every ``every`` s (no per-read
    timeout ever fires)."""

    def act(handler: Any, hub: HostileHub) -> bool:
        handler.record.status = 200
        try:
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            handler.wfile.flush()
        except OSError:
            return True
        _write(handler, hub, iter(lambda: b"a", None), every)
        return True

    return act


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Act:
    """One whole answer: ``body`` as JSON (bytes as they are)."""

    def act(handler: Any, hub: HostileHub) -> bool:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        extra = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        _head(handler, status, {**extra, **(headers or {})})
        _write(handler, hub, iter([data]))
        return True

    return act


def redirect(location: str, size: int = 0) -> Act:
    """A 302 to ``location`` whose body (``size`` bytes, to the end of the connection) no
    client needs."""

    def act(handler: Any, hub: HostileHub) -> bool:
        _head(handler, 302, {"Location": location, "Connection": "close"})
        _write(handler, hub, _filler(size))
        return True

    return act


def with_headers(headers: dict[str, str] | Callable[[Any], dict[str, str]]) -> Act:
    """The Hub's own answer, with ``headers`` added (a function of the handler: computed
    per request)."""

    def act(handler: Any, hub: HostileHub) -> bool:
        handler.extra_headers.update(headers(handler) if callable(headers) else headers)
        return False

    return act


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def hostile_hub(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HostileHub]:
    """A started HostileHub, huggingface_hub and eosfix pointed at it as ``fake_hub`` does
    (eosfix's waits take no time: its clock jumps); ``{"real_waits": True}`` (indirect
    parametrization) keeps eosfix's own clock, ``{"token": ...}`` requires that token."""
    params = getattr(request, "param", None) or {}
    hub = HostileHub(token=params.get("token"))
    instant = not params.get("real_waits")
    with serving(hub, monkeypatch, tmp_path / "hf_home", instant=instant):
        yield hub
