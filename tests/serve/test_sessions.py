"""The page's sessions, held by the server: a cookie is an id the store gave out, a session ends
``MAX_AGE`` seconds after its last use, at most ``CAP`` are kept (the least recently used go
first), and an emptied session clears its cookie. The ASGI middleware driven directly, its
clock a number the test moves."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("starlette")

from eosfix.serve import sessions
from eosfix.serve.sessions import MAX_AGE, ServerSessions


class Visitor:
    """Requests through ``ServerSessions`` to an app that runs ``act(session)``; keeps the
    cookie it is given, as a browser does."""

    def __init__(self, middleware: ServerSessions) -> None:
        self.middleware = middleware
        self.cookie: str | None = None

    def request(self, act: Any = None) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        started: list[Any] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            seen.update(scope["session"])
            if act is not None:
                act(scope["session"])
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                started.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b""}

        self.middleware.app = app
        headers = [(b"cookie", f"session={self.cookie}".encode())] if self.cookie else []
        asyncio.run(self.middleware({"type": "http", "headers": headers}, receive, send))
        for name, value in started[0]["headers"]:
            if name == b"set-cookie":
                text = value.decode()
                self.cookie = None if "Max-Age=0" in text else text.split(";")[0].split("=")[1]
        return seen


@pytest.fixture
def now() -> list[float]:
    return [1000.0]


@pytest.fixture
def middleware(now) -> ServerSessions:
    return ServerSessions(None, https_only=False, same_site="lax", clock=lambda: now[0])  # type: ignore[arg-type]


def test_a_session_is_read_back_with_its_cookie_and_ends_after_max_age(middleware, now):
    visitor = Visitor(middleware)
    visitor.request(lambda s: s.update(user="alice"))
    assert visitor.cookie is not None
    assert "alice" not in visitor.cookie
    now[0] += MAX_AGE - 1
    assert visitor.request() == {"user": "alice"}  # used: its life starts again
    now[0] += MAX_AGE - 1
    assert visitor.request() == {"user": "alice"}
    now[0] += MAX_AGE + 1
    assert visitor.request() == {}
    assert not middleware.store


def test_an_id_the_store_never_gave_is_no_session(middleware):
    forged = Visitor(middleware)
    forged.cookie = "made-up-id"
    assert forged.request() == {}


def test_the_least_recently_used_session_goes_past_the_cap(middleware, now, monkeypatch):
    monkeypatch.setattr(sessions, "CAP", 3)
    visitors = [Visitor(middleware) for _ in range(4)]
    for i, visitor in enumerate(visitors[:3]):
        visitor.request(lambda s, i=i: s.update(n=i))
        now[0] += 1
    assert visitors[0].request() == {"n": 0}  # used again: now the most recent
    visitors[3].request(lambda s: s.update(n=3))
    assert len(middleware.store) == 3
    assert visitors[1].request() == {}  # the least recently used went
    assert visitors[0].request() == {"n": 0}


def test_an_emptied_session_clears_its_cookie(middleware):
    visitor = Visitor(middleware)
    visitor.request(lambda s: s.update(user="alice"))
    visitor.request(lambda s: s.clear())
    assert visitor.cookie is None
    assert not middleware.store
