"""EOS103 ("could not finish in N s on this machine: retry") is not a verdict: batches run
such a unit once more, never share or resume it, and report the second outcome."""

from __future__ import annotations

import io
import json
from pathlib import Path

from eosfix.analysis import terminators
from eosfix.batch import pool, verdict
from eosfix.batch.cache import CacheRun
from eosfix.batch.state import StateFile
from eosfix.batch.verdict import Verdict
from eosfix.core import limits
from eosfix.core.limits import RenderLimits
from eosfix.render.batch import JSON_DETAIL, write_json
from eosfix.sources import cache as cachelib
from tests.support.cachebuilder import CacheBuilder, chatml_files

UNFINISHED = Verdict("problems", codes=("EOS103",))
FINISHED = Verdict("fixable", codes=("EOS001",))


def _job(*answers: Verdict):
    calls: list[Path] = []

    def job(path: Path, detail) -> Verdict:
        calls.append(path)
        return answers[min(len(calls), len(answers)) - 1]

    return job, calls


def test_an_unfinished_unit_is_run_once_more():
    job, calls = _job(UNFINISHED, FINISHED)
    assert pool.run_job(job, Path("a"), None) == FINISHED
    assert calls == [Path("a"), Path("a")]


def test_the_second_outcome_is_reported_whatever_it_is():
    job, calls = _job(UNFINISHED)
    assert pool.run_job(job, Path("a"), None) == UNFINISHED
    assert len(calls) == 2  # once more, not forever


def test_a_verdict_is_not_retried():
    job, calls = _job(FINISHED)
    assert pool.run_job(job, Path("a"), None) == FINISHED
    assert len(calls) == 1


def _cache(tmp_path: Path) -> cachelib.CacheScan:
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/a", chatml_files(1000))
    b.add_revision("org/b", chatml_files(1000))  # same files: one shared analysis
    b.add_revision("org/good", chatml_files(2000, healthy=True))
    return cachelib.scan_cache(b.root)


def _stall_first_renders(monkeypatch, count: int) -> list[int]:
    """The first ``count`` renders of the process run into the backstop (a stalled machine)."""
    fired: list[int] = []
    real_tick = limits._Budget.tick

    def tick(self: limits._Budget) -> None:
        if len(fired) < count:
            fired.append(1)
            raise limits.RenderDeadline(self.limits.max_seconds)
        real_tick(self)

    monkeypatch.setattr(limits._Budget, "tick", tick)
    return fired


def _json(scan: cachelib.CacheScan) -> dict:
    out = io.StringIO()
    write_json(CacheRun(scan, workers=1, detail=JSON_DETAIL), out)
    return json.loads(out.getvalue())


def test_a_batch_retries_a_unit_that_could_not_finish(tmp_path, monkeypatch):
    scan = _cache(tmp_path)
    idle = _json(scan)
    terminators._memo_analysis.cache_clear()  # the stalled run renders again, as a new process
    fired = _stall_first_renders(monkeypatch, 1)
    stalled = _json(scan)
    assert fired == [1]  # the first analysis did run into the backstop...
    assert stalled == idle  # ...and its retry gave the verdict an idle machine gives
    assert "EOS103" not in json.dumps(stalled)


def test_a_unit_unfinished_twice_is_reported_as_such(tmp_path, monkeypatch):
    """Both attempts of the org/a analysis stall: the batch reports EOS103 for it, never runs
    it a third time, and does not hand that outcome to org/b (the same files): org/b gets an
    analysis of its own."""
    scan = _cache(tmp_path)
    idle = {e["repo_id"]: e for e in _json(scan)["repos"]}
    calls: list[str] = []
    real = verdict.analyze_folder
    default = limits.DEFAULT_LIMITS

    def stalling(path: Path, detail: verdict.Detail) -> Verdict:
        calls.append(path.parts[-3])  # models--org--a
        if len(calls) <= 2:
            monkeypatch.setattr(limits, "DEFAULT_LIMITS", RenderLimits(max_seconds=0.0))
        try:
            return real(path, detail)
        finally:
            monkeypatch.setattr(limits, "DEFAULT_LIMITS", default)

    monkeypatch.setattr(verdict, "analyze_folder", stalling)
    out = _json(scan)
    entries = {e["repo_id"]: e for e in out["repos"]}
    assert calls == ["models--org--a", "models--org--a", "models--org--b", "models--org--good"]
    codes = [f["code"] for f in entries["org/a"]["findings"]]
    assert "EOS103" in codes, codes
    assert entries["org/a"]["status"] == "problems"
    assert entries["org/a"]["proposed_eos_token_id"] is None
    assert entries["org/b"] == idle["org/b"]
    assert entries["org/good"] == idle["org/good"]
    assert out["summary"]["analyses"] == 3


def test_a_state_file_never_resumes_an_unfinished_unit(tmp_path):
    state = StateFile(tmp_path / "s.jsonl")
    state.record("org/a", "1" * 40, UNFINISHED, {})
    state.record("org/b", "2" * 40, FINISHED, {})
    state.close()
    again = StateFile(tmp_path / "s.jsonl")
    assert again.recorded("org/a", "1" * 40) is None  # checked again
    assert again.recorded("org/b", "2" * 40) is not None  # resumed
    again.close()
