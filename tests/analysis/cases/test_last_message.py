"""A last message rendered differently from the same message in history (Nemotron-Nano-v2:
text and calls in one block in history, split into two blocks only when the conversation ends
with them): the history is what the model sees of its own past replies, so it is followed,
and ``explain`` says the two disagree. A closer written only after the last reply (Phi-3's
``<|endoftext|>``, gpt-oss's ``<|return|>``) is not such a disagreement: the tests of those
shapes are in tests/analysis/cases/test_shapes.py."""

from __future__ import annotations

import pytest

from eosfix import api
from eosfix.analysis.positions import EVERY_REPLY, IN_TOOL_CALL, TOOL_CALL
from eosfix.render.explain import render_explain, result_explain_dict
from eosfix.render.report import result_to_dict
from tests.support.invariants import template_repo
from tests.support.real_templates import real_repo, token_id

NEMOTRON = "nemotron-nano-v2.jinja"


def _check(path):
    result = api.check(path)
    assert result.error is None
    assert result.check is not None
    return result


def test_nemotron_follows_the_history_and_names_its_one_closer(tmp_path):
    c = _check(real_repo(NEMOTRON, tmp_path / "r")).check
    assert [t.content for t in c.terminators.terminators] == ["<SPECIAL_12>"]
    (t,) = c.terminators.terminators
    assert {p.where for p in t.placements} == {EVERY_REPLY, TOOL_CALL}
    assert "<SPECIAL_12>" not in c.terminators.in_call
    assert not {f.code for f in c.findings} & {"EOS010", "EOS016"}
    assert IN_TOOL_CALL in c.terminators.positions()["</TOOLCALL>"]
    (d,) = c.terminators.templates[0].disagreements
    assert (d.final.spec.name, d.history.spec.name) == ("tool_calls+two", "tool_calls+two+result")
    assert "<SPECIAL_12>" in d.final_tokens
    assert "<SPECIAL_12>" not in d.history_tokens


def test_nemotron_stop_set_after_fix_is_the_closer_alone(tmp_path):
    """</TOOLCALL> is never proposed: a stop list holding it loses it, <SPECIAL_12> is kept,
    and the fixed repo is healthy (no EOS016 on <SPECIAL_12>)."""
    repo = real_repo(NEMOTRON, tmp_path / "r", stop=["</TOOLCALL>"])
    c = _check(repo).check
    assert c.proposed == (token_id(NEMOTRON, "<SPECIAL_12>"),)
    assert api.fix(repo).error is None
    after = _check(repo).check
    assert after.stop.ids == (token_id(NEMOTRON, "<SPECIAL_12>"),)
    assert after.status.value == "ok"


def test_explain_says_the_last_message_and_history_disagree(tmp_path):
    result = _check(real_repo(NEMOTRON, tmp_path / "r"))
    text = render_explain(result)
    line = next(x for x in text.splitlines() if "last message and history disagree" in x)
    assert "probe tool_calls+two (the conversation ends with the message)" in line
    assert "probe tool_calls+two+result (its results follow)" in line
    assert "eosfix follows the history" in line
    assert "--- probe tool_calls+two+result (add_generation_prompt=False) ---" in text
    (entry,) = result_to_dict(result)["templates"][0]["history_differs"]
    assert entry["history_probe"] == "tool_calls+two+result"
    assert "<SPECIAL_12>" in entry["last"]
    assert "<SPECIAL_12>" not in entry["history"]
    texts = {p["probe"]: p["text"] for p in result_explain_dict(result)["probes"]}
    assert "Eosfixcallcontent\n\n<TOOLCALL>" in texts["tool_calls+two+result"]


# A variant written for these tests: the same split with other token names. In history a
# reply is <|bot|> text <|call|>...<|/call|> <|eob|>; the last one, when it makes calls, is
# <|bot|> text <|eob|> and a second <|bot|> block holding the calls.
SPLIT = (
    "{% set last = messages[-1] if messages[-1].role == 'assistant' else none %}"
    "{% for m in messages %}{% if m.role == 'user' %}<|usr|>{{ m.content }}<|eou|>"
    "{% elif m.role == 'tool' %}<|res|>{{ m.content }}<|eou|>"
    "{% elif m is not sameas last %}<|bot|>{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<|call|>{{ c.function.arguments | tojson }}<|/call|>"
    "{% endfor %}<|eob|>{% endif %}{% endfor %}"
    "{% if last %}{% if last.content %}<|bot|>{{ last.content }}<|eob|>{% endif %}"
    "{% if last.tool_calls %}<|bot|>{% for c in last.tool_calls %}<|call|>"
    "{{ c.function.arguments | tojson }}<|/call|>{% endfor %}<|eob|>{% endif %}{% endif %}"
    "{% if add_generation_prompt %}<|bot|>{% endif %}"
)
SPLIT_TOKENS = ["<|eob|>", "<|usr|>", "<|eou|>", "<|res|>", "<|bot|>", "<|call|>", "<|/call|>"]


def test_a_variant_split_only_at_the_end_follows_the_history(tmp_path):
    c = _check(template_repo(tmp_path / "r", SPLIT, SPLIT_TOKENS)).check
    assert [t.content for t in c.terminators.terminators] == ["<|eob|>"]
    assert "<|eob|>" not in c.terminators.in_call
    assert c.terminators.templates[0].disagreements
    assert not {f.code for f in c.findings} & {"EOS010", "EOS016"}


def test_the_same_variant_split_everywhere_keeps_its_closer_inside_the_call(tmp_path):
    """Where history writes the split too, the history says the closer comes before more of
    the reply's own text: EOS016, as before (no disagreement to follow)."""
    everywhere = SPLIT.replace(
        "{% elif m is not sameas last %}<|bot|>{{ m.content or '' }}",
        "{% elif m is not sameas last %}<|bot|>{{ m.content or '' }}"
        "{% if m.content and m.tool_calls %}<|eob|><|bot|>{% endif %}",
    )
    c = _check(template_repo(tmp_path / "r", everywhere, SPLIT_TOKENS)).check
    assert c.terminators.templates[0].disagreements == ()
    assert "<|eob|>" in c.terminators.in_call
    assert "EOS016" in {f.code for f in c.findings}


@pytest.mark.parametrize(
    ("template", "tokens"),
    [
        # gpt-oss-like: a different closer on the last reply only, calls alike everywhere
        (
            (
                "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content or '' }}"
                "{% for c in m.tool_calls or [] %}<|fn|>{{ c.function.arguments | tojson }}"
                "{% endfor %}{% if m.tool_calls %}<|call|>{% elif loop.last and m.role == "
                "'assistant' %}<|return|>{% else %}<|end|>{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}<|start|>assistant<|message|>{% endif %}"
            ),
            ["<|return|>", "<|start|>", "<|message|>", "<|end|>", "<|call|>", "<|fn|>"],
        ),
        # Phi-3-like: <|endoftext|> after the last reply's <|end|> only
        (
            (
                "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>\n{% else %}<|endoftext|>{% endif %}"
            ),
            ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"],
        ),
    ],
    ids=["last-reply-closer", "conversation-end"],
)
def test_a_closer_only_at_the_end_is_no_disagreement(template, tokens, tmp_path):
    ta = _check(template_repo(tmp_path / "r", template, tokens)).check.terminators.templates[0]
    assert ta.disagreements == ()
    assert ta.twins == ()  # nothing inside a call also closes a reply: no history render
