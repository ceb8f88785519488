"""The pull request's "Check it with transformers" program, run with transformers against the
stand-in Hub: what its text says the program prints today (or raises), and with the pull
request merged, is what it prints."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tests.support.hubrepos import CHATML_TOKENS, sample_files, tokenizer_json

pytest.importorskip("transformers", reason="needs transformers (pip install 'eosfix[verify]')")

REPO = "org/chat"


def _run(program: str) -> str:
    """The program's output, or ``raises <Error>``."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(program, "<pr>", "exec"), {})  # noqa: S102 - eosfix's own three lines
    except Exception as exc:  # noqa: BLE001 - what it raises is what the text must say
        return f"raises {type(exc).__name__}"
    return out.getvalue().strip()


def _claims(description: str) -> tuple[str, str, str]:
    """The program, and what the text says it gives today and once merged."""
    (program,) = re.findall(r"```python\n(.*?)```", description, re.DOTALL)
    said = re.search(r"Today this (prints `(.*?)`|raises `(\w+)`).*?merged, `(.*?)`", description)
    assert said is not None, description
    today = f"raises {said[3]}" if said[3] else said[2]
    return program, today, said[4]


@pytest.mark.parametrize(
    ("what", "generation_config"),
    [
        ("an int", None),  # the sample's: eos_token_id 248044
        ("a list", b'{"eos_token_id": [248044]}\n'),
        ("no file", b""),
        ("not JSON", b"\x00" * 163),
    ],
)
def test_the_program_prints_what_the_description_says(
    what, generation_config, fake_hub, run_eosfix, monkeypatch
):
    files = {
        **sample_files("chatml-missing-im-end"),
        "tokenizer.json": tokenizer_json(CHATML_TOKENS),
    }
    if generation_config == b"":
        del files["generation_config.json"]
    elif generation_config is not None:
        files["generation_config.json"] = generation_config
    fake_hub.add_repo(REPO, files)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_token_1234567890")
    result = run_eosfix("hub", REPO, "--pr")
    assert result.exit_code == 1, result.output
    (commit,) = fake_hub.commits_received
    program, today, merged = _claims(commit["description"])
    assert _run(program) == today, what
    on_pr = program.replace(
        f'GenerationConfig.from_pretrained("{REPO}")',
        f'GenerationConfig.from_pretrained("{REPO}", revision="refs/pr/1")',
    )
    assert _run(on_pr) == merged, what
