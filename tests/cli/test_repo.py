"""The command line: exit codes, stdout/stderr, --diff, file arguments, explain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from eosfix.cli import main
from eosfix.render import report
from tests.conftest import ROOT


def test_exit_code_constants_are_pinned():
    assert (report.EXIT_OK, report.EXIT_FINDINGS, report.EXIT_INPUT, report.EXIT_INTERNAL) == (
        0,
        1,
        2,
        3,
    )


def test_check_broken_repo_exits_1_and_writes_nothing(sample_repo, run_eosfix):
    repo = sample_repo("chatml-missing-im-end")
    before = (repo / "generation_config.json").read_bytes()
    result = run_eosfix("check", repo)
    assert result.exit_code == 1
    assert (
        f"{repo}/generation_config.json: EOS001 eos_token_id 248044 does not include "
        "<|im_end|> (248046)" in result.stdout
    )
    assert result.stdout.rstrip().endswith("1 repo would be fixed")
    assert (repo / "generation_config.json").read_bytes() == before


def test_fix_diff_shows_unified_diff_and_writes_nothing(sample_repo, run_eosfix, monkeypatch):
    """The patch alone on stdout, named relative to the current folder (here the
    repo itself), the report on stderr (never mixed into the patch)."""
    repo = sample_repo("chatml-missing-im-end")
    before = (repo / "generation_config.json").read_bytes()
    monkeypatch.chdir(repo)
    result = run_eosfix("fix", "--diff", ".")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/generation_config.json\n+++ b/generation_config.json")
    assert (
        '-  "eos_token_id": 248044,\n+  "eos_token_id": [\n+    248044,\n+    248046\n+  ],'
        in result.stdout
    )
    assert (repo / "generation_config.json").read_bytes() == before
    assert "EOS001" not in result.stdout
    assert "EOS001" in result.stderr
    assert result.stderr.rstrip().endswith("1 repo would be fixed")


def test_fix_exit_zero_even_if_changed(sample_repo, run_eosfix):
    repo = sample_repo("chatml-missing-im-end")
    result = run_eosfix("fix", "--exit-zero-even-if-changed", repo)
    assert result.exit_code == 0
    assert "Fixing" in result.stderr
    assert json.loads((repo / "generation_config.json").read_text())["eos_token_id"] == [
        248044,
        248046,
    ]


def test_file_arguments_are_grouped_by_folder(sample_repo, run_eosfix):
    """pre-commit passes file names; each folder is one repo, unrelated files are ignored."""
    repo = sample_repo("named-templates")
    other = sample_repo("llama3-healthy")
    args = [
        repo / "generation_config.json",
        repo / "additional_chat_templates/tool_use.jinja",
        repo / "tokenizer_config.json",
        other / "config.json",
        other / "README.md",
    ]
    (other / "README.md").write_text("hi")
    result = run_eosfix("check", "--format", "json", *args)
    names = [r["path"] for r in json.loads(result.stdout)["repos"]]
    assert names == [str(repo), str(other)]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_clean_repo_exits_0(fmt, sample_repo, run_eosfix):
    result = run_eosfix("check", "--format", fmt, sample_repo("llama3-healthy"))
    assert result.exit_code == 0
    if fmt == "json":
        (entry,) = json.loads(result.stdout)["repos"]
        assert entry["status"] == "ok"
        assert entry["proposed_eos_token_id"] is None
        assert entry["eos_token_id"] == [128001, 128009]


def test_base_model_reports_no_template_and_exits_0(sample_repo, run_eosfix):
    result = run_eosfix("check", sample_repo("base-model"))
    assert result.exit_code == 0
    assert "no chat template: nothing to check" in result.stdout


def test_json_fix_reports_written_files(sample_repo, run_eosfix):
    repo = sample_repo("glm-next-turn-opener")
    (entry,) = json.loads(run_eosfix("fix", "--format", "json", repo).stdout)["repos"]
    assert entry["written"] == ["generation_config.json"]
    # the keys describe the repo as written; "before" is what fix found
    assert entry["status"] == "ok"
    assert entry["eos_token_id"] == [151329, 151336, 151338]
    assert entry["proposed_eos_token_id"] is None
    assert entry["before"]["status"] == "fixable"
    assert entry["before"]["eos_token_id"] == [151329]
    assert [f["code"] for f in entry["before"]["findings"]] == ["EOS001"]
    assert [t["kind"] for t in entry["terminators"]] == ["next_turn_opener"] * 2


def test_missing_path_is_a_usage_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope" / "config.json")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_unreadable_repo_is_one_line_on_stderr(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    assert main(["check", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1
    assert err.startswith(f"error: {tmp_path}/config.json: invalid JSON")
    assert "Traceback" not in out + err


def test_explain_shows_probe_evidence_and_loop_ids(sample_repo, run_eosfix):
    repo = sample_repo("reasoning-channel")
    result = run_eosfix("explain", repo)
    assert result.exit_code == 1
    out = result.stdout
    assert "probe final" in out
    assert "<|call|> ends a turn (tool call)" in out
    assert "stop when the sampled id is in [200002, 199999, 200012]" in out
    payload = json.loads(run_eosfix("explain", "--format", "json", repo).stdout)
    assert payload["loop"]["stop_ids"] == [200002, 199999, 200012]
    assert any(p["probe"] == "final" and p["text"] for p in payload["probes"])


def test_version(run_eosfix):
    from eosfix import __version__

    assert run_eosfix("--version").stdout.strip() == f"eosfix, version {__version__}"


def test_internal_error_gives_exit_3_and_hint(monkeypatch, sample_repo, capsys):
    import eosfix.pipeline

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(eosfix.pipeline, "check", boom)
    monkeypatch.delenv("EOSFIX_DEBUG", raising=False)
    assert main(["check", str(sample_repo("llama3-healthy"))]) == 3
    err = capsys.readouterr().err
    assert "kaboom" in err
    assert "EOSFIX_DEBUG=1" in err
    assert "Traceback" not in err


# --- one exit-code rule; Ctrl-C and SIGTERM ---------------------------------------------------


def test_one_exit_code_rule_for_commands_and_batches():
    from eosfix.core import outcome
    from eosfix.decide.check import Status

    assert {s.value for s in Status} <= set(outcome.VERDICTS)  # verdict_of speaks Status
    assert outcome.EXIT_INTERRUPTED == 130
    rule = outcome.exit_code
    assert rule({}) == 2  # nothing checked
    assert rule({"ok": 3, "no_template": 1}) == 0
    assert rule({"ok": 3, "warned": 1}) == 0
    assert rule({"ok": 3, "warned": 1}, strict=True) == 1
    for failing in ("fixed", "fixable", "problems"):
        assert rule({"ok": 1, failing: 1}) == 1
    assert rule({"fixable": 1, "error": 1}) == 2  # unreadable input wins over findings
    assert rule({"ok": 1}, failed=True) == 2  # a listing, a corrupted cache entry, a PR...


@pytest.mark.parametrize("command", ["check", "fix", "explain", "cache"])
def test_ctrl_c_exits_130_with_one_line(command, monkeypatch, sample_repo, tmp_path, capsys):
    from eosfix.decide import check

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "check", interrupted)  # the one check every container goes through
    repo = sample_repo("chatml-missing-im-end")
    if command == "cache":
        from tests.support.cachebuilder import CacheBuilder, chatml_files

        cache = CacheBuilder(tmp_path / "hub")
        cache.add_revision("org/chat", chatml_files())
        args = ["cache", "--cache-dir", str(cache.root)]
    else:
        args = [command, str(repo)]
    assert main(args) == 130
    # not click's "Aborted!" and exit 1 (which means findings); a batch says what it did and
    # what it did not
    said = (
        "interrupted: 0 snapshots checked, 1 not checked" if command == "cache" else "interrupted"
    )
    assert capsys.readouterr().err == said + "\n"


_WAITS = """
import sys, time
import eosfix.decide.check
from eosfix.cli import main

def wait(*args, **kwargs):
    print("ready", flush=True)
    time.sleep(60)

eosfix.decide.check.check = wait
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_command_with_130(signum, sample_repo):
    repo = sample_repo("chatml-missing-im-end")
    before = (repo / "generation_config.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", _WAITS, "fix", str(repo)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == "interrupted\n"
    assert (repo / "generation_config.json").read_bytes() == before
