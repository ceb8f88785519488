"""The service (the page and the bot: one app) as a real server in a thread of the test process
(``Page``; ``Service`` adds the bot's webhook posts and waits until its queue is drained), a
client with a cookie jar, and ``eosfix serve`` as a process of its own (``serve_process``,
``wait_healthy``). Stdlib HTTP: the tests need no HTTP client package."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

from eosfix.serve.app import create_app
from eosfix.serve.config import ServeConfig
from eosfix.serve.limits import server
from tests.support.serve import SECRET


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
        self.jar = CookieJar()
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


def post(url: str, body: Any, secret: str | None = SECRET) -> Response:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Webhook-Secret"] = secret
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http("POST", f"{url}/webhook", data, headers)


class Response:
    """What the service answered (stdlib HTTP: the tests need no HTTP client package)."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def http(
    method: str,
    url: str,
    body: bytes | None = None,
    headers: dict | None = None,
    timeout: float = 30,
) -> Response:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return Response(reply.status, reply.read())
    except urllib.error.HTTPError as exc:
        return Response(exc.code, exc.read())


def bot_config(tmp_path: Path, **settings: Any) -> ServeConfig:
    """The bot as its tests run it: the webhook secret, the token ``hf_test``, policy ``pr``,
    its state in ``tmp_path / "state"``; ``settings`` add to or override these."""
    fields: dict[str, Any] = {
        "secret": SECRET,
        "token": "hf_test",
        "policy": "pr",
        "state_dir": tmp_path / "state",
    }
    return ServeConfig(**{**fields, **settings})


class Service(Page):
    """The bot as a real ASGI server in a thread of this process (the page's harness: the same
    app), its retry backoff instant (counted in metrics)."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self.bot = self.app.state.bot
        self.bot.sleep = lambda s: None

    def post(self, body: Any, secret: str | None = SECRET) -> Response:
        return post(self.url, body, secret)

    def drained(self, timeout: float = 120) -> dict[str, Any]:
        """Wait until nothing is queued or in flight; the metrics then."""
        deadline = time.monotonic() + timeout
        while True:
            health = http("GET", f"{self.url}/healthz").json()
            if health["queued"] == 0 and health["in_flight"] == 0 and not self.bot.running:
                return http("GET", f"{self.url}/metrics").json()
            assert time.monotonic() < deadline, f"queue not drained: {health}"
            time.sleep(0.02)


def one_worker_env(state: Path, token: str = "hf_test", **extra: str) -> dict[str, str]:
    """The environment of a bot process that opens PRs with one worker, its state in ``state``."""
    return {
        **os.environ,
        "EOSFIX_WEBHOOK_SECRET": SECRET,
        "HF_TOKEN": token,
        "EOSFIX_POLICY": "pr",
        "EOSFIX_WORKERS": "1",
        "EOSFIX_STATE_DIR": str(state),
        **extra,
    }


def serve_process(
    env: dict[str, str], port: int, log: Path, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """``eosfix serve`` as a process of its own; ``cwd``: run from another checkout (``-m``
    imports from the current folder before PYTHONPATH)."""
    with log.open("ab") as err:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "eosfix", "serve", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "the service exited"
        try:
            if http("GET", f"{url}/healthz").status_code == 200:
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the service did not start"
        time.sleep(0.05)
