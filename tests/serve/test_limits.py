"""Slow and many clients: a request must arrive whole within ``request_timeout`` of its
connection (or of the previous answer on it), and at most ``max_connections`` are open at
once, the oldest slow one closed for a new one. Both are the server's, for every route of the
app. And the log: one JSON object per line, whatever the message, and rate-limited."""

from __future__ import annotations

import io
import json
import logging
import socket
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from eosfix.serve.config import ServeConfig
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import SECRET, payload
from tests.support.service import Service, bot_config, http


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` (reading gives EOF or a reset) within ``within``."""
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


@pytest.fixture
def strict(fake_hub, tmp_path):
    with Service(bot_config(tmp_path, request_timeout=1.0, max_connections=8)) as s:
        yield s


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connected, says nothing
        b"POST /webhook HTTP/1.1\r\nHost: x\r\n",  # headers never end
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Webhook-Secret: "
        + SECRET.encode()
        + b'\r\nContent-Length: 1000\r\n\r\n{"event":',  # the body never ends
    ],
    ids=["silent", "slow-headers", "slow-body"],
)
def test_a_slow_request_is_timed_out(strict, partial):
    with _connect(strict.url) as sock:
        sock.sendall(partial)
        start = time.monotonic()
        assert _closed_by_server(sock, within=20)
        assert time.monotonic() - start >= 0.5  # the timeout, not an immediate refusal
    metrics = strict.drained()
    assert metrics["timed_out"] >= 1
    assert metrics.get("accepted", 0) == 0


def test_a_slow_client_dribbling_bytes_is_still_timed_out(strict):
    """A byte every 0.2 s keeps no connection alive past the deadline."""
    with _connect(strict.url) as sock:
        start = time.monotonic()
        closed = False
        for byte in b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 200:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.2)
            if time.monotonic() - start > 10:
                break
        assert closed or _closed_by_server(sock, within=5)
        assert time.monotonic() - start < 10


def test_connections_are_capped_and_a_webhook_still_gets_through(fake_hub, strict):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    idle = [_connect(strict.url) for _ in range(30)]
    try:
        for sock in idle:
            sock.sendall(b"POST /webhook HTTP/1.1\r\n")
        time.sleep(0.2)
        assert len(strict.server.server_state.connections) <= 8
        response = strict.post(payload("org/broken", repo.head))  # while the slow ones hang
        assert response.status_code == 202
        assert http("GET", f"{strict.url}/healthz").status_code == 200
    finally:
        for sock in idle:
            sock.close()
    metrics = strict.drained()
    assert metrics["connections_closed"] >= 22
    assert metrics["outcome_pr_opened"] == 1


def test_the_cap_stays_under_the_open_file_limit(tmp_path):
    from eosfix.serve.limits import connection_cap

    config = ServeConfig(secret=SECRET, state_dir=tmp_path, max_connections=100_000)
    cap = connection_cap(config)
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert cap < soft


# --- the log ----------------------------------------------------------------------------------


def _handler(**limits: float) -> tuple[logging.Logger, io.StringIO]:
    from eosfix.serve.logs import json_handler

    out = io.StringIO()
    logger = logging.getLogger(f"eosfix.test.{time.monotonic_ns()}")
    logger.handlers = [json_handler(out, **limits)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, out


def test_every_event_is_one_json_line():
    logger, out = _handler()
    logger.warning("two\nlines %s", "and\r\nmore")
    try:
        raise ValueError("a\nmultiline error")
    except ValueError:
        logger.exception("crashed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["message"] == "two\nlines and\r\nmore"
    assert "ValueError: a\nmultiline error" in second["exception"]


def test_a_flood_of_one_message_is_cut_and_counted():
    """10,000 "Too many open files" errors in a burst: about ``burst`` lines, then one line
    saying how many were left out; other messages are not cut."""
    logger, out = _handler(burst=20, rate=5.0)
    start = time.monotonic()
    for _ in range(10_000):
        logger.error("socket.accept() out of system resource")
    took = time.monotonic() - start
    logger.info("something else")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    passed = sum(line["message"].startswith("socket.accept") for line in lines)
    assert 20 <= passed <= 20 + 5.0 * took + 1
    assert lines[-1]["message"] == "something else"
    time.sleep(0.3)
    logger.error("socket.accept() out of system resource")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[-1]["suppressed"] > 0
    # every line left out is counted once, on the next line of its kind that passed
    assert sum(line.get("suppressed", 0) for line in lines) == 10_000 - passed


def test_an_upload_gets_the_time_its_body_needs(strict, monkeypatch):
    """The page's dropped files (a 35 MB tokenizer.json over a slow link) get the time their
    declared size needs at ``UPLOAD_RATE`` beyond ``request_timeout``: a form still arriving
    after the request timeout is answered, not cut."""
    import uuid

    from eosfix.serve import limits

    monkeypatch.setattr(limits, "UPLOAD_RATE", 1000)  # bytes a second: 4 s for 4,000 bytes
    boundary = uuid.uuid4().hex
    files = {k: v for k, v in repo_files(BROKEN).items() if "/" not in k}
    body = (
        b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n"
            for name, data in files.items()
        )
        + f"--{boundary}--\r\n".encode()
    )
    body += b"\r\n" * max(0, (4000 - len(body)) // 2)  # an epilogue: 4,000 bytes in all
    head = (
        f"POST /check/files HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nConnection: close\r\n\r\n"
    ).encode()
    with _connect(strict.url) as sock:
        sock.sendall(head + body[:100])
        time.sleep(1.5)  # past request_timeout (1 s), within the upload's time
        sock.sendall(body[100:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"EOS001" in answer
