"""Pacing under the Hub's quotas: each bucket (API, Resolvers) read from its own RateLimit
headers, spent to a reserve, then waited out to its next window; a 429 pauses only its
bucket; nothing paced when the Hub sends no such headers."""
# ruff: noqa: F811  (the `fake_hub` fixture is imported, then requested by name)

from __future__ import annotations

import json
import time

import pytest

from eosfix.sources.hub import http as hubhttp
from eosfix.sources.hub.http import API, RESOLVERS, Bucket, RateGate
from tests.support.hubrepos import chatml_org
from tests.support.hubserver import fake_hub  # noqa: F401  (fixture)


def headers(bucket: str, r: int, t: int, q: int = 10, w: int = 60) -> dict[str, str]:
    return {
        "ratelimit": f'"{bucket}";r={r};t={t}',
        "ratelimit-policy": f'"fixed window";"{bucket}";q={q};w={w}',
    }


def test_a_bucket_sends_one_request_until_an_answer_names_its_quota():
    b = Bucket(RESOLVERS)
    assert b.ready(0.0) == 0.0
    b.start()
    assert b.ready(0.0) is None  # wait for the answer
    b.answered(headers(RESOLVERS, 9, 30), sent_at=0.0, now=0.1)
    b.in_flight -= 1
    assert (b.paced, b.quota, b.window, b.left) == (True, 10, 60.0, 9)
    assert b.ready(0.1) == 0.0


def test_requests_in_flight_count_as_spent_and_the_window_is_waited_out():
    b = Bucket(API)
    b.start()
    for _ in range(3):  # three more sent before the first answer came
        b.in_flight += 1
    b.answered(headers(API, 8, 5), sent_at=0.0, now=1.0)  # 8 left after it; 3 still out
    b.in_flight -= 1
    assert b.left == 5
    for _ in range(4):
        assert b.ready(1.0) == 0.0
        b.start()
    assert b.left == 1  # the reserve (1 of 10) is not spent
    assert b.ready(2.0) == pytest.approx(4.0)  # until the window surely ended: 1.0 + 5
    b.in_flight = 0
    assert b.ready(6.0) == 0.0  # a new window: the whole quota again
    assert b.left == 10
    b.start()
    # an answer counted in the window left behind says nothing of this one
    b.answered(headers(API, 0, 1), sent_at=5.5, now=6.1)
    assert b.left == 9


def test_the_window_end_is_the_earliest_every_answer_allows():
    b = Bucket(API)
    b.start()
    b.answered(headers(API, 9, 5), sent_at=0.0, now=0.2)  # ends by 5.2
    b.start()
    b.answered(headers(API, 8, 4), sent_at=0.5, now=0.9)  # ends by 4.9: t ticked down
    assert b.ends == pytest.approx(4.9)


def test_a_bucket_without_headers_is_not_paced():
    b = Bucket(RESOLVERS)
    b.start()
    b.answered({}, sent_at=0.0, now=0.1)
    b.in_flight -= 1
    assert b.paced is False
    for _ in range(100):
        assert b.ready(0.2) == 0.0
        b.start()


def test_a_429_pauses_only_its_bucket(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(hubhttp, "_clock", lambda: now[0])
    gate = RateGate(4)
    started = gate.acquire(RESOLVERS)
    gate.answered(RESOLVERS, {}, started)
    gate.throttled(RESOLVERS, started, 30.0, {"retry-after": "30"})
    gate.release(RESOLVERS)
    assert gate.buckets[RESOLVERS].ready(now[0]) >= 30.0
    assert gate.acquire(API) == 100.0  # the other bucket goes on at once
    assert gate.limit == 2  # halved, once


def test_the_status_names_each_paced_buckets_budget_and_an_eta(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(hubhttp, "_clock", lambda: now[0])
    gate = RateGate(4)
    for _ in range(2):
        started = gate.acquire(API)
        gate.answered(API, headers(API, 990 - gate.buckets[API].sent, 12, q=1000, w=300), started)
        gate.release(API)
    assert gate.status() == "api 988/1000 left, next window in 12 s"
    # 2 requests for 2 repos: 2,000 more repos need 2,000 requests, 988 now, the rest in the
    # next windows (990 each after the reserve): the third window, 12 + 300 s from now
    assert gate.eta(2, 2000) == pytest.approx(312.0)


@pytest.fixture
def real_waits(monkeypatch):
    monkeypatch.setattr(hubhttp, "_clock", time.monotonic)
    monkeypatch.setattr(hubhttp, "_sleep", lambda seconds, stopping: stopping.wait(seconds))


def test_an_audit_paced_by_the_headers_gets_no_429(fake_hub, run_eosfix, real_waits):
    chatml_org(fake_hub, 6)  # 24 file requests: three windows of 10 (9 each, the reserve kept)
    fake_hub.rate_limit(10, window=1.0, bucket="resolvers")
    fake_hub.rate_limit(10, window=1.0, bucket="api")
    t = time.monotonic()
    result = run_eosfix("hub", "--author", "org", "--format", "json", "--workers", "8")
    payload = json.loads(result.stdout)
    assert payload["summary"]["error"] == 0
    assert payload["summary"]["rate_limited"] == 0
    assert [r.status for r in fake_hub.request_log if r.status != 200] == []
    assert time.monotonic() - t >= 2.0  # the third window
    files = [r.time for r in fake_hub.request_log if "/resolve/" in r.path]
    assert len(files) == 24
    starts = [files[0]]  # each window's first request (a window lasts 1 s from it)
    for at in files:
        if at - starts[-1] >= 1.0:
            starts.append(at)
    per_window = [sum(1 for at in files if s <= at < s + 1.0) for s in starts]
    assert max(per_window) <= 9
