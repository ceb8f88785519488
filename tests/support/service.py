"""The service (the page and the bot: one app) as a real server in a thread of the test process,
and a client with a cookie jar (stdlib HTTP: the tests need no HTTP client package). The bot's
tests add their webhook helpers to it (``tests.serve.test_bot.Service``)."""

from __future__ import annotations

import http.cookiejar
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from eosfix.serve.app import create_app
from eosfix.serve.config import ServeConfig
from eosfix.serve.limits import server


@dataclass
class Reply:
    status: int
    body: bytes
    headers: Any

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Page:
    """``create_app(config)`` served on 127.0.0.1; ``client()`` makes a browser-like client."""

    def __init__(self, config: ServeConfig, host: str = "127.0.0.1") -> None:
        self.app = create_app(config)
        port = free_port()
        self.url = f"http://{host}:{port}"
        self.server = server(self.app, host="127.0.0.1", port=port, log_level="warning")
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Page:  # noqa: PYI034 - Python 3.10 has no typing.Self
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the page did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def client(self, follow: bool = True) -> Client:
        return Client(self.url, follow)


class Client:
    def __init__(self, base: str, follow: bool = True) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        handlers: list[Any] = [urllib.request.HTTPCookieProcessor(self.jar)]
        if not follow:
            handlers.append(_NoRedirect())
        self.opener = urllib.request.build_opener(*handlers)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None
    ) -> Reply:
        req = urllib.request.Request(
            self.base + path, data=body, method=method, headers=headers or {}
        )
        try:
            with self.opener.open(req, timeout=60) as r:
                return Reply(r.status, r.read(), r.headers)
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), exc.headers)

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def check(self, repo: str) -> Reply:
        return self.get("/check?" + urllib.parse.urlencode({"repo": repo}))

    def post_form(self, path: str, fields: dict[str, str]) -> Reply:
        body = urllib.parse.urlencode(fields).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return self.request("POST", path, body, headers)

    def post_files(self, files: dict[str, bytes]) -> Reply:
        boundary = uuid.uuid4().hex
        parts = []
        for name, data in files.items():
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
                + data
                + b"\r\n"
            )
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        return self.request("POST", "/check/files", body, headers)

    def sign_in(self) -> None:
        reply = self.get("/oauth/huggingface/login")
        assert reply.status == 200, reply.status

    def csrf(self, page: str) -> str:
        match = re.search(r'name="csrf" value="([^"]+)"', page)
        assert match, "no CSRF field on the page"
        return match.group(1)
