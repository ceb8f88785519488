"""The reply's only closer, also written inside a turn (EOS010, EOS016: a finding says stopping
there cuts a reply): ``fix`` never adds it (not even as the tokenizer's eos), never asks for it
(EOS004), and leaves it where it is (nothing else would end the reply)."""

from __future__ import annotations

import pytest

from eosfix import api
from tests.support.invariants import FIRST_ID, template_repo

# gpt-oss-like without <|return|>: <|end|> closes the reasoning message and the answer alike.
TEMPLATE = (
    "{% for m in messages %}<|start|>{{ m.role }}<|message|>{% if m.reasoning_content %}"
    "{{ m.reasoning_content }}<|end|><|start|>assistant<|message|>{% endif %}{{ m.content or '' }}"
    "{% if m.tool_calls %}<|fn|>{{ m.tool_calls[0].function.arguments | tojson }}<|call|>"
    "{% else %}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant<|message|>{% endif %}"
)
TOKENS = ["<|end|>", "<|start|>", "<|message|>", "<|call|>", "<|fn|>"]
END, CALL = FIRST_ID, FIRST_ID + 3


def _check(tmp_path, stop):
    repo = template_repo(tmp_path / "r", TEMPLATE, TOKENS, eos="<|end|>", stop=stop)
    return repo, api.check(repo).check


def test_fix_adds_the_call_closer_but_never_the_eos_a_finding_says_cuts(tmp_path):
    _, c = _check(tmp_path, [])
    assert "EOS010" in {f.code for f in c.findings}
    assert c.proposed == (CALL,)
    assert "EOS004" not in {f.code for f in c.findings}


@pytest.mark.parametrize("stop", [["<|end|>"], ["<|end|>", "<|call|>"]], ids=["missing", "all"])
def test_the_closer_already_listed_stays(tmp_path, stop):
    repo, c = _check(tmp_path, stop)
    assert c.proposed in (None, (END, CALL))
    api.fix(repo)
    assert api.check(repo).check.stop.ids == (END, CALL)
