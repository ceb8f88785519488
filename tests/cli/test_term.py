"""What reaches the terminal (eosfix.cli.term): a repo's text cannot act on the terminal of
the person reading eosfix's output (move the cursor, clear the screen, set the title, write
the clipboard, hide or reorder text); eosfix's own colours still show; JSON keeps every
token as the repo has it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from eosfix.cli.term import shown

ROOT = Path(__file__).resolve().parents[2]
# A title (OSC 0, ended by BEL), the screen cleared (CSI 2J), text hidden (SGR 8), a carriage
# return, an 8-bit CSI (0x9b) and a right-to-left override: what a token's content can hold.
HOSTILE = "<|im_end\x1b]0;PWNED\x07\x1b[2J\x1b[8m\r\x9b2J\u202e|>"
ACTS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
OWN_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def test_own_colours_stay_and_everything_else_a_terminal_acts_on_is_escaped():
    styled = " ".join(
        click.style("word", fg=fg, bold=bold, dim=dim)
        for fg in ("red", "green", "yellow", "cyan", None)
        for bold, dim in ((True, False), (False, True), (False, False))
    )
    assert shown(styled) == styled
    text = f"{click.style('error', fg='red', bold=True)}: {HOSTILE}\tnext\n"
    out = shown(text)
    assert OWN_STYLE.sub("", out) == (
        "error: <|im_end\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[8m\\x0d\\u009b2J\\u202e|>\tnext\n"
    )
    assert shown(out) == out  # what is shown once prints as it is
    assert shown("\x1b[30mblack\x1b[40m") == "\\x1b[30mblack\\x1b[40m"  # no hidden text


def _repo(root: Path) -> Path:
    """A ChatML repo whose turn ends with ``HOSTILE`` (a token of its own), left out of the
    stop ids: eosfix names the token in its finding, its fix and its explanation."""
    root.mkdir()
    added = {
        "248044": "<|endoftext|>",
        "248045": "<|im_start|>",
        "248046": HOSTILE,
    }
    decoder = {
        i: {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True}
        for i, c in added.items()
    }  # fmt: skip
    config = {"added_tokens_decoder": decoder, "eos_token": HOSTILE, "bos_token": None}
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    end = json.dumps(HOSTILE)[1:-1].replace("'", "\\'")
    (root / "chat_template.jinja").write_text(
        "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + "
        f"message['content'] + '{end}' + '\\n' }}}}{{%- endfor %}}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    (root / "config.json").write_text(
        json.dumps({"model_type": "qwen3", "eos_token_id": 248044, "vocab_size": 248320})
    )
    (root / "generation_config.json").write_text(json.dumps({"eos_token_id": 248044}))
    return root


def _eosfix(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "eosfix", *args], env=env, cwd=ROOT, capture_output=True,
        text=True, encoding="utf-8", errors="surrogateescape", check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "command", [["check"], ["explain"], ["fix", "--diff"]], ids=lambda c: " ".join(c)
)
def test_a_token_that_would_act_on_the_terminal_is_printed_as_escapes(tmp_path, command):
    repo = _repo(tmp_path / "r")
    proc = _eosfix(*command, "--color", "always", str(repo))
    both = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), both
    assert "<|im_end\\x1b]0;PWNED\\x07\\x1b[2J" in both, both
    assert not ACTS.search(OWN_STYLE.sub("", both)), both
    if command == ["check"]:
        assert OWN_STYLE.search(proc.stdout)  # --color always: eosfix's own colours


def test_json_keeps_the_token_as_the_repo_has_it(tmp_path):
    repo = _repo(tmp_path / "r")
    proc = _eosfix("check", "--format", "json", str(repo))
    assert not ACTS.search(proc.stdout)
    report = json.loads(proc.stdout)
    assert HOSTILE in set(_strings(report))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in _strings(item)]
