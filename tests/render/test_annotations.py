"""``--format github`` (workflow annotations) and ``--format sarif`` (SARIF 2.1.0, validated
against the OASIS schema vendored in tests/schemas/) for check and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosfix.core.codes import CODES
from eosfix.render.annotations import _escape_data, _escape_property
from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support import ggufs

SCHEMA = Path(__file__).parents[1] / "schemas" / "sarif-schema-2.1.0.json"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    copy_repo(SAMPLES / "chatml-missing-im-end", root / "chat")  # EOS001, line 4
    copy_repo(SAMPLES / "stop-inside-turn", root / "models" / "harmony")  # EOS011
    copy_repo(SAMPLES / "plain-text-turns", root / "alpaca")  # EOS005, a warning
    copy_repo(SAMPLES / "llama3-healthy", root / "healthy")
    ids = {"eos": "<|endoftext|>", "eot": "<|endoftext|>", "eom": "<|endoftext|>"}
    ggufs.glm(root / "glm.gguf", ids=ids, tensor=bytes(64))  # EOS201 on metadata keys
    return root


TARGETS = ("chat", "models/harmony", "alpaca", "healthy", "glm.gguf", "missing")


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_github_annotations_name_file_and_line(project, capsys, monkeypatch):
    code, out, err = run_in(capsys, monkeypatch, project, "check", "--format", "github", *TARGETS)
    assert code == 2  # a path not checked, as in every format
    lines = out.splitlines()
    assert all(line.startswith(("::error ", "::warning ")) for line in lines), out
    chat = _line_of(project / "chat" / "generation_config.json", '"eos_token_id"')
    assert lines[0] == (
        f"::error file=chat/generation_config.json,line={chat},title=eosfix EOS001::"
        "eos_token_id 248044 does not include <|im_end|> (248046): generation runs past the "
        "turn end"
    )
    harmony = _line_of(project / "models/harmony/generation_config.json", '"eos_token_id"')
    assert any(
        line.startswith(
            f"::error file=models/harmony/generation_config.json,line={harmony},"
            "title=eosfix EOS011::eos_token_id holds <|end|> (200007)"
        )
        for line in lines
    )
    template = _line_of(project / "alpaca" / "tokenizer_config.json", '"chat_template"')
    assert any(
        line.startswith(
            f"::warning file=alpaca/tokenizer_config.json,line={template},title=eosfix EOS005::"
        )
        for line in lines
    )
    assert any(
        line.startswith("::error file=glm.gguf,title=eosfix EOS201::tokenizer.ggml.eot_token_id: ")
        for line in lines
    )
    assert "::error file=missing,title=eosfix::not checked: no such file or directory" in lines
    assert "healthy" not in out
    assert (
        "2 repos would be fixed, 1 GGUF file would be fixed" in err
    )  # the summary goes to the log, not the annotations


def test_github_healthy_prints_no_annotation(project, capsys, monkeypatch):
    code, out, err = run_in(capsys, monkeypatch, project, "check", "--format", "github", "healthy")
    assert (code, out) == (0, "")
    assert "1 repo stops correctly" in err


def test_github_after_fix_reports_what_remains(project, capsys, monkeypatch):
    code, out, err = run_in(
        capsys, monkeypatch, project, "fix", "--format", "github", "chat", "alpaca"
    )
    assert code == 1  # files changed
    assert "Fixing chat/generation_config.json" in err
    assert "EOS001" not in out  # fixed
    assert "title=eosfix EOS005::" in out  # a warning fix cannot repair


def test_workflow_command_escaping():
    assert _escape_data("50% a\nb\r") == "50%25 a%0Ab%0D"
    assert _escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def _validate(log: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft4Validator(schema)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_sarif_is_valid_sarif_2_1_0(project, capsys, monkeypatch):
    code, out, _ = run_in(capsys, monkeypatch, project, "check", "--format", "sarif", *TARGETS)
    assert code == 2
    log = json.loads(out)
    _validate(log)
    (run,) = log["runs"]
    assert log["version"] == "2.1.0"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES)
    results = run["results"]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
    first = results[0]
    assert first["ruleId"] == "EOS001"
    assert first["level"] == "error"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {
        "uri": "chat/generation_config.json",
        "uriBaseId": "%SRCROOT%",
    }
    chat = _line_of(project / "chat" / "generation_config.json", '"eos_token_id"')
    assert location["region"] == {"startLine": chat}
    levels = {r["ruleId"]: r["level"] for r in results}
    assert levels["EOS005"] == "warning"
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["exitCode"] == 2
    (note,) = invocation["toolExecutionNotifications"]
    assert note["message"]["text"] == "not checked: no such file or directory"


def test_sarif_for_a_healthy_repo_has_no_results(project, capsys, monkeypatch):
    code, out, _ = run_in(capsys, monkeypatch, project, "check", "--format", "sarif", "healthy")
    assert code == 0
    log = json.loads(out)
    _validate(log)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_sarif_outside_the_current_folder_uses_file_uris(project, tmp_path, capsys, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, _ = run_in(
        capsys, monkeypatch, elsewhere, "check", "--format", "sarif", project / "chat"
    )
    assert code == 1
    log = json.loads(out)
    _validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": (project / "chat" / "generation_config.json").as_uri()}


def test_sarif_relative_uris_are_percent_encoded(tmp_path, capsys, monkeypatch):
    """A SARIF ``uri`` is a URI reference (RFC 3986): a space or ``#`` in a path is encoded,
    or a reader takes ``a#b`` for a fragment."""
    root = tmp_path / "project"
    copy_repo(SAMPLES / "chatml-missing-im-end", root / "my models" / "chat #2")
    code, out, _ = run_in(
        capsys, monkeypatch, root, "check", "--format", "sarif", "my models/chat #2"
    )
    assert code == 1
    log = json.loads(out)
    _validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {
        "uri": "my%20models/chat%20%232/generation_config.json", "uriBaseId": "%SRCROOT%",
    }  # fmt: skip


def test_a_finding_about_a_file_fix_creates_points_at_an_existing_file(
    tmp_path, capsys, monkeypatch
):
    """EOS002 names generation_config.json, which does not exist yet: the annotation points
    at config.json's eos_token_id (what transformers reads instead) and says where `fix`
    creates the file; SARIF the same."""
    root = tmp_path / "project"
    folder = copy_repo(SAMPLES / "chatml-missing-im-end", root / "new")
    (folder / "generation_config.json").unlink()
    line = _line_of(folder / "config.json", '"eos_token_id"')
    code, out, _ = run_in(capsys, monkeypatch, root, "check", "--format", "github", "new")
    assert code == 1
    assert out.splitlines()[0] == (
        f"::error file=new/config.json,line={line},title=eosfix EOS002::generation_config.json "
        "is missing and config.json's eos_token_id 248044 does not include <|im_end|> (248046): "
        "generation runs past the turn end (eosfix fix creates new/generation_config.json)"
    )
    code, out, _ = run_in(capsys, monkeypatch, root, "check", "--format", "sarif", "new")
    log = json.loads(out)
    _validate(log)
    result = log["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "new/config.json", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": line},
    }
    assert result["message"]["text"].endswith("(eosfix fix creates new/generation_config.json)")
