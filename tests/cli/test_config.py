"""``[tool.eosfix]`` in the nearest pyproject.toml gives check, fix and explain their option
defaults; the command line wins; a table eosfix cannot use is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES, copy_repo, run_in


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    copy_repo(SAMPLES / "ordinary-stop-id", root / "qwen")  # '#' (2) cuts replies: EOS012
    copy_repo(SAMPLES / "plain-text-turns", root / "alpaca")  # a warning only (EOS005)
    return root


def _pyproject(folder, body: str) -> None:
    (folder / "pyproject.toml").write_text(f'[project]\nname = "models"\n\n{body}')


def test_without_a_table_the_defaults_hold(project, capsys, monkeypatch):
    _pyproject(project, "[tool.ruff]\nline-length = 100\n")
    code, out, _ = run_in(capsys, monkeypatch, project, "check", "alpaca")
    assert code == 0  # warnings alone exit 0
    assert out.startswith("alpaca\n")


def test_the_table_sets_strict_format_and_keep_id(project, capsys, monkeypatch):
    _pyproject(project, '[tool.eosfix]\nstrict = true\nformat = "json"\nkeep-id = [2]\n')
    code, out, _ = run_in(capsys, monkeypatch, project, "check", "alpaca", "qwen")
    assert code == 1  # strict: the warning fails
    repos = json.loads(out)["repos"]
    qwen = repos[1]
    assert [f["severity"] for f in qwen["findings"] if f["code"] == "EOS012"] == ["warning"]
    assert qwen["proposed_eos_token_id"] is None  # '#' kept: nothing to write


def test_the_command_line_wins(project, capsys, monkeypatch):
    _pyproject(project, '[tool.eosfix]\nstrict = true\nformat = "json"\n')
    code, out, _ = run_in(
        capsys, monkeypatch, project, "check", "--format", "text", "--no-strict", "alpaca"
    )
    assert code == 0
    assert out.startswith("alpaca\n")


def test_the_nearest_table_is_found_from_a_subfolder(project, capsys, monkeypatch):
    _pyproject(project, "[tool.eosfix]\nstrict = true\n")
    sub = project / "qwen"
    _pyproject(sub, "[tool.black]\nline-length = 88\n")  # nearer, but without [tool.eosfix]
    code, _, _ = run_in(capsys, monkeypatch, sub, "check", "../alpaca")
    assert code == 1


def test_fix_takes_keep_id_and_quiet_from_the_table(project, capsys, monkeypatch):
    before = (project / "qwen" / "generation_config.json").read_bytes()
    _pyproject(project, "[tool.eosfix]\nkeep-id = 2\nquiet = true\n")
    code, out, _ = run_in(capsys, monkeypatch, project, "fix", "qwen")
    assert code == 0  # '#' kept: nothing to fix, a warning only
    assert (project / "qwen" / "generation_config.json").read_bytes() == before
    assert out.startswith("qwen\n")  # quiet still shows a repo with a warning
    copy_repo(SAMPLES / "llama3-healthy", project / "healthy")
    code, out, _ = run_in(capsys, monkeypatch, project, "fix", "healthy")
    assert (code, out) == (0, "1 repo already stops correctly\n")  # quiet: the summary only


def test_fix_takes_config_json_from_the_table(tmp_path, capsys, monkeypatch):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "chat")
    _pyproject(tmp_path, "[tool.eosfix]\nconfig-json = true\n")
    code, _, err = run_in(capsys, monkeypatch, tmp_path, "fix", "chat")
    assert code == 1
    assert "Fixing chat/config.json" in err
    assert json.loads((repo / "config.json").read_text())["eos_token_id"] == [248044, 248046]


def test_explain_takes_keep_id_and_ignores_the_check_only_keys(project, capsys, monkeypatch):
    _pyproject(project, '[tool.eosfix]\nkeep-id = [2]\nformat = "sarif"\nstrict = true\n')
    code, out, _ = run_in(capsys, monkeypatch, project, "explain", "--format", "json", "qwen")
    assert code == 0  # '#' kept: a warning only
    assert json.loads(out)["path"] == "qwen"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[tool.eosfix]\nkeep_id = [2]\n", "[tool.eosfix] unknown key 'keep_id' (known: "),
        (
            '[tool.eosfix]\nkeep-id = "2"\n',
            '[tool.eosfix] keep-id = "2": expected an id >= 0 or a list',
        ),
        ("[tool.eosfix]\nkeep-id = [-1]\n", "[tool.eosfix] keep-id = [-1]: expected an id >= 0"),
        ('[tool.eosfix]\nstrict = "yes"\n', '[tool.eosfix] strict = "yes": expected true or false'),
        (
            '[tool.eosfix]\nformat = "xml"\n',
            '[tool.eosfix] format = "xml": expected one of github, ',
        ),
        ('[tool.eosfix]\nruntime = "vLLM==0.6"\n', "[tool.eosfix] runtime: "),
        ("[tool.eosfix\nstrict = true\n", "not valid TOML: "),
        ('[tool]\neosfix = "strict"\n', "[tool.eosfix] must be a table"),
    ],
)
def test_a_table_eosfix_cannot_use_is_one_line_exit_2(project, capsys, monkeypatch, body, message):
    (project / "pyproject.toml").write_text(body)
    before = (project / "qwen" / "generation_config.json").read_bytes()
    code, out, err = run_in(capsys, monkeypatch, project / "qwen", "fix", ".")
    assert (code, out) == (2, "")
    assert err.startswith("error: ../pyproject.toml: " + message), err
    assert err.count("\n") == 1
    assert (project / "qwen" / "generation_config.json").read_bytes() == before


def test_other_commands_never_read_the_table(project, capsys, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.eosfix\n")  # invalid, unread by --help
    code, out, _ = run_in(capsys, monkeypatch, project, "cache", "--help")
    assert code == 0
    assert "--cache-dir" in out
