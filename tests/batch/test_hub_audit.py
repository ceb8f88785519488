"""`eosfix hub --author`: an organisation audit through the batch engine, against FakeHub.

Requests per repo, reuse of files by commit, rate limits (429 + Retry-After, fixed-window
quotas), transient 5xx and timeouts, resumable state files (with a real SIGINT), pull
requests across an organisation, and the csv/markdown/json reports.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eosfix.batch.hub import HubSource
from eosfix.batch.pool import RETRY_CODE
from eosfix.batch.run import Run
from eosfix.sources.hub import http as hubhttp
from eosfix.sources.hub.read import HubReader, fetch_repo_files
from tests.conftest import ROOT
from tests.support.cachebuilder import chatml_files
from tests.support.hubrepos import CHATML_TOKENS, chatml_org, sample_files, tokenizer_json

RELEVANT = {"chat_template.jinja", "config.json", "generation_config.json", "tokenizer_config.json"}


def audit(run_eosfix, *args: str) -> tuple[int, dict, str]:
    result = run_eosfix("hub", "--author", "org", "--format", "json", *args)
    return result.exit_code, json.loads(result.stdout), result.stderr


def by_repo(payload: dict) -> dict[str, dict]:
    return {e["repo_id"]: e for e in payload["repos"]}


def requests_since(fake_hub, start: int) -> list[tuple[str, str]]:
    return fake_hub.requests[start:]


# --- requests: a listing, then one GET per small file; nothing the second time ---------------


def test_first_audit_lists_by_pages_then_gets_each_small_file_once(fake_hub, run_eosfix):
    ids = chatml_org(fake_hub, 5)
    fake_hub.page_size = 2  # three pages, followed through their Link headers
    code, payload, _ = audit(run_eosfix)
    assert code == 1
    assert [e["repo_id"] for e in payload["repos"]] == ids
    listing = [p for m, p in fake_hub.requests if p == "/api/models"]
    assert len(listing) == 3
    assert [r.query.get("cursor") for r in fake_hub.request_log if r.path == "/api/models"] == [
        None,
        ["2"],
        ["4"],
    ]
    assert all(m != "HEAD" for m, _ in fake_hub.requests)  # no HEAD
    assert not [p for _, p in fake_hub.requests if "/revision/" in p]  # no info call
    for repo_id in ids:
        assert sorted(fake_hub.downloads(repo_id)) == sorted(RELEVANT)  # each once, no weights
    assert len(fake_hub.requests) == 3 + 4 * 5
    summary = payload["summary"]
    assert summary["repos"] == 5
    assert summary["requests"] == len(fake_hub.requests)
    assert (summary["fixable"], summary["ok"]) == (3, 2)
    entry = by_repo(payload)["org/m001"]
    assert entry["sha"] == fake_hub.repos["org/m001"].head
    assert entry["proposed_eos_token_id"] == [1010, 1012]
    assert entry["verdict"] == "fixable"


def test_second_audit_of_an_unchanged_org_only_reads_the_listing(fake_hub, run_eosfix):
    chatml_org(fake_hub, 5)
    fake_hub.page_size = 2
    _, first, _ = audit(run_eosfix)
    start = len(fake_hub.requests)
    code, second, _ = audit(run_eosfix)
    assert code == 1
    assert requests_since(fake_hub, start) == [("GET", "/api/models")] * 3
    assert second["repos"] == first["repos"]
    assert second["summary"]["requests"] == 3


def test_a_changed_repo_is_fetched_again_the_others_are_not(fake_hub, run_eosfix):
    chatml_org(fake_hub, 4)
    audit(run_eosfix)
    fake_hub.push("org/m002", {"generation_config.json": '{"eos_token_id": [1020, 1022]}\n'})
    start = len(fake_hub.requests)
    _, payload, _ = audit(run_eosfix)
    fetched = {
        p.split("/resolve/")[0] for _, p in requests_since(fake_hub, start) if "/resolve/" in p
    }
    assert fetched == {"/org/m002"}
    assert by_repo(payload)["org/m002"]["verdict"] == "ok"


def test_tokenizer_json_only_when_an_id_lives_only_there(fake_hub, run_eosfix):
    files = sample_files("chatml-missing-im-end")
    tok = json.loads(files["tokenizer_config.json"])
    del tok["added_tokens_decoder"]  # transformers 5 layout
    files["tokenizer_config.json"] = json.dumps(tok).encode()
    files["tokenizer.json"] = tokenizer_json(CHATML_TOKENS)
    fake_hub.add_repo("org/tf5", files)
    fake_hub.add_repo("org/plain", sample_files("chatml-missing-im-end"))
    fake_hub.repos["org/plain"].files["tokenizer.json"] = tokenizer_json(CHATML_TOKENS)
    _, payload, _ = audit(run_eosfix)
    assert by_repo(payload)["org/tf5"]["proposed_eos_token_id"] == [248044, 248046]
    assert fake_hub.downloads("org/tf5").count("tokenizer.json") == 1
    assert "tokenizer.json" not in fake_hub.downloads("org/plain")
    start = len(fake_hub.requests)
    _, again, _ = audit(run_eosfix)
    assert requests_since(fake_hub, start) == [("GET", "/api/models")]
    assert again["repos"] == payload["repos"]


def test_fetch_repo_files_brings_one_repo_into_a_folder(fake_hub):
    (repo_id,) = chatml_org(fake_hub, 1)
    fetched = fetch_repo_files(repo_id)
    assert fetched.sha == fake_hub.repos[repo_id].head
    assert {p.name for p in fetched.path.iterdir()} == RELEVANT
    for name in RELEVANT:
        assert (fetched.path / name).read_bytes() == fake_hub.repos[repo_id].files[name]
    start = len(fake_hub.requests)
    assert fetch_repo_files(repo_id, fetched.sha).path == fetched.path  # by commit: no request
    assert requests_since(fake_hub, start) == []


def test_a_half_written_snapshot_is_rebuilt(fake_hub, run_eosfix):
    repo_id = chatml_org(fake_hub, 2)[1]
    fetched = fetch_repo_files(repo_id)
    fetched.path.with_name(fetched.sha + ".json").unlink()  # crashed before its manifest
    (fetched.path / "config.json").unlink()
    code, payload, _ = audit(run_eosfix)
    assert code == 1
    assert by_repo(payload)[repo_id]["verdict"] == "fixable"
    assert (fetched.path / "config.json").exists()


# --- reliability -----------------------------------------------------------------------------


@pytest.fixture
def real_waits(monkeypatch):
    """Undo the fixture's instant waits: these tests measure that eosfix really waits."""
    monkeypatch.setattr(hubhttp, "_clock", time.monotonic)
    monkeypatch.setattr(hubhttp, "_sleep", lambda seconds, stopping: stopping.wait(seconds))


def test_429_retry_after_pauses_every_request_of_its_bucket(
    fake_hub, run_eosfix, real_waits, monkeypatch
):
    chatml_org(fake_hub, 6)
    fake_hub.fail("*", 429, times=1, match="/resolve/", headers={"Retry-After": "1"})
    # What the client did, in its own order of events: when each request started (a slot
    # taken) and each pause (set at, until). Other threads may start requests between the
    # 429 reaching the server and the client reading it, however long that takes on a busy
    # machine; once the pause is set, no file request may start before it ends.
    starts: list[tuple[str, float]] = []
    pauses: list[tuple[float, float]] = []
    real_acquire, real_refused = hubhttp.RateGate.acquire, hubhttp.Bucket.refused

    def acquire(self, bucket=hubhttp.RESOLVERS):
        started = real_acquire(self, bucket)
        starts.append((bucket, started))
        return started

    def refused(self, headers, now, wait):
        real_refused(self, headers, now, wait)
        pauses.append((self.name, now, self.paused_until))  # under the gate's lock

    monkeypatch.setattr(hubhttp.RateGate, "acquire", acquire)
    monkeypatch.setattr(hubhttp.Bucket, "refused", refused)
    code, payload, _ = audit(run_eosfix, "--workers", "4")
    assert code == 1
    assert payload["summary"]["error"] == 0
    assert payload["summary"]["rate_limited"] == 1
    assert [name for name, _, _ in pauses] == [hubhttp.RESOLVERS]
    for _, set_at, until in pauses:
        assert until - set_at >= 1.0
        during = [t for b, t in starts if set_at < t < until and b == hubhttp.RESOLVERS]
        assert during == []  # no file request starts during the pause
    log = fake_hub.request_log
    limited = next(i for i, r in enumerate(log) if r.status == 429)
    later = [r.time for r in log[limited + 1 :]]
    assert max(later) - log[limited].time >= 1.0


def test_fixed_window_quota_is_waited_out(fake_hub, run_eosfix, real_waits):
    """The Hub's own scheme: N requests per window, 429 + Retry-After + RateLimit headers."""
    chatml_org(fake_hub, 12)
    fake_hub.rate_limit(30, window=1.0)  # 48 file requests: two windows at least
    t = time.monotonic()
    code, payload, _ = audit(run_eosfix, "--workers", "8")
    assert code == 1
    assert payload["summary"]["error"] == 0
    assert len(payload["repos"]) == 12
    assert time.monotonic() - t >= 1.0
    answered = [r for r in fake_hub.request_log if "/resolve/" in r.path and r.status == 200]
    assert len(answered) == 48


def test_concurrency_shrinks_under_429s_and_grows_back(fake_hub):
    chatml_org(fake_hub, 30)
    # 5 429s: fewer than MAX_ATTEMPTS, so even if every one hits the same file it succeeds
    fake_hub.fail("*", 429, times=5, match="/resolve/", headers={"Retry-After": "0"})
    reader = HubReader(workers=8)
    run = Run(HubSource(reader, author="org")).drain()
    gate = reader.http.gate
    assert run.counts()["error"] == 0
    assert gate.lowest < 8  # halved on 429s...
    assert gate.limit == 8  # ... and back up after enough successes
    assert reader.http.stats["rate_limited"] == 5
    assert fake_hub.backoff_sleeps  # Retry-After: 0 still pauses (jitter only)
    assert all(s < 2 for s in fake_hub.backoff_sleeps)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_transient_server_errors_are_retried(fake_hub, run_eosfix, status):
    chatml_org(fake_hub, 3)
    fake_hub.fail("org/m001", status, times=2, match="/resolve/")
    code, payload, stderr = audit(run_eosfix)
    assert code == 1
    assert payload["summary"]["error"] == 0
    assert payload["summary"]["retries"] == 2
    assert stderr == ""
    sleeps = fake_hub.backoff_sleeps
    assert len(sleeps) == 2
    assert all(0 <= s <= hubhttp.MAX_WAIT for s in sleeps)  # full jitter, capped


def test_timeouts_and_dropped_connections_are_retried(fake_hub, run_eosfix):
    chatml_org(fake_hub, 3)
    fake_hub.fail("org/m000", 200, times=1, delay=1.0, match="/resolve/")
    fake_hub.fail("org/m002", 0, times=1, match="/resolve/")
    code, payload, _ = audit(run_eosfix, "--timeout", "0.3")
    assert code == 1
    assert payload["summary"]["error"] == 0
    assert payload["summary"]["retries"] == 2


def test_a_repo_that_keeps_failing_gets_its_line_and_the_audit_goes_on(fake_hub, run_eosfix):
    chatml_org(fake_hub, 3)
    fake_hub.fail("org/m001", 500, match="/resolve/")
    result = run_eosfix("hub", "--author", "org")
    assert result.exit_code == 2
    assert result.stderr.strip() == "org/m001: error: Hub server error (500)"
    tries = [p for _, p in fake_hub.requests if p.startswith("/org/m001/resolve/")]
    assert len(tries) == hubhttp.MAX_ATTEMPTS  # bounded
    assert "1 repo would be fixed" in result.stdout
    assert "1 repo could not be checked" in result.stdout


def test_listing_failure_is_one_line(fake_hub, run_eosfix):
    chatml_org(fake_hub, 2)
    fake_hub.fail("*", 403, match="^/api/models$", headers={"X-Error-Code": None})
    result = run_eosfix("hub", "--author", "org")
    assert result.exit_code == 2
    assert result.stderr.strip() == "org: error: access denied (403)"


# --- resumable: --state ----------------------------------------------------------------------


def read_state(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_state_file_skips_unchanged_repos_and_rechecks_changed_ones(fake_hub, run_eosfix, tmp_path):
    chatml_org(fake_hub, 4)
    state = tmp_path / "audit.jsonl"
    code, first, _ = audit(run_eosfix, "--state", str(state))
    records = read_state(state)
    assert [r["repo_id"] for r in records] == [f"org/m00{i}" for i in range(4)]
    assert all(r["sha"] == fake_hub.repos[r["repo_id"]].head for r in records)
    fake_hub.push("org/m003", {"README.md": "new\n"})
    start = len(fake_hub.requests)
    code, second, _ = audit(run_eosfix, "--state", str(state))
    assert code == 1
    assert second["summary"]["resumed"] == 3
    assert {e["repo_id"] for e in second["repos"] if e.get("resumed")} == {
        "org/m000",
        "org/m001",
        "org/m002",
    }
    entries = by_repo(second)
    assert entries["org/m001"]["verdict"] == "fixable"  # the record's verdict
    assert [r["repo_id"] for r in read_state(state)[4:]] == ["org/m003"]
    fetched = {
        p.split("/resolve/")[0] for _, p in requests_since(fake_hub, start) if "/resolve/" in p
    }
    assert fetched == {"/org/m003"}  # a new commit: its files are fetched again
    assert second["summary"]["fixable"] == first["summary"]["fixable"]


def test_state_file_cut_short_is_repaired_and_garbage_refused(fake_hub, run_eosfix, tmp_path):
    chatml_org(fake_hub, 2)
    state = tmp_path / "s.jsonl"
    audit(run_eosfix, "--state", str(state))
    whole = state.read_bytes()
    state.write_bytes(whole + b'{"repo_id": "org/m0')  # a line cut by a hard stop
    _, payload, _ = audit(run_eosfix, "--state", str(state))
    assert payload["summary"]["resumed"] == 2
    assert state.read_bytes() == whole  # the partial line is gone, nothing glued to it
    state.write_text("not json\n")
    result = run_eosfix("hub", "--author", "org", "--state", str(state))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {state}: line 1 is not an eosfix state record"


def test_ctrl_c_leaves_a_consistent_state_file_and_the_rerun_goes_on(fake_hub, tmp_path):
    ids = chatml_org(fake_hub, 40)
    # Requests about m010-m039 are held until the Ctrl-C has been sent: the run is always
    # mid-way when it comes, however fast or slow the machine is.
    held = threading.Event()
    fake_hub.fail("*", 200, match=r"org/m0[1-3][0-9]", until=held)
    state = tmp_path / "audit.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "eosfix", "hub", "--author", "org", "--state", str(state)]
    proc = subprocess.Popen(
        [*args, "--workers", "2", "--format", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not state.exists() or state.read_text().count("\n") < 5:  # 5 repos recorded
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    finally:
        held.set()
    _, err = proc.communicate(timeout=120)
    fake_hub.clear_failures()
    assert proc.returncode == 130, err
    assert "interrupted:" in err
    assert "Traceback" not in err
    text = state.read_text()
    assert text.endswith("\n")
    done = read_state(state)  # every line whole
    assert 5 <= len(done) < 40
    assert len({r["repo_id"] for r in done}) == len(done)
    # A record of a repo that failed (on a loaded machine a held request can time out) or
    # could not finish (EOS103) is checked again, by design; every other record is resumed.
    retried = {
        r["repo_id"] for r in done if r["verdict"] == "error" or RETRY_CODE in r.get("codes", ())
    }
    done = [r for r in done if r["repo_id"] not in retried]
    assert done, retried  # the repos nothing held (m000-m009) finished
    start = len(fake_hub.request_log)
    rerun = subprocess.run(
        [*args, "--format", "json"], env=env, capture_output=True, text=True, check=False
    )
    assert rerun.returncode == 1, rerun.stderr
    payload = json.loads(rerun.stdout)
    assert [e["repo_id"] for e in payload["repos"]] == ids
    assert payload["summary"]["resumed"] == len(done)
    refetched = {r.repo_id for r in fake_hub.request_log[start:] if "/resolve/" in r.path} & {
        r["repo_id"] for r in done
    }
    assert refetched == set()
    assert len(read_state(state)) == 40


# --- pull requests across an organisation -----------------------------------------------------


def test_max_prs_dry_run_and_no_duplicates(fake_hub, run_eosfix):
    chatml_org(fake_hub, 6)  # m001, m002, m004, m005 are fixable
    fixable = ["org/m001", "org/m002", "org/m004", "org/m005"]
    result = run_eosfix("hub", "--author", "org", "--pr", "--dry-run", "--max-prs", "3")
    assert result.exit_code == 1, result.output
    assert not fake_hub.commits_received
    for repo_id in fixable[:3]:
        assert f"{repo_id}: pull request would open (dry run)" in result.stdout
    assert "org/m005: pull request not opened: --max-prs 3 reached" in result.stdout

    result = run_eosfix("hub", "--author", "org", "--pr", "--max-prs", "2")
    assert [c["repo_id"] for c in fake_hub.commits_received] == fixable[:2]
    assert "; 2 pull requests opened; " in result.stdout.splitlines()[-1]
    assert "org/m004: pull request not opened: --max-prs 2 reached" in result.stdout

    _, payload, _ = audit(run_eosfix, "--pr", "--max-prs", "2")
    assert [c["repo_id"] for c in fake_hub.commits_received] == fixable  # 2 more, no duplicate
    entries = by_repo(payload)
    assert entries["org/m001"]["pr"] == "already open"
    assert entries["org/m004"]["pr_created"] is True
    assert payload["summary"]["prs_opened"] == 2

    result = run_eosfix("hub", "--author", "org", "--pr", "--dry-run")
    assert len(fake_hub.commits_received) == 4
    assert result.stdout.count("pull request already open") == 4


def test_pr_flags_need_pr(run_eosfix):
    from eosfix.cli import main

    assert main(["hub", "--author", "org", "--max-prs", "2"]) == 2
    assert main(["hub", "--author", "org", "--dry-run"]) == 2


# --- reports ---------------------------------------------------------------------------------


def test_json_is_streamed_as_the_whole_document_would_be_dumped(fake_hub, run_eosfix):
    chatml_org(fake_hub, 3)
    result = run_eosfix("hub", "--author", "org", "--format", "json")
    payload = json.loads(result.stdout)
    assert list(payload) == ["author", "repos", "errors", "summary", "exit_code"]
    assert result.stdout == json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def test_csv_report(fake_hub, run_eosfix):
    chatml_org(fake_hub, 3)
    result = run_eosfix("hub", "--author", "org", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["repo_id"] for r in rows] == ["org/m000", "org/m001", "org/m002"]
    m001 = rows[1]
    assert (m001["revision"], m001["commit"]) == ("main", fake_hub.repos["org/m001"].head)
    assert m001["verdict"] == "fixable"
    assert m001["ends_a_turn"] == "<|im_end|> 1012"
    assert (m001["eos_token_id"], m001["proposed_eos_token_id"]) == ("1010", "[1010, 1012]")
    assert result.stderr.strip().startswith("2 repos would be fixed")


def test_markdown_report_is_a_table_to_paste(fake_hub, run_eosfix):
    chatml_org(fake_hub, 3)
    fake_hub.fail("org/m002", 404)
    run_eosfix("hub", "--author", "org", "--pr", "--max-prs", "1")
    result = run_eosfix("hub", "--author", "org", "--format", "markdown")
    lines = result.stdout.splitlines()
    assert lines[0] == "| repo | revision | ends a turn | eos now | verdict | pull request |"
    assert lines[1] == "| --- | --- | --- | --- | --- | --- |"
    rev = {r: f"{fake_hub.repos[r].head[:8]} (main)" for r in ("org/m000", "org/m001", "org/m002")}
    assert (
        lines[2]
        == f"| `org/m000` | {rev['org/m000']} | `<\\|im_end\\|>` 1002 | [1000, 1002] | ok |  |"
    )
    assert lines[3] == (
        f"| `org/m001` | {rev['org/m001']} | `<\\|im_end\\|>` 1012 | 1010 | runs on -> [1010, 1012] |  |"
    )
    assert (
        lines[4]
        == f"| `org/m002` | {rev['org/m002']} | - | - | error: repository not found (404) |  |"
    )
    assert lines[5] == ""
    assert lines[6].startswith("1 repo would be fixed")
    # then the report's sections: the error counted with the verdicts, the repo to fix first
    assert lines[7:12] == ["", "## Verdicts", "", "| verdict | repos |", "| --- | --- |"]
    assert {"| ok | 1 |", "| runs on | 1 |", "| error | 1 |"} <= set(lines[12:15])
    first = lines[lines.index("## What to fix first (by downloads)") + 4 :]
    assert first == ["| `org/m001` | 0 | runs on -> [1010, 1012] |"]
    url = f"{fake_hub.url}/org/m001/discussions/1"
    with_pr = run_eosfix("hub", "--author", "org", "--format", "markdown", "--pr")
    assert f"| [already open]({url}) |" in with_pr.stdout


def test_repo_ids_and_author_together_and_explicit_ids_resume(fake_hub, run_eosfix, tmp_path):
    chatml_org(fake_hub, 2)
    fake_hub.add_repo("other/x", sample_files("llama3-healthy"))
    state = tmp_path / "s.jsonl"
    args = ("hub", "other/x", "--author", "org", "--format", "json", "--state", str(state))
    first = json.loads(run_eosfix(*args).stdout)
    assert [e["repo_id"] for e in first["repos"]] == ["other/x", "org/m000", "org/m001"]
    start = len(fake_hub.requests)
    second = json.loads(run_eosfix(*args).stdout)
    assert second["summary"]["resumed"] == 3
    # the explicit id still needs its info call to know its commit; nothing else
    assert sorted(requests_since(fake_hub, start)) == [
        ("GET", "/api/models"),
        ("GET", "/api/models/other/x/revision/main"),
    ]


# --- tokenizer-only repos ---------------------------------------------------


def tokenizer_only_files() -> dict[str, bytes | str]:
    """A tokenizer re-hosted on its own (Xenova/Llama-3.2-Tokenizer): a template, its tokens,
    no config.json, no generation_config.json, no weights."""
    files = chatml_files(1000)
    return {k: v for k, v in files.items() if k in ("tokenizer_config.json", "chat_template.jinja")}


def test_tokenizer_only_repo_is_not_a_model_for_any_runtime_and_gets_no_pr(fake_hub, run_eosfix):
    chatml_org(fake_hub, 2)  # m001 is fixable
    fake_hub.add_repo("org/tokenizer", tokenizer_only_files())
    code, payload, _ = audit(run_eosfix, "--pr")
    assert code == 1  # m001's fix; the tokenizer repo adds nothing to fix
    entry = by_repo(payload)["org/tokenizer"]
    assert entry["verdict"] == "not_a_model"
    assert entry["proposed_eos_token_id"] is None
    assert entry["findings"] == []
    assert entry["runtimes"]
    assert not any(r["applicable"] for r in entry["runtimes"])
    assert "pr" not in entry or entry["pr"] is None
    assert [c["repo_id"] for c in fake_hub.commits_received] == ["org/m001"]
    assert payload["summary"]["not_a_model"] == 1
    table = run_eosfix("hub", "--author", "org")
    (line,) = [ln for ln in table.stdout.splitlines() if "org/tokenizer" in ln]
    assert "not a model repo" in line
    assert "1 repo with no model (tokenizer files only)" in table.stdout
    one = run_eosfix("hub", "org/tokenizer", "--pr")
    assert one.exit_code == 0, one.output
    assert "org/tokenizer: not a model repo: no config.json, generation_config.json or weights" in (
        one.stdout
    )
    assert len(fake_hub.commits_received) == 1


def test_a_repo_with_weights_or_a_config_is_a_model(fake_hub, run_eosfix):
    """Only the whole file list decides: weights, or either config, make it a model."""
    fake_hub.add_repo("org/weights", {**tokenizer_only_files(), "model.safetensors": b"\0" * 8})
    fake_hub.add_repo("org/gen", {**tokenizer_only_files(), "generation_config.json": "{}\n"})
    _, payload, _ = audit(run_eosfix)
    assert {e["repo_id"]: e["verdict"] for e in payload["repos"]} == {
        "org/gen": "fixable",
        "org/weights": "fixable",
    }


# --- a rerun with --state: carried-over PRs and whole entries ----------


def test_a_rerun_reports_carried_over_prs_as_opened_earlier(fake_hub, run_eosfix, tmp_path):
    chatml_org(fake_hub, 3)  # m001, m002 are fixable
    state = tmp_path / "s.jsonl"
    first = run_eosfix("hub", "--author", "org", "--pr", "--state", state)
    assert first.stdout.count(": pull request opened: ") == 2
    assert "; 2 pull requests opened; " in first.stdout
    second = run_eosfix("hub", "--author", "org", "--pr", "--state", state)
    assert ": pull request opened: " not in second.stdout
    for repo_id in ("org/m001", "org/m002"):
        url = f"{fake_hub.url}/{repo_id}/discussions/1"
        assert f"{repo_id}: pull request opened earlier (#1): {url}" in second.stdout
    summary = second.stdout.splitlines()[-1]
    assert "; 0 pull requests opened; 2 pull requests opened earlier (--state); " in summary
    _, payload, _ = audit(run_eosfix, "--pr", "--state", str(state))
    entries = by_repo(payload)
    for repo_id in ("org/m001", "org/m002"):
        assert entries[repo_id]["pr"] == "opened earlier"
        assert entries[repo_id]["pr_created"] is False
        assert entries[repo_id]["pr_num"] == 1
    assert sum(e["pr_created"] for e in payload["repos"]) == payload["summary"]["prs_opened"] == 0
    assert payload["summary"]["prs_opened_earlier"] == 2
    assert len(fake_hub.commits_received) == 2


def test_a_resumed_entry_has_every_key_of_a_fresh_one(fake_hub, run_eosfix, tmp_path):
    """JSON loses nothing on a resumed run: the record is re-derived from the store (no
    request for its files), so the entry is the one a fresh check gives, plus resumed."""
    chatml_org(fake_hub, 3)
    state = tmp_path / "s.jsonl"
    _, fresh, _ = audit(run_eosfix, "--state", str(state))
    start = len(fake_hub.requests)
    _, again, _ = audit(run_eosfix, "--state", str(state))
    assert again["summary"]["resumed"] == 3
    assert requests_since(fake_hub, start) == [("GET", "/api/models")]
    for old, new in zip(fresh["repos"], again["repos"], strict=True):
        assert list(new) == list(old)
        assert (old["resumed"], new["resumed"]) == (False, True)
        assert {**new, "resumed": False} == old
    for name in ("text", "csv", "markdown"):  # the compact formats read the record alone
        result = run_eosfix("hub", "--author", "org", "--state", state, "--format", name)
        assert result.exit_code == 1, result.output


def test_a_commit_published_twice_keeps_the_first_snapshot(tmp_path):
    """Two repos with one commit (identical files) are fetched by two threads: the second
    publish must not replace the folder the first repo's analysis is reading (it did: 'not a
    directory' errors when two repos of an org shared a commit)."""
    from eosfix.sources.hub.store import Manifest, Store

    store = Store(tmp_path / "store")
    files = {"config.json": store.add_blob(b"{}\n")}
    commit = "ab" * 20
    first = store.publish(commit, Manifest(files, False))
    inode = first.stat().st_ino
    second = store.publish(commit, Manifest(files, False))
    assert second == first
    assert second.stat().st_ino == inode
    assert (second / "config.json").read_bytes() == b"{}\n"
