"""Every answer of the service carries the Content-Security-Policy and ``nosniff``, whoever
makes it: a route, the router (404, 405, the trailing-slash redirect), the webhook's 401, the
limits' 413, Starlette's 500, uvicorn's own 400 for bytes that are not HTTP. No OpenAPI schema
or docs route is served."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from email.parser import BytesHeaderParser

from eosfix.serve.config import ServeConfig
from eosfix.serve.headers import CSP
from tests.support.serve import raw_request
from tests.support.service import Page


@pytest.fixture
def page(fake_hub, tmp_path):
    config = ServeConfig(secret="s3cret", state_dir=tmp_path / "state", max_body=4096)
    with Page(config) as p:

        @p.app.get("/boom")
        async def boom() -> None:
            raise RuntimeError("a bug in a route")

        yield p


def _headers(answer: bytes) -> tuple[int, dict[str, str]]:
    status_line, _, rest = answer.partition(b"\r\n")
    head = BytesHeaderParser().parsebytes(rest.split(b"\r\n\r\n", 1)[0])
    return int(status_line.split()[1]), {k.lower(): v for k, v in head.items()}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/", 200),
        ("GET", "/healthz", 200),
        ("GET", "/metrics", 200),
        ("GET", "/static/page.css", 200),
        ("GET", "/openapi.json", 404),
        ("GET", "/docs", 404),
        ("GET", "/redoc", 404),
        ("GET", "/nowhere", 404),
        ("GET", "/audit/none/progress", 404),
        ("POST", "/healthz", 405),
        ("GET", "/check/?repo=a/b", 307),
        ("POST", "/webhook", 401),
        ("GET", "/boom", 500),
    ],
)
def test_every_answer_carries_the_policy_and_nosniff(page, method, path, status):
    reply = page.client(follow=False).request(method, path, b"" if method == "POST" else None)
    assert reply.status == status, reply.body[:200]
    assert reply.headers["Content-Security-Policy"] == CSP
    assert reply.headers["X-Content-Type-Options"] == "nosniff"


def test_the_limits_own_answers_carry_them_too(page):
    too_large = (
        "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "X-Webhook-Secret: s3cret\r\nContent-Length: 100000\r\n\r\n"
    )
    for request, status in [(too_large.encode(), 413), (b"NOT HTTP AT ALL\r\n\r\n", 400)]:
        got, headers = _headers(raw_request(page.url, request))
        assert got == status
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"


def test_a_route_may_set_its_own_cache_control(page):
    static = page.client().get("/static/page.js")
    assert static.headers["Cache-Control"] == "public, max-age=3600"
    assert page.client().get("/healthz").headers["Cache-Control"] == "no-store"
