"""Talking to the Hub politely: one request at a time per slot, retries, and rate limits.

huggingface_hub's ``http_backoff`` retries one request on its own (429 with ``Retry-After`` or
``RateLimit``, 5xx, timeouts: 1, 2, 4, 8 s, no jitter). Sixteen threads each doing that would
hammer a Hub that is already saying "slow down", and wake up together. So a batch shares one
**gate** between all its requests:

- a 429 pauses *every* request until the Hub's ``Retry-After`` (or the ``RateLimit`` reset)
  has passed, plus jitter, and halves how many may be in flight (once per round of requests);
- a success that reports ``r=0`` (nothing left in the window) pauses until the reset;
- after ``limit`` successes in a row the limit grows by one, up to the ``workers`` asked for
  (additive increase, multiplicative decrease);
- 5xx, 408, timeouts and dropped connections are retried after a backoff with full jitter;
- every request is tried at most MAX_ATTEMPTS times; then its error is the repo's.

It builds on huggingface_hub's pieces: its shared HTTP session (``get_session``), its headers
and token lookup (``build_hf_headers``), its parser of the Hub's ``RateLimit`` headers, and
``hf_raise_for_status`` (typed errors: repository not found, gated...).
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import httpx2
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import (
    build_hf_headers,
    get_session,
    hf_raise_for_status,
    parse_ratelimit_headers,
)

MAX_ATTEMPTS = 6  # as http_backoff's default (1 try + 5 retries)
BASE_WAIT = 0.5  # seconds before the first retry of a 5xx / timeout (full jitter)
MAX_WAIT = 8.0
RETRY_STATUS = frozenset((408, 429, 500, 502, 503, 504))
RETRY_ERRORS = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


class Stopped(Exception):
    """The batch is ending (Ctrl-C): a request that waits for its turn gives up."""


class Unreachable(Exception):
    """A request got no answer in MAX_ATTEMPTS tries (no connection, timed out, dropped);
    its message names the address, so a wrong ``HF_ENDPOINT`` or a proxy is easy to spot."""

    def __init__(self, url: str, attempts: int, cause: BaseException) -> None:
        self.url = url
        self.attempts = attempts
        self.cause = cause
        super().__init__(_unreachable_text(url, attempts, cause))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _unreachable_text(url: str, attempts: int, cause: BaseException) -> str:
    name = type(cause).__name__
    detail = str(cause).strip()
    why = f"{name}: {detail}" if detail and detail != name else name
    tries = f"{attempts} attempts" if attempts != 1 else "1 attempt"
    origin = _origin(url)
    endpoint = " (HF_ENDPOINT)" if os.environ.get("HF_ENDPOINT") and url.startswith(
        os.environ["HF_ENDPOINT"].rstrip("/")
    ) else ""  # fmt: skip
    if isinstance(cause, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        return f"cannot connect to {origin}{endpoint} ({why}; {tries})"
    if isinstance(cause, httpx2.TimeoutException):
        return f"timed out waiting for {url} ({why}; {tries})"
    return f"no answer from {url} ({why}; {tries})"


def _clock() -> float:
    return time.monotonic()


def _sleep(seconds: float, stopping: threading.Event) -> None:
    """Wait, unless the batch stops first. (Tests replace _clock and _sleep.)"""
    stopping.wait(seconds)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the Hub asks to wait: its ``RateLimit`` reset when nothing is left, else
    ``Retry-After`` (seconds or an HTTP date)."""
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    value = (headers.get("retry-after") or "").strip()
    if value.isdigit():
        return float(value)
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return None


class RateGate:
    """How many requests may be in flight now, and until when all must wait (see module)."""

    def __init__(self, limit: int) -> None:
        self.max = self.limit = self.lowest = max(1, limit)
        self.in_flight = 0
        self.paused_until = 0.0
        self.last_cut = -math.inf
        self.streak = 0
        self.stopping = threading.Event()
        # requests (sent and answered, or timed out after being sent), unreachable (no
        # connection made: never counted as a request), api, resolve, retries, rate_limited
        self.stats: Counter[str] = Counter()
        self.waited = 0.0  # seconds every request was paused in all
        self._cond = threading.Condition()

    def acquire(self) -> float:
        """Wait for a slot (and for any pause to end); returns when the request starts."""
        while True:
            with self._cond:
                if self.stopping.is_set():
                    raise Stopped
                now = _clock()
                wait = self.paused_until - now
                if wait <= 0 and self.in_flight < self.limit:
                    self.in_flight += 1
                    return now
                if wait <= 0:
                    self._cond.wait(0.5)
                    continue
            _sleep(wait, self.stopping)

    def release(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    def succeeded(self, headers: Mapping[str, str]) -> None:
        with self._cond:
            self.streak += 1
            if self.streak >= self.limit and self.limit < self.max:
                self.limit += 1
                self.streak = 0
                self._cond.notify()
            info = parse_ratelimit_headers(headers)
            if info is not None and info.remaining == 0:  # the next one would be a 429
                self._pause(float(info.reset_in_seconds))

    def throttled(self, started: float, wait: float | None) -> None:
        """A 429 (or 503): halve the limit, once per round of requests; pause everyone for
        ``wait`` seconds plus jitter, when the Hub said how long."""
        with self._cond:
            if started >= self.last_cut:  # requests sent before the last cut do not cut again
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self.last_cut = _clock()
            self.streak = 0
            if wait is not None:
                self._pause(wait + random.uniform(0, min(1.0, 0.1 + wait / 10)))

    def _pause(self, seconds: float) -> None:
        until = _clock() + seconds
        if until > self.paused_until:
            self.waited += until - max(self.paused_until, _clock())
            self.paused_until = until

    def stop(self) -> None:
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()


def backoff(attempt: int) -> float:
    """Full jitter: a random wait up to BASE_WAIT * 2**(attempt-1), capped at MAX_WAIT."""
    return random.uniform(0, min(MAX_WAIT, BASE_WAIT * 2 ** (attempt - 1)))


class BadAnswer(ConnectionError):
    """The Hub answered 200 with a body that is wrong every time it was asked (JSON cut
    short, a file whose bytes do not match its hash): a transfer fault, the repo's error."""


class HubHttp:
    """GET requests to the Hub through one RateGate; the token is never logged."""

    def __init__(
        self, *, token: str | bool | None = None, timeout: float | None = 30.0, workers: int = 16
    ):
        self.headers = build_hf_headers(token=token)
        self.timeout = timeout
        self.gate = RateGate(workers)

    @property
    def stats(self) -> Counter[str]:
        return self.gate.stats

    def get(self, url: str, params: Iterable[tuple[str, Any]] | None = None) -> httpx2.Response:
        """GET ``url`` (retried as the module says); raises huggingface_hub's typed errors."""
        response = self._request(url, list(params) if params else None)
        hf_raise_for_status(response)
        return response

    def get_checked(
        self,
        url: str,
        params: Iterable[tuple[str, Any]] | None,
        problem: Callable[[httpx2.Response], str | None],
    ) -> httpx2.Response:
        """GET ``url`` as ``get`` does, and retry (like a 5xx) an answer whose body
        ``problem`` finds wrong (JSON cut short, bytes not matching the Hub's hash); after
        MAX_ATTEMPTS such answers, raise ``BadAnswer`` with what was wrong."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            response = self.get(url, params)
            why = problem(response)
            if why is None:
                return response
            if attempt < MAX_ATTEMPTS:
                self.stats["retries"] += 1
                _sleep(backoff(attempt), self.gate.stopping)
        raise BadAnswer(f"{why} ({MAX_ATTEMPTS} attempts): {url}")

    def _request(self, url: str, params: list[tuple[str, Any]] | None) -> httpx2.Response:
        kind = "resolve" if "/resolve/" in url else "api"
        for attempt in range(1, MAX_ATTEMPTS + 1):
            last = attempt == MAX_ATTEMPTS
            started = self.gate.acquire()
            try:
                response = get_session().get(
                    url, params=params, headers=self.headers, timeout=self.timeout
                )
            except RETRY_ERRORS as exc:
                self.gate.release()
                connected = not isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))
                self._count(kind if connected else None)
                if last:
                    raise Unreachable(url, attempt, exc) from exc
                self.stats["retries"] += 1  # timed out, dropped: try again after a backoff
                _sleep(backoff(attempt), self.gate.stopping)
                continue
            except BaseException:
                self.gate.release()
                raise
            self._count(kind)
            status = response.status_code
            retry = status in RETRY_STATUS and not last
            wait = retry_after(response.headers) if retry and status in (429, 503) else None
            # The outcome is recorded before the slot is freed: a request waiting for the slot
            # must see the pause a 429 asks for, not start in between.
            if retry and status in (429, 503):
                self.gate.throttled(started, wait)
            elif not retry and status < 400:
                self.gate.succeeded(response.headers)
            self.gate.release()
            if status == 429:
                self.stats["rate_limited"] += 1
            if not retry:
                return response
            self.stats["retries"] += 1
            if wait is None:
                _sleep(backoff(attempt), self.gate.stopping)
        raise AssertionError("unreachable")  # pragma: no cover

    def _count(self, kind: str | None) -> None:
        """One more request made (``kind``: api or resolve), or, None, one that never
        connected."""
        with self.gate._cond:
            if kind is None:
                self.stats["unreachable"] += 1
            else:
                self.stats["requests"] += 1
                self.stats[kind] += 1


# --- one line per failure ------------------------------------------------------------------


def describe_error(exc: BaseException) -> tuple[str, int | None]:
    """A one-line reason (and HTTP status) for a failed Hub call; never includes a token."""
    for err in _chain(exc):
        if isinstance(err, BadAnswer):
            return str(err), None
        status = _status(err)
        if isinstance(err, GatedRepoError):
            return f"gated repository: request access and log in ({status})", status
        if isinstance(err, RevisionNotFoundError):
            return f"revision not found ({status})", status
        if isinstance(err, RepositoryNotFoundError):
            hint = "" if status == 404 else ": private? log in or pass --token"
            return f"repository not found{hint} ({status})", status
        if isinstance(err, RemoteEntryNotFoundError):
            return f"file not found ({status})", status
        if isinstance(err, HfHubHTTPError) and status is not None:
            return _http_reason(status), status
        if isinstance(err, OfflineModeIsEnabled):
            return "HF_HUB_OFFLINE is set: cannot reach the Hub", None
        if isinstance(err, Unreachable):
            return str(err), None
        if isinstance(err, httpx2.RequestError) and _has_request(err):
            return _unreachable_text(str(err.request.url), 1, err), None
        if isinstance(err, httpx2.TimeoutException):
            return "timed out waiting for the Hub", None
        if isinstance(err, (httpx2.TransportError, ConnectionError)):
            return f"network error ({type(err).__name__})", None
        if isinstance(err, Stopped):
            return "interrupted", None
    if isinstance(exc, LocalEntryNotFoundError):
        return "cannot reach the Hub and the file is not cached", None
    return f"Hub request failed ({type(exc).__name__})", None


def _has_request(err: httpx2.RequestError) -> bool:
    try:
        return err.request is not None
    except RuntimeError:  # raised without a request (httpx2 allows it)
        return False


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        node = node.__cause__ or node.__context__


def _status(err: BaseException) -> int | None:
    response: Any = getattr(err, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _http_reason(status: int) -> str:
    reasons = {
        401: "authentication failed: invalid or missing token",
        403: "access denied",
        404: "not found",
        429: "rate limited by the Hub: try again later",
    }
    default = "Hub server error" if status >= 500 else "Hub request failed"
    return f"{reasons.get(status, default)} ({status})"


def hub_errors() -> tuple[type[BaseException], ...]:
    """What a failed Hub call raises (caught per repo, so the batch goes on)."""
    return (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        httpx2.HTTPError,
        ConnectionError,
        TimeoutError,
        Stopped,
        Unreachable,
    )
