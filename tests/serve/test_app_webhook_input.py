"""What a webhook may say, checked before anything else: the repo id (the Hub's grammar: a
``..`` or an extra ``/`` would reach another repo once the HTTP client collapses the path),
the commit ids (40 hex digits), and the body's size (bounded before it is read, for every
route of the app)."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi import Request

from eosfix.serve.config import ServeConfig
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import SECRET, payload, raw_request
from tests.support.service import Service, bot_config, http


@pytest.fixture
def watching_org(fake_hub, tmp_path):
    with Service(bot_config(tmp_path, authors=frozenset({"org"}))) as s:
        yield s


@pytest.mark.parametrize(
    "name",
    [
        "org/../evil/x",
        "org/..",
        "org/x/../../evil/x",
        "org/x/y",
        "org//x",
        "org/x%2F..%2Fy",
        "org/.x",
        "org/x-",
        "org/x--y",
        "org/" + "x" * 97,
        "org/x\n",
        "org/ x",
        "org",
        "",
    ],
)
def test_a_repo_id_outside_the_hubs_grammar_is_refused(fake_hub, watching_org, name):
    fake_hub.add_repo("evil/x", repo_files(BROKEN))
    response = watching_org.post(payload(name, "a" * 40))
    assert response.status_code == 400, response.body
    assert "repo.name" in response.json()["error"]
    metrics = watching_org.drained()
    assert metrics.get("accepted", 0) == 0
    assert not fake_hub.request_log  # nothing fetched, nothing judged
    assert not watching_org.bot.journal.path.read_text().strip()


@pytest.mark.parametrize("field", ["headSha", "newSha"])
@pytest.mark.parametrize(
    "sha", ["a" * 39, "a" * 41, "A" * 40, "g" * 40, "main", "../" + "a" * 37, ""]
)
def test_a_commit_id_that_is_not_40_hex_is_refused(fake_hub, watching_org, field, sha):
    body = payload("org/x", "b" * 40)
    if field == "headSha":
        body["repo"]["headSha"] = sha
    else:
        body["updatedRefs"][0]["newSha"] = sha
    response = watching_org.post(body)
    assert response.status_code == 400, response.body
    assert field in response.json()["error"]
    assert watching_org.drained().get("accepted", 0) == 0
    assert not fake_hub.request_log


def test_a_deleted_branch_has_no_new_commit_and_is_ignored(watching_org):
    body = payload("org/x", "b" * 40)
    body["updatedRefs"][0]["newSha"] = None
    body["repo"]["headSha"] = None
    response = watching_org.post(body)
    assert response.status_code == 200
    assert response.json()["status"] == "ignored"


def test_a_body_over_the_bound_is_refused_before_it_is_read(fake_hub, tmp_path):
    """The right secret and a Content-Length of 30 MB: 413 after the headers, the body never
    sent (the client waits for ``100-continue`` semantics it never gets: the answer comes
    first)."""
    config = ServeConfig(secret=SECRET, state_dir=tmp_path / "state", max_body=64 * 1024)
    with Service(config) as s:
        head = (
            "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Webhook-Secret: {SECRET}\r\nContent-Length: {30 * 1024 * 1024}\r\n\r\n"
        )
        answer = raw_request(s.url, head.encode())
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b"limit 65536" in answer
        metrics = s.drained()
    assert metrics.get("accepted", 0) == 0
    assert metrics["too_large"] == 1


def test_a_chunked_body_is_cut_at_the_bound(fake_hub, tmp_path):
    config = ServeConfig(secret=SECRET, state_dir=tmp_path / "state", max_body=64 * 1024)
    with Service(config) as s:
        chunk = b"x" * 16384
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
        head = (
            "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Webhook-Secret: {SECRET}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        answer = raw_request(s.url, head.encode() + body)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert s.drained().get("accepted", 0) == 0


def test_the_bound_covers_every_route(tmp_path):
    """A route added to the app later (here: a page) is bounded the same way."""
    config = ServeConfig(secret=SECRET, state_dir=tmp_path / "state", max_body=1024)
    with Service(config) as s:
        seen = []

        @s.app.post("/page")
        async def page(request: Request) -> dict[str, str]:
            seen.append(await request.body())
            return {}

        response = http("POST", f"{s.url}/page", b"x" * 4096, {"Content-Type": "text/plain"})
    assert response.status_code == 413
    assert not seen


def test_a_wrong_secret_never_reads_the_body(tmp_path):
    config = ServeConfig(secret=SECRET, state_dir=tmp_path / "state")
    with Service(config) as s:
        head = (
            "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "X-Webhook-Secret: wrong\r\nContent-Length: 1000000\r\n\r\n"
        )
        start = time.monotonic()
        answer = raw_request(
            s.url, head.encode()
        )  # the body is never sent: the answer comes anyway
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert time.monotonic() - start < 25
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
            "error": "missing or wrong X-Webhook-Secret"
        }


def test_the_documented_payload_and_curl_command_are_queued(fake_hub, tmp_path):
    """docs/serve.md's push.json, posted with the headers its curl command sends, is queued
    (and the commit it names is checked)."""
    import re

    from tests.conftest import ROOT

    page = (ROOT / "docs" / "serve.md").read_text()
    body = json.loads(re.search(r"```json\n(.*?)\n```", page, re.DOTALL).group(1))
    curl = re.search(r"```bash\n(curl .*?)\n```", page, re.DOTALL).group(1)
    headers = dict(re.findall(r"-H ['\"]([\w-]+): ([^'\"]+)['\"]", curl))
    assert set(headers) == {"Content-Type", "X-Webhook-Secret"}
    assert "--data-binary @push.json" in curl
    headers["X-Webhook-Secret"] = SECRET  # $EOSFIX_WEBHOOK_SECRET
    name, sha = body["repo"]["name"], body["repo"]["headSha"]
    fake_hub.add_repo(name, repo_files(BROKEN))
    config = ServeConfig(secret=SECRET, state_dir=tmp_path / "state", dry_run=True)
    with Service(config) as s:
        url = re.search(r"(http://127\.0\.0\.1:\d+)/webhook", curl).group(1)
        assert url == "http://127.0.0.1:7860"  # eosfix serve's default address
        response = http("POST", f"{s.url}/webhook", json.dumps(body).encode(), headers)
        assert response.status_code == 202
        assert response.json() == {"status": "queued", "repo": name, "sha": sha}
        assert f"# {response.body.decode()}" in curl  # the answer the page shows
        s.drained()
    assert any(sha in r.path for r in fake_hub.request_log)  # checked at that commit


def test_the_names_the_payload_model_reads_are_checked_too(fake_hub, watching_org, monkeypatch):
    """Should the payload model ever read other values than the first check saw (two parsers,
    one body), what it read is checked again before anything is queued."""
    from eosfix.serve import app

    monkeypatch.setattr(app, "names_problem", lambda data: None)
    response = watching_org.post(payload("org/../evil/x", "a" * 40))
    assert response.status_code == 400
    assert watching_org.drained().get("accepted", 0) == 0
    assert not fake_hub.request_log


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 10_000 + b"]" * 10_000,  # 20 KB: Python's parser raises RecursionError
        b"[" * 10_000,  # not even closed
        json.dumps({"repo": {"name": json.loads("[" * 500 + "]" * 500)}}).encode(),
        json.dumps({"event": {"scope": "[" * 5000}}).encode().replace(b'"[', b"[", 1),
    ],
    ids=["10k-arrays", "10k-unclosed", "500-deep-name", "5000-after-a-key"],
)
def test_a_deeply_nested_body_is_400_with_one_line(fake_hub, watching_org, caplog, body):
    """The right secret and a body nested thousands of levels deep: a 400 with one line, as
    for any body that is no webhook payload; no traceback, nothing queued."""
    response = watching_org.post(body)
    assert response.status_code == 400, response.body[:300]
    message = response.json()["error"]
    assert message == "not a Hub webhook payload: nested over 100 levels"
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    metrics = watching_org.drained()
    assert metrics.get("accepted", 0) == 0
    assert metrics.get("rejected") == 1
    assert not fake_hub.request_log


def test_brackets_inside_strings_are_no_nesting(fake_hub, watching_org):
    """A payload whose texts hold many brackets is still a payload (only structure counts)."""
    body = payload("org/x", "c" * 40)
    body["repo"]["url"]["web"] = "https://huggingface.co/org/x?" + "[{" * 300 + '\\"' + "[" * 300
    response = watching_org.post(body)
    assert response.status_code == 202, response.body
