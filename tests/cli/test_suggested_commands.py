"""Every command eosfix prints for the user to run works when run as printed, from the same
folder: each is taken from the output (``run: ...``, ``then run: ...``, ``instead: ...``, a
backquoted `` `eosfix ...` ``), split as a shell would, run, and then the repo (or the file it
wrote) checks clean."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from eosfix.cli import main
from tests.conftest import SAMPLES, copy_repo
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.ggufs import glm

# What introduces a command, and what ends it.
_SUGGESTED = re.compile(
    r"(?:run: |instead: )(eosfix [^)\n;`]*?)(?=\)|;| \(then|\n|$)|`(eosfix [^`]+)`", re.MULTILINE
)


def suggested(text: str) -> list[str]:
    """Every full command the text tells the user to run (a bare ``eosfix render``, which
    names a tool, not a command line, is left out: it has no path)."""
    found = [a or b for a, b in _SUGGESTED.findall(text)]
    return [c.strip() for c in found if len(shlex.split(c)) > 2]


def run(capsys, monkeypatch, cwd: Path, argv: list[str]) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


def run_each(capsys, monkeypatch, cwd: Path, text: str) -> list[str]:
    """Run every command ``text`` suggests, as printed; each must do its job (exit 0, or 1
    for a fix that wrote files)."""
    commands = suggested(text)
    assert commands, f"no command suggested in:\n{text}"
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "eosfix"
        code, out = run(capsys, monkeypatch, cwd, argv[1:])
        assert code in (0, 1), f"{command} -> {code}:\n{out}"
        assert "error" not in out.lower(), f"{command}:\n{out}"
    return commands


def test_the_fix_command_of_a_folder(tmp_path, capsys, monkeypatch):
    copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    _, out = run(capsys, monkeypatch, tmp_path, ["check", "m"])
    assert run_each(capsys, monkeypatch, tmp_path, out) == ["eosfix fix m"]
    assert run(capsys, monkeypatch, tmp_path, ["check", "m"])[0] == 0


def test_the_config_json_command_of_a_caveat(tmp_path, capsys, monkeypatch):
    copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    run(capsys, monkeypatch, tmp_path, ["fix", "m"])
    _, out = run(capsys, monkeypatch, tmp_path, ["check", "m"])
    assert "caveat        candle reads config.json" in out
    assert run_each(capsys, monkeypatch, tmp_path, out) == ["eosfix fix m --config-json"]
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["eos_token_id"] == [248044, 248046]


def test_the_commands_of_a_symlinked_gguf_in_the_cache(tmp_path, capsys, monkeypatch):
    """A snapshot's GGUF is a link into blobs/: check and fix name a command writing a new
    file (``--output``), which works as printed; the blob is never written."""
    gguf = glm(tmp_path / "glm.gguf")
    builder = CacheBuilder(tmp_path / "hub")
    sha = builder.add_revision("org/glm-GGUF", {"glm.gguf": gguf.read_bytes()})
    link = builder.snapshot("org/glm-GGUF", sha) / "glm.gguf"
    blob = link.resolve().read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    code, out = run(capsys, monkeypatch, work, ["check", str(link)])
    assert code == 1
    code, refused = run(capsys, monkeypatch, work, ["fix", str(link)])
    assert code == 2
    assert suggested(out) == suggested(refused)  # the same command, said by check and fix
    commands = run_each(capsys, monkeypatch, work, out)
    assert commands == [shlex.join(["eosfix", "fix", str(link), "--output", "glm-fixed.gguf"])]
    assert run(capsys, monkeypatch, work, ["check", "glm-fixed.gguf"])[0] == 0
    assert link.resolve().read_bytes() == blob
    _, out = run(capsys, monkeypatch, work, ["check", str(link)])  # a name not taken yet
    assert suggested(out)[0].endswith("--output glm-fixed2.gguf")


def test_the_cache_command_of_a_snapshot(tmp_path, capsys, monkeypatch):
    builder = CacheBuilder(tmp_path / "hub")
    sha = builder.add_revision("org/chat", chatml_files(1000))
    snapshot = builder.snapshot("org/chat", sha)
    _, out = run(capsys, monkeypatch, tmp_path, ["check", str(snapshot)])
    (command,) = run_each(capsys, monkeypatch, tmp_path, out)
    assert command.startswith("eosfix cache --cache-dir ")
    assert run(capsys, monkeypatch, tmp_path, ["check", str(snapshot)])[0] == 0


def test_the_commands_of_render_and_diagnose(tmp_path, capsys, monkeypatch):
    copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "m")
    _, out = run(capsys, monkeypatch, tmp_path, ["render", "m"])
    assert run_each(capsys, monkeypatch, tmp_path, out) == ["eosfix fix m"]
    copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "d")
    _, out = run(capsys, monkeypatch, tmp_path, ["diagnose", "d", "--ids", "5,248046,7"])
    assert run_each(capsys, monkeypatch, tmp_path, out) == ["eosfix fix d"]
    assert run(capsys, monkeypatch, tmp_path, ["check", "d"])[0] == 0


def test_the_pull_request_command_of_a_hub_repo(fake_hub, tmp_path, capsys, monkeypatch):
    from tests.support.hubrepos import sample_files

    fake_hub.add_repo("org/chat", sample_files("chatml-missing-im-end"))
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_token_1234567890")
    _, out = run(capsys, monkeypatch, tmp_path, ["check", "org/chat"])
    assert run_each(capsys, monkeypatch, tmp_path, out) == ["eosfix hub org/chat --pr"]
    assert fake_hub.repos["org/chat"].pr_files(1)["generation_config.json"]
