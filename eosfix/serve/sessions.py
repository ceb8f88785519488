"""The page's sign-in sessions, kept in this process: the cookie holds an opaque random id and
nothing else, so no token (a visitor's own, or in mock sign-in the server's ``HF_TOKEN``)
ever travels in a cookie, and no cookie can be forged into a session (there is no signing key
to know or guess: an id the store does not hold is no session).

``ServerSessions`` replaces the cookie-carried session that huggingface_hub's
``attach_huggingface_oauth`` installs (``keep_sessions_here``); ``request.session`` works as
before. A session lives ``MAX_AGE`` seconds from its last use (a Hub OAuth token's lifetime);
at most ``CAP`` are kept, the least recently used dropped first. A restart signs everyone out.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "session"
MAX_AGE = 8 * 60 * 60
CAP = 10_000


class ServerSessions:
    """ASGI middleware: ``scope["session"]``, a dict held here under the cookie's id."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        https_only: bool,
        same_site: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.flags = f"; Path=/; HttpOnly; SameSite={same_site}" + (
            "; Secure" if https_only else ""
        )
        self.clock = clock
        self.store: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()

    def _held(self, sid: str | None) -> dict[str, Any] | None:
        kept = self.store.get(sid) if sid else None
        if kept is None or sid is None:
            return None
        if kept[1] < self.clock():
            del self.store[sid]
            return None
        return kept[0]

    def _keep(self, sid: str, session: dict[str, Any]) -> None:
        self.store[sid] = (session, self.clock() + MAX_AGE)
        self.store.move_to_end(sid)
        while len(self.store) > CAP:
            self.store.popitem(last=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sid = _cookie(scope)
        held = self._held(sid)
        session: dict[str, Any] = held if held is not None else {}
        scope["session"] = session

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = self._answer(sid if held is not None else None, session)
                if cookie is not None:
                    headers = [*message.get("headers", ()), (b"set-cookie", cookie.encode())]
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _answer(self, sid: str | None, session: dict[str, Any]) -> str | None:
        """The Set-Cookie value for a session after a request: kept (a new id for a new
        session), or cleared once emptied (signed out); None when there is nothing to say."""
        if session:
            sid = sid or secrets.token_urlsafe(32)
            self._keep(sid, session)
            return f"{COOKIE}={sid}{self.flags}; Max-Age={MAX_AGE}"
        if sid is not None:
            self.store.pop(sid, None)
            return f"{COOKIE}=null{self.flags}; Max-Age=0"
        return None


def _cookie(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            found = cookie_parser(value.decode("latin-1")).get(COOKIE)
            if found:
                return found
    return None


def keep_sessions_here(
    user_middleware: list[Middleware], *, https_only: bool, same_site: str
) -> bool:
    """Put ``ServerSessions`` where huggingface_hub's sign-in put Starlette's cookie session;
    False when there is none to replace."""
    for i, m in enumerate(user_middleware):
        if getattr(m.cls, "__name__", "") == "SessionMiddleware":
            user_middleware[i] = Middleware(
                ServerSessions, https_only=https_only, same_site=same_site
            )
            return True
    return False
