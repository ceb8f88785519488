"""What every answer of the service carries, whoever makes it: a strict Content-Security-Policy
(nothing but this origin's own scripts, styles and forms; no inline script or style; framed only
by the Hub), ``nosniff``, a same-origin referrer and ``no-store`` (a route may set its own
``Cache-Control``, as the page's static files do).

``SecurityHeaders`` wraps the whole application (``eosfix.serve.app.App``), outside
Starlette's error handler, the limits' middleware (``eosfix.serve.limits``) and the sign-in
session: a route's answer, a 404, 405 or redirect of the router, the webhook's 401, the limits'
413, a 500 raised anywhere all pass through it. uvicorn's own 400 for bytes that are not an
HTTP request never reaches the application: ``eosfix.serve.limits`` writes it with
``HEADERS`` too.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("eosfix.serve")

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'self' https://huggingface.co"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_RAW = [
    (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in HEADERS.items()
]


def with_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` (raw ASGI pairs) with each of ``HEADERS`` it does not set already."""
    present = {name.lower() for name, _ in headers}
    return [*headers, *((n, v) for n, v in _RAW if n not in present)]


class SecurityHeaders:
    """ASGI middleware: ``HEADERS`` on every HTTP answer of ``app``. An app that returns
    without answering a client still there gets a 500 that carries them too (where uvicorn
    would send its own bare one)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = {"started": False, "gone": False}

        async def watched_receive() -> Message:
            message = await receive()
            seen["gone"] = seen["gone"] or message["type"] == "http.disconnect"
            return message

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["started"] = True
                message = {**message, "headers": with_headers(list(message.get("headers", ())))}
            await send(message)

        await self.app(scope, watched_receive, send_with_headers)
        if not seen["started"] and not seen["gone"]:
            log.error("no answer from the application", extra={"fields": {"path": scope["path"]}})
            start = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
            await send_with_headers(
                {"type": "http.response.start", "status": 500, "headers": start}
            )
            await send({"type": "http.response.body", "body": b"Internal Server Error"})
