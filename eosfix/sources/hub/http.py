"""Talking to the Hub politely: pace each quota, retry, never hammer. One module, because the
pacing, the retries and the counting of requests share one lock and one view of each answer.

The Hub counts requests in fixed 5-minute windows, in separate buckets: "Hub APIs" (listings,
repo info, paths-info...) and "Resolvers" ("all the URLs that contain a /resolve/ segment"),
and sends ``RateLimit: "<bucket>";r=<remaining>;t=<seconds to reset>`` and
``RateLimit-Policy: "fixed window";"<bucket>";q=<quota>;w=<window>`` (hub-docs
``docs/hub/rate-limits.md``, the IETF draft version 9; on every answer of the bucket, not only
on a 429: huggingface_hub ``utils/_http.py`` 971, issue huggingface/huggingface_hub#3553). So a
batch shares one **gate** with one **bucket** per quota:

- a bucket whose answers carry those headers is **paced**: it sends while its estimate of the
  requests left in the window (the lowest the answers allow, counting every request still in
  flight as already counted) stays above a small reserve, then waits until the window has
  surely ended (each answer bounds the end: between ``sent + t - 1`` and ``received + t``,
  since ``t`` is rounded up to whole seconds) and starts the next. Fixed windows do not
  punish a burst, so waiting at the end of a window costs nothing, and no request is refused;
- before its first answer a bucket sends one request at a time (the quota is not known yet);
  a bucket whose answers carry no such headers is not paced (a 429 then says when to retry);
- a 429 pauses only its own bucket, until the ``RateLimit`` reset (when nothing is left) or
  ``Retry-After``, plus jitter, and halves how many requests may be in flight (once per round
  of requests); after ``limit`` successes in a row the limit grows by one, up to the
  ``workers`` asked for (additive increase, multiplicative decrease);
- no wait is longer than ``longest`` (``bounds.LONGEST_WAIT``, a quota window): a 429 or 503
  asking for more fails its request at once, saying what it asked (``WaitRefused``); a reset
  announced past it on any other answer is taken as ``longest`` (counted: ``capped``);
- a request holds its slot at most ``bounds.SLOT_LEASE`` seconds: one still waiting on the
  network then gives its slot to the next (it still counts in its bucket until it ends, by
  its deadline: ``eosfix.sources.hub.client``), so a server that hangs stalls no one else;
- 5xx, 408, timeouts and dropped connections are retried after a backoff with full jitter;
  an answer over its cap or too slow to come whole is not (``client.TooLarge``, ``TooSlow``);
- every request is tried at most MAX_ATTEMPTS times; then its error is the repo's;
- ``stop`` (the first Ctrl-C: stop early but whole) ends every wait for a turn, a pause or a
  backoff, and no request starts after it; a request already on the network finishes (by its
  deadline), so what was in flight is reported as it was answered. ``abort`` (a second
  Ctrl-C; ``stop_every_gate`` for a server shutting down) ends the requests on the network
  too.

Each request is one ``eosfix.sources.hub.client.fetch`` (bytes, deadline, redirects, no
cookies). It builds on huggingface_hub's pieces: its headers and token lookup
(``build_hf_headers``), its parser of the Hub's ``RateLimit`` headers, and
``hf_raise_for_status`` (typed errors: repository not found, gated...).
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import IO, Any
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
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, parse_ratelimit_headers

from eosfix.sources.hub.bounds import JSON, LONGEST_WAIT, Cap
from eosfix.sources.hub.client import (
    BadEncoding,
    Stopped,
    TooLarge,
    TooSlow,
    fetch,
)

__all__ = ["BadEncoding", "Stopped", "TooLarge", "TooSlow"]  # raised through HubHttp
log = logging.getLogger("eosfix.sources.hub")

MAX_ATTEMPTS = 6  # as http_backoff's default (1 try + 5 retries)
BASE_WAIT = 0.5  # seconds before the first retry of a 5xx / timeout (full jitter)
MAX_WAIT = 8.0
RETRY_STATUS = frozenset((408, 429, 500, 502, 503, 504))
RETRY_ERRORS = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


class WaitRefused(Exception):
    """A 429 or 503 asking to wait longer than eosfix waits (``LONGEST_WAIT``, a quota
    window): not waited for, not retried."""

    def __init__(self, url: str, status: int, asked: float, longest: float) -> None:
        self.url, self.status, self.asked, self.longest = url, status, asked, longest
        super().__init__(
            f"the Hub asks to wait {_seconds(asked)}, over the {longest:.0f} s eosfix waits "
            f"({status})"
        )


def _seconds(value: float) -> str:
    return f"{value:,.0f} s" if value < 1e15 else f"{value:.3g} s"


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
    ``Retry-After`` (seconds or an HTTP date; a date without a zone is UTC). Unbounded: the
    caller compares it with what it waits at most."""
    info = ratelimit(headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    value = (headers.get("retry-after") or "").strip()
    if value.isdigit():
        return float(value) if len(value) < 20 else math.inf
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def ratelimit(headers: Mapping[str, str]) -> Any:
    """huggingface_hub's reading of the ``RateLimit`` headers, or None (also for numbers too
    long for Python to read)."""
    try:
        return parse_ratelimit_headers(headers)
    except (ValueError, OverflowError):
        return None


API, RESOLVERS = "api", "resolvers"  # the Hub's names of its two buckets eosfix uses


def bucket_of(url: str) -> str:
    """The quota a request counts against (hub-docs rate-limits.md, lines 5-15)."""
    return RESOLVERS if "/resolve/" in url else API


class Bucket:
    """One of the Hub's request quotas, as the ``RateLimit`` headers of its answers tell it
    (see the module). Used under the gate's lock."""

    def __init__(self, name: str, longest: float = LONGEST_WAIT) -> None:
        self.name = name
        self.longest = longest  # the most a reset is taken to be (bounds.LONGEST_WAIT)
        self.capped = 0  # resets over it
        self.paced: bool | None = None  # None: no answer yet; False: answers without headers
        self.quota = 0  # q: requests per window
        self.window = 0.0  # w: seconds
        self.left = 0  # requests that may still be sent in the current window
        self.ends: float | None = None  # the current window has surely ended by then
        self.opened = -math.inf  # when the current window began to be counted here
        self.in_flight = 0
        self.slow = 0  # of those, requests that gave their slot back (past SLOT_LEASE)
        self.paused_until = 0.0  # a 429 asked this bucket to wait
        self.sent = 0
        self.waited = 0.0  # seconds its requests waited for the next window
        self.counted_to = 0.0

    @property
    def reserve(self) -> int:
        """Requests of each window left unspent (another client on the same token)."""
        return max(1, self.quota // 100)

    def ready(self, now: float) -> float | None:
        """0: a request may be sent now; seconds to wait; None: wait for an answer."""
        if self.paused_until > now:
            return self.paused_until - now
        if self.paced is None:  # one at a time, but not behind a request that hangs
            return 0.0 if self.in_flight == self.slow else None
        if not self.paced:
            return 0.0
        if self.ends is not None and now >= self.ends:  # a new window: all of it again
            self.left, self.ends, self.opened = self.quota - self.in_flight, None, now
        if self.left > self.reserve:
            return 0.0
        return None if self.ends is None else self.ends - now

    def start(self) -> None:
        self.in_flight += 1
        self.sent += 1
        self.left -= 1

    def answered(self, headers: Mapping[str, str], sent_at: float, now: float) -> None:
        """Read an answer's ``RateLimit`` headers (before its request leaves ``in_flight``)."""
        info = ratelimit(headers)
        if info is None or info.resource_type != self.name:
            if self.paced is None:
                self.paced = False
            return
        if sent_at < self.opened:  # counted in a window this bucket has left behind
            return
        first = not self.paced
        self.paced = True
        self.quota = info.limit or max(self.quota, info.remaining + 1)
        self.window = min(float(info.window_seconds or self.window), self.longest)
        # the window ends within (sent + t - 1, received + t]; the requests still in flight
        # may have been counted after this one
        estimate = info.remaining - (self.in_flight - 1)
        ends = now + self._reset(info.reset_in_seconds)
        if first or self.ends is None:
            self.left = estimate if first else min(self.left, estimate)
            self.ends = ends
        else:
            self.left = min(self.left, estimate)
            self.ends = min(self.ends, ends)

    def refused(self, headers: Mapping[str, str], now: float, wait: float | None) -> None:
        """A 429: nothing is left in this window; wait as the Hub said."""
        info = ratelimit(headers)
        if info is not None and info.resource_type == self.name:
            self.paced = True
            self.quota = info.limit or self.quota
            self.window = min(float(info.window_seconds or self.window), self.longest)
            self.ends = now + self._reset(info.reset_in_seconds)
        self.left = 0
        if wait is not None:
            self.paused_until = max(self.paused_until, now + wait)

    def _reset(self, seconds: float) -> float:
        """A reset the Hub announced, taken as at most ``longest`` seconds (counted)."""
        if seconds <= self.longest:
            return float(seconds)
        self.capped += 1
        log.info(
            "the Hub announced a reset over the longest eosfix waits: taken as the longest",
            extra={"fields": {"bucket": self.name, "asked": seconds, "longest": self.longest}},
        )
        return self.longest

    def status(self, now: float) -> str:
        """``api 812/1000 left, next window in 12 s``; empty when not paced."""
        if not self.paced:
            return ""
        text = f"{self.name} {max(0, self.left)}/{self.quota} left"
        if self.ends is not None and self.ends > now:
            text += f", next window in {math.ceil(self.ends - now)} s"
        return text


class RateGate:
    """How many requests may be in flight now, and each bucket's pace (see module)."""

    def __init__(self, limit: int, longest: float = LONGEST_WAIT) -> None:
        self.max = self.limit = self.lowest = max(1, limit)
        self.in_flight = 0
        self.longest = longest
        self.buckets = {name: Bucket(name, longest) for name in (API, RESOLVERS)}
        self.last_cut = -math.inf
        self.streak = 0
        self.stopping = threading.Event()  # no new request, no wait: ``stop``
        self.aborting = threading.Event()  # nor a request on the network: ``abort``
        # requests (sent and answered, or timed out after being sent), unreachable (no
        # connection made: never counted as a request), api, resolve, retries, rate_limited
        self.stats: Counter[str] = Counter()
        self.waited = 0.0  # seconds a bucket was paused by 429s, in all
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the lock; requests of each bucket wait on theirs
        self._turns = {name: threading.Condition(lock) for name in self.buckets}
        _GATES.add(self)

    @property
    def capped(self) -> int:
        """Resets the Hub announced over ``longest``, taken as ``longest``."""
        return sum(b.capped for b in self.buckets.values())

    def acquire(self, bucket: str = RESOLVERS) -> float:
        """Wait for a slot and for the bucket's turn; returns when the request starts."""
        b = self.buckets[bucket]
        turn = self._turns[bucket]
        while True:
            with self._cond:
                if self.stopping.is_set():
                    raise Stopped
                now = _clock()
                wait = b.ready(now)
                if wait == 0.0 and self.in_flight < self.limit:
                    self.in_flight += 1
                    b.start()
                    return now
                if wait is None or wait <= 0:  # a slot, or an answer telling the quota
                    turn.wait(0.5)
                    continue
                if b.paused_until <= now:  # waiting for the next window (not a 429)
                    b.waited += max(0.0, now + wait - max(b.counted_to, now))
                    b.counted_to = max(b.counted_to, now + wait)
            _sleep(wait, self.stopping)

    def release(self, bucket: str = RESOLVERS, *, given_back: bool = False) -> None:
        """A request is over: its slot (unless it gave it back) may go to a request of either
        bucket."""
        with self._cond:
            b = self.buckets[bucket]
            if given_back:
                b.slow -= 1
            else:
                self.in_flight -= 1
            b.in_flight -= 1
            for turn in self._turns.values():
                turn.notify()

    def give_back(self, bucket: str) -> None:
        """A request still waiting on the network past ``SLOT_LEASE`` gives its slot to the
        next request; it stays in its bucket's count (the Hub counts it) until it ends."""
        with self._cond:
            self.in_flight -= 1
            self.buckets[bucket].slow += 1
            self.stats["slow"] += 1
            for turn in self._turns.values():
                turn.notify()

    def answered(self, bucket: str, headers: Mapping[str, str], started: float) -> None:
        """What an answer (any status) says of its bucket's quota."""
        with self._cond:
            b = self.buckets[bucket]
            was = b.paced
            b.answered(headers, started, _clock())
            if b.paced != was:  # the quota is known now: every waiting request may go
                self._turns[bucket].notify_all()

    def succeeded(self) -> None:
        with self._cond:
            self.streak += 1
            if self.streak >= self.limit and self.limit < self.max:
                self.limit += 1
                self.streak = 0
                for turn in self._turns.values():
                    turn.notify()

    def throttled(
        self, bucket: str, started: float, wait: float | None, headers: Mapping[str, str]
    ) -> None:
        """A 429 (or 503): halve the limit, once per round of requests; pause the bucket
        for ``wait`` seconds plus jitter, when the Hub said how long."""
        with self._cond:
            if started >= self.last_cut:  # requests sent before the last cut do not cut again
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self.last_cut = _clock()
            self.streak = 0
            if wait is not None:
                wait += random.uniform(0, min(1.0, 0.1 + wait / 10))
                b = self.buckets[bucket]
                now = _clock()
                self.waited += max(0.0, now + wait - max(b.paused_until, now))
            self.buckets[bucket].refused(headers, _clock(), wait)

    def status(self) -> str:
        """Each paced bucket's budget: ``api 812/1000 left; resolvers 0/5000 left, next
        window in 12 s``."""
        with self._cond:
            now = _clock()
            return "; ".join(t for b in self.buckets.values() if (t := b.status(now)))

    def eta(self, done: int, left: int) -> float | None:
        """Seconds the quotas need for ``left`` more repos, each costing what the ``done``
        ones did on average; None when no quota is paced (eosfix's own speed is the limit)."""
        worst: float | None = None
        with self._cond:
            now = _clock()
            for b in self.buckets.values():
                if not b.paced or b.quota <= b.reserve or not done:
                    continue
                need = b.sent / done * left
                seconds = 0.0
                if need > b.left:
                    windows = math.ceil((need - b.left) / (b.quota - b.reserve))
                    start = b.ends - now if b.ends is not None else b.window
                    seconds = max(0.0, start) + (windows - 1) * b.window
                worst = seconds if worst is None else max(worst, seconds)
        return worst

    def stop(self) -> None:
        """No request of this gate starts any more: those waiting for a turn, a pause or a
        backoff give up; those on the network finish, by their deadline."""
        self.stopping.set()
        with self._cond:
            for turn in self._turns.values():
                turn.notify_all()

    def abort(self) -> None:
        """``stop``, and the requests blocked on the network give up too (within
        ``client.SLICE``)."""
        self.aborting.set()
        self.stop()


_GATES: weakref.WeakSet[RateGate] = weakref.WeakSet()


def stop_every_gate(keep: Iterable[RateGate] = ()) -> int:
    """Abort every gate of this process but ``keep`` (a server shutting down: its requests
    give up now, whatever they wait for); how many were aborted."""
    kept = {id(g) for g in keep}
    gates = [g for g in list(_GATES) if id(g) not in kept and not g.aborting.is_set()]
    for gate in gates:
        gate.abort()
    return len(gates)


def backoff(attempt: int) -> float:
    """Full jitter: a random wait up to BASE_WAIT * 2**(attempt-1), capped at MAX_WAIT."""
    return random.uniform(0, min(MAX_WAIT, BASE_WAIT * 2 ** (attempt - 1)))


class BadAnswer(ConnectionError):
    """The Hub answered 200 with a body that is wrong every time it was asked (JSON cut
    short, a file whose bytes do not match its hash): a transfer fault, the repo's error."""


class HubHttp:
    """Requests to the Hub through one RateGate; the token is never logged. ``timeout``: how
    long each request's head may take (its body gets the time its size needs:
    ``bounds.SLOWEST_RATE``); ``longest``: the longest wait the Hub may ask for (a 429 asking
    for more fails its request at once)."""

    def __init__(
        self,
        *,
        token: str | bool | None = None,
        timeout: float | None = 30.0,
        workers: int = 16,
        longest: float = LONGEST_WAIT,
    ):
        self.headers = build_hf_headers(token=token)
        self.timeout = timeout
        self.longest = longest
        self.gate = RateGate(workers, longest)

    @property
    def stats(self) -> Counter[str]:
        return self.gate.stats

    def get(
        self, url: str, params: Iterable[tuple[str, Any]] | None = None, *, cap: Cap = JSON
    ) -> httpx2.Response:
        """GET ``url`` (retried as the module says); raises huggingface_hub's typed errors."""
        response = self._request("GET", url, list(params) if params else None, None, cap=cap)
        hf_raise_for_status(response)
        return response

    def get_checked(
        self,
        url: str,
        params: Iterable[tuple[str, Any]] | None,
        problem: Callable[[httpx2.Response], str | None],
        *,
        cap: Cap = JSON,
        sink: IO[bytes] | None = None,
    ) -> httpx2.Response:
        """GET ``url`` as ``get`` does, and retry (like a 5xx) an answer whose body
        ``problem`` finds wrong (JSON cut short, bytes not matching the Hub's hash); after
        MAX_ATTEMPTS such answers, raise ``BadAnswer`` with what was wrong. ``sink``: the
        body goes there (emptied before each attempt), not into ``content``."""
        return self.checked("GET", url, params, None, problem, cap=cap, sink=sink)

    def checked(
        self,
        method: str,
        url: str,
        params: Iterable[tuple[str, Any]] | None,
        data: Mapping[str, Any] | None,
        problem: Callable[[httpx2.Response], str | None],
        *,
        cap: Cap = JSON,
        sink: IO[bytes] | None = None,
    ) -> httpx2.Response:
        """``method`` (GET, or POST with the form ``data``) as ``get_checked`` says."""
        query = list(params) if params else None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            response = self._request(method, url, query, data, cap=cap, sink=sink)
            hf_raise_for_status(response)
            why = problem(response)
            if why is None:
                return response
            if attempt < MAX_ATTEMPTS:
                self.stats["retries"] += 1
                _sleep(backoff(attempt), self.gate.stopping)
        raise BadAnswer(f"{why} ({MAX_ATTEMPTS} attempts): {url}")

    def get_range(
        self,
        url: str,
        start: int,
        end: int,
        *,
        send_token: bool = True,
        tally: Counter[str] | None = None,
        sink: IO[bytes] | None = None,
    ) -> httpx2.Response:
        """GET bytes [start, end) of the file at ``url`` (a 206 answer; a 200 means the
        server ignored the range: then only its first ``end - start`` bytes are read, never
        the whole file). ``send_token``: False for a URL off the Hub (a CDN's signed URL);
        ``tally``: counts this call's requests too (the file's own count); ``sink``: where a
        successful answer's bytes go as they arrive (then its ``content`` is empty)."""
        headers = {
            **(self.headers if send_token else _without_token(self.headers)),
            "Range": f"bytes={start}-{end - 1}",
            # A compressed answer may ignore the range (huggingface_hub file_download.py
            # http_get: "CloudFront with Accept-Encoding: gzip"), and its offsets are not the
            # file's: ask for the bytes as they are.
            "Accept-Encoding": "identity",
        }
        cap = Cap(end - start, "a byte range", "the bytes asked for, never the whole file")
        response = self._request(
            "GET", url, None, None, headers=headers, cap=cap, sink=sink, tally=tally, ranged=True
        )
        hf_raise_for_status(response)
        return response

    def _request(
        self,
        method: str,
        url: str,
        params: list[tuple[str, Any]] | None,
        data: Mapping[str, Any] | None,
        *,
        headers: Mapping[str, str] | None = None,
        cap: Cap = JSON,
        sink: IO[bytes] | None = None,
        tally: Counter[str] | None = None,
        ranged: bool = False,
    ) -> httpx2.Response:
        bucket = RESOLVERS if ranged else bucket_of(url)  # a byte range reads a file
        kind = "resolve" if bucket == RESOLVERS else "api"
        gate = self.gate
        for attempt in range(1, MAX_ATTEMPTS + 1):
            last = attempt == MAX_ATTEMPTS
            started = gate.acquire(bucket)
            slot = _Slot(gate, bucket)
            if sink is not None:
                sink.seek(0)
                sink.truncate()
            try:
                response = fetch(
                    method, url, params=params, data=data, headers=headers or self.headers,
                    cap=cap, timeout=self.timeout, aborting=gate.aborting, sink=sink,
                    truncate=ranged, on_lease=slot.give_back,
                )  # fmt: skip
            except RETRY_ERRORS as exc:
                slot.release()
                connected = not isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))
                self._count(kind if connected else None, tally=tally)
                if last:
                    raise Unreachable(url, attempt, exc) from exc
                self.stats["retries"] += 1  # timed out, dropped: try again after a backoff
                _sleep(backoff(attempt), gate.stopping)
                continue
            except (TooLarge, TooSlow, BadEncoding):
                slot.release()
                self._count(kind, tally=tally)
                raise
            except BaseException:
                slot.release()
                raise
            self._count(kind, len(response.history), tally)
            status = response.status_code
            hub_answer = hub_response(response)
            retry = status in RETRY_STATUS and not last
            wait = retry_after(response.headers) if retry and status in (429, 503) else None
            refused = wait is not None and wait > self.longest
            # The outcome is recorded before the slot is freed: a request waiting for the slot
            # must see the pause a 429 asks for, not start in between.
            gate.answered(bucket, hub_answer.headers, started)
            if retry and status in (429, 503) and not refused:
                gate.throttled(bucket, started, wait, response.headers)
            elif not retry and status < 400:
                gate.succeeded()
            slot.release()
            if status == 429:
                self.stats["rate_limited"] += 1
            if refused:
                assert wait is not None
                self.stats["waits_refused"] += 1
                raise WaitRefused(url, status, wait, self.longest)
            if not retry:
                return response
            self.stats["retries"] += 1
            if wait is None:
                _sleep(backoff(attempt), gate.stopping)
        raise AssertionError("unreachable")  # pragma: no cover

    def _count(
        self, kind: str | None, redirects: int = 0, tally: Counter[str] | None = None
    ) -> None:
        """One more request made (``kind``: api or resolve), or, None, one that never
        connected. ``redirects`` followed (an LFS file's CDN) are counted apart in ``stats``:
        the Hub's quotas count the request, not the CDN's answer. ``tally`` (one file's own
        count) counts every request sent, redirects included."""
        with self.gate._cond:
            if kind is None:
                self.stats["unreachable"] += 1
                if tally is not None:
                    tally["unreachable"] += 1
                return
            self.stats["requests"] += 1
            self.stats[kind] += 1
            self.stats["redirects"] += redirects
            if tally is not None:
                tally["requests"] += 1 + redirects
                tally[kind] += 1 + redirects


class _Slot:
    """A request's place in the gate, which it may give back before it ends (the lease)."""

    __slots__ = ("bucket", "gate", "given")

    def __init__(self, gate: RateGate, bucket: str) -> None:
        self.gate, self.bucket, self.given = gate, bucket, False

    def give_back(self) -> None:
        self.given = True
        self.gate.give_back(self.bucket)

    def release(self) -> None:
        self.gate.release(self.bucket, given_back=self.given)


def _without_token(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != "authorization"}


def hub_response(response: httpx2.Response) -> httpx2.Response:
    """The Hub's own answer of a request whose redirects were followed: an LFS file's resolve
    answers with a redirect to a CDN, and that redirect, not the CDN's answer, carries the
    file's metadata (``X-Linked-Etag``, ``X-Repo-Commit``) and the quota's headers
    (huggingface_hub ``utils/_http.py`` 735-782)."""
    for hop in response.history:
        if "x-repo-commit" in hop.headers or "ratelimit" in hop.headers:
            return hop
    return response


# --- one line per failure ------------------------------------------------------------------


# How a gated repo's error starts: the Hub answers 401 or 403 for one, as for a private one,
# and the page tells the two apart (403 for a gated repo, 404 for one it cannot see).
GATED_REPO = "gated repository"


def describe_error(exc: BaseException) -> tuple[str, int | None]:
    """A one-line reason (and HTTP status) for a failed Hub call; never includes a token."""
    for err in _chain(exc):
        if isinstance(err, (BadAnswer, TooLarge, TooSlow, BadEncoding)):
            return str(err), None
        if isinstance(err, WaitRefused):
            return f"rate limited: {err}", err.status
        status = _status(err)
        if isinstance(err, GatedRepoError):
            return f"{GATED_REPO}: request access and log in ({status})", status
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
        TooLarge,
        TooSlow,
        BadEncoding,
        WaitRefused,
    )
