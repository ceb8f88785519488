"""Waits the Hub asks for are bounded and interruptible, and a hung request holds its slot no
longer than its own deadline: against a hostile Hub on 127.0.0.1."""
# ruff: noqa: F811  (fixtures are imported, then requested by name)

from __future__ import annotations

import threading

import pytest

from eosfix.sources.hub.bounds import LONGEST_WAIT
from eosfix.sources.hub.http import Stopped, TooSlow, WaitRefused
from eosfix.sources.hub.read import HubEntry, HubReader
from tests.support.cachebuilder import chatml_files
from tests.support.hostilehub import answer, drip, hostile_hub, with_headers  # noqa: F401

INFO = r"^/api/models/org/m/revision/"
HUGE = {
    "retry-after": {"Retry-After": "999999999"},
    "ratelimit": {
        "RateLimit": '"api";r=0;t=999999999',
        "RateLimit-Policy": '"fixed window";"api";q=500;w=300',
    },
    "http-date": {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
}


def _in_thread(call, *args):
    """Run ``call`` in a thread; (thread, outcome list: its value or exception)."""
    out: list = []

    def run():
        try:
            out.append(call(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("hostile_hub", [{"real_waits": True}], indirect=True)
@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("asked", list(HUGE), ids=list(HUGE))
def test_a_wait_longer_than_a_quota_window_is_refused_at_once(hostile_hub, status, asked):
    hostile_hub.add_repo("org/m", chatml_files())
    rule = hostile_hub.on(INFO, answer(status, {"error": "slow down"}, HUGE[asked]))
    reader = HubReader()
    thread, out = _in_thread(reader.resolve, HubEntry("org/m"))
    thread.join(10)
    reader.http.gate.stop()  # (what an unbounded wait would need to end)
    assert not thread.is_alive(), "still waiting for what the Hub asked"
    (refused,) = out
    assert isinstance(refused, WaitRefused), refused
    assert f"over the {LONGEST_WAIT:.0f} s eosfix waits ({status})" in str(refused)
    assert rule.hits == 1  # not waited for, not retried


def test_the_refusal_is_the_repos_one_error_line(hostile_hub, run_eosfix):
    hostile_hub.add_repo("org/m", chatml_files())
    hostile_hub.add_repo("org/ok", chatml_files(1000))
    hostile_hub.on(INFO, answer(429, {"error": "slow down"}, HUGE["retry-after"]))
    result = run_eosfix("hub", "org/m", "org/ok")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "org/m: error: rate limited: the Hub asks to wait 999,999,999 s, over the 300 s "
        "eosfix waits (429)"
    )
    assert "org/ok" in result.stdout  # the batch went on


def test_a_reset_announced_past_any_window_is_taken_as_the_longest_wait(hostile_hub):
    """Answers that are not refused pace their bucket: a reset of 999,999,999 s is taken as
    LONGEST_WAIT, and counted. (The stand-in's clock jumps over each wait: the waits are
    what eosfix asked to sleep.)"""
    for i, name in enumerate(("org/a", "org/b", "org/c")):
        hostile_hub.add_repo(name, chatml_files(1000 + 10 * i))
    headers = {
        "RateLimit": '"api";r=0;t=999999999',
        "RateLimit-Policy": '"fixed window";"api";q=5;w=999999999',
    }
    hostile_hub.on(r"^/api/models/", with_headers(headers))
    reader = HubReader()
    for name in ("org/a", "org/b", "org/c"):
        reader.resolve(HubEntry(name))
    waits = hostile_hub.backoff_sleeps
    assert waits, "nothing paced"
    assert max(waits) <= LONGEST_WAIT
    assert reader.http.gate.capped >= 2
    assert reader.http.gate.buckets["api"].window == LONGEST_WAIT


def test_the_summary_says_how_many_resets_were_capped(hostile_hub, run_eosfix):
    for i in range(3):
        hostile_hub.add_repo(f"org/m{i}", chatml_files(1000 + 10 * i))
    headers = {
        "RateLimit": '"resolvers";r=0;t=999999999',
        "RateLimit-Policy": '"fixed window";"resolvers";q=100;w=300',
    }
    hostile_hub.on(r"/resolve/", with_headers(headers))
    result = run_eosfix("hub", "--author", "org")
    assert max(hostile_hub.backoff_sleeps) <= LONGEST_WAIT
    assert "quota resets over 300 s cut to it" in result.stdout.splitlines()[-1]


def test_a_hung_request_does_not_stall_other_repos_past_its_own_deadline(hostile_hub):
    """One slot: a request whose body drips for ever (no read ever times out) holds it until
    its deadline, then gives it up; the other repo's request is answered while the drip
    still goes on."""
    hostile_hub.add_repo("org/hung", chatml_files())
    hostile_hub.add_repo("org/ok", chatml_files(1000))
    rule = hostile_hub.on(r"^/org/hung/resolve/", drip(b" " * 10_000, 0.05))
    reader = HubReader(timeout=0.3, workers=1)
    hung, hung_out = _in_thread(reader.read_file, "org/hung", "main", "config.json")
    assert _arrived(hostile_hub, "/org/hung/resolve/")
    ok, ok_out = _in_thread(reader.read_file, "org/ok", "main", "config.json")
    ok.join(10)
    try:
        assert not ok.is_alive(), "the other repo waits behind the hung request"
        assert ok_out == [chatml_files(1000)["config.json"].encode()]
        hung.join(10)
        assert isinstance(hung_out[0], TooSlow)
        assert rule.hits == 1
        assert hostile_hub.sent[rule.name] < 10_000  # the drip had not ended
    finally:
        reader.http.gate.abort()


def test_a_request_waiting_on_a_silent_hub_gives_its_slot_up(hostile_hub):
    """One slot, a request whose server never answers (a 60 s timeout): after SLOT_LEASE it
    gives its slot to the next request, which is answered while the first still waits."""
    hostile_hub.add_repo("org/hung", chatml_files())
    hostile_hub.add_repo("org/ok", chatml_files(1000))
    hold = hostile_hub.hold(r"^/org/hung/resolve/")
    reader = HubReader(timeout=60, workers=1)
    hung, hung_out = _in_thread(reader.read_file, "org/hung", "main", "config.json")
    try:
        assert hold.arrived.wait(10)
        ok, ok_out = _in_thread(reader.read_file, "org/ok", "main", "config.json")
        ok.join(10)
        assert not ok.is_alive(), "the other repo waits behind the silent request"
        assert ok_out == [chatml_files(1000)["config.json"].encode()]
        assert hung.is_alive()  # still waiting: it gave its slot up, not its request
        assert not hung_out
        assert reader.http.stats["slow"] == 1
    finally:
        reader.http.gate.abort()
        hold.release()


def _arrived(hub, path: str) -> bool:
    """Wait (bounded) until a request for ``path`` reached the hub."""
    for _ in range(1000):
        if any(r.path.startswith(path) for r in hub.request_log):
            return True
        threading.Event().wait(0.01)
    return False


def _resolve_held(hostile_hub):
    """A repo resolved in a thread, its info request held by the Hub once it has arrived."""
    hostile_hub.add_repo("org/m", chatml_files())
    hold = hostile_hub.hold(r"^/api/models/org/m/")
    reader = HubReader(timeout=60)
    thread, out = _in_thread(reader.resolve, HubEntry("org/m"))
    if not hold.arrived.wait(10):
        hold.release()
        raise AssertionError("the info request never reached the Hub")
    return hold, reader, thread, out


def test_aborting_ends_a_request_blocked_on_a_silent_hub(hostile_hub):
    """A second Ctrl-C or a server shutting down (the gate aborted) ends a request whose
    server says nothing, without waiting for its timeout."""
    hold, reader, thread, out = _resolve_held(hostile_hub)
    try:
        reader.http.gate.abort()
        thread.join(10)
        assert not thread.is_alive(), "the request waited on"
        assert isinstance(out[0], Stopped)
    finally:
        hold.release()


def test_stopping_lets_a_request_on_the_network_finish_and_starts_no_other(hostile_hub):
    """The first Ctrl-C (the gate stopped) stops early but whole: a request already sent is
    answered and counted as it was; the next one does not start."""
    hold, reader, thread, out = _resolve_held(hostile_hub)
    try:
        reader.http.gate.stop()
        hold.release()
        thread.join(10)
        assert not thread.is_alive(), "the request was never answered"
        assert out[0].sha == hostile_hub.repos["org/m"].head
        assert reader.http.stats["requests"] == 1
        with pytest.raises(Stopped):
            reader.read_file("org/m", out[0].sha, "config.json")
        assert reader.http.stats["requests"] == 1
    finally:
        hold.release()
        reader.http.gate.abort()
