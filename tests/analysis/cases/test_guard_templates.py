"""Classifier and guard templates quote the conversation as text inside one turn (Llama Guard
3, Granite Guardian, ShieldGemma): a quoted message is not a turn. What ends the model's
verdict is what closes the prompt's turn before its reply position, never a stop string taken
from the quote."""

from __future__ import annotations

import pytest

from eosfix import api
from eosfix.analysis.positions import VERDICT
from eosfix.analysis.terminators import TURN_END
from eosfix.render.explain import render_explain, result_explain_dict
from eosfix.render.report import result_to_dict
from tests.support.invariants import template_repo
from tests.support.real_templates import real_repo, token_id

# The real templates and what ends their verdict (the turn the prompt's own turn opens).
REAL_GUARDS = {
    "llama-guard-3-8b.jinja": "<|eot_id|>",
    "llama-guard-3-1b.jinja": "<|eot_id|>",
    "granite-guardian-3.0.jinja": "<|end_of_text|>",
}
QUOTE_WORDS = ("User:", "Agent:", "User Message:", "Assistant Message:", "Human Question:")


def _check(path):
    result = api.check(path)
    assert result.error is None
    assert result.check is not None
    return result


def _assert_verdict(result, token: str) -> None:
    c = result.check
    assert [t.content for t in c.terminators.terminators] == [token]
    (t,) = c.terminators.terminators
    assert t.kind == TURN_END
    assert [p.where for p in t.placements] == [VERDICT]
    assert c.stop_strings == ()
    assert not any(w in s for s in c.stop_strings_needed for w in QUOTE_WORDS)
    assert c.terminators.in_turn == ()
    assert c.terminators.in_call == ()
    ta = c.terminators.templates[0]
    assert ta.quoted is not None
    assert t.probe.endswith("/" + ta.prompt.spec.name)


@pytest.mark.parametrize("name", sorted(REAL_GUARDS))
def test_a_real_guard_template_ends_its_verdict_as_its_prompt_turn_ends(name, tmp_path):
    result = _check(real_repo(name, tmp_path / "r"))
    _assert_verdict(result, REAL_GUARDS[name])
    assert result.check.status.value == "ok"  # the eos is that token already


@pytest.mark.parametrize("name", sorted(REAL_GUARDS))
def test_fix_adds_only_the_verdict_closer(name, tmp_path):
    repo = real_repo(name, tmp_path / "r", stop=[])
    result = _check(repo)
    assert result.check.proposed == (token_id(name, REAL_GUARDS[name]),)
    assert api.fix(repo).error is None
    assert _check(repo).check.status.value == "ok"


def test_llama_guard_3_explain_shows_the_quote_and_the_prompt(tmp_path):
    result = _check(real_repo("llama-guard-3-8b.jinja", tmp_path / "r"))
    text = render_explain(result)
    quote = "quoted conversation: adding an assistant message rewrites the text before the user"
    assert quote in text
    assert "--- probe prompt (add_generation_prompt=True) ---" in text
    assert "<|eot_id|> ends a turn (turn end): written where the prompt's turn ends" in text
    assert "User:" not in " ".join(result.check.stop_strings_needed)
    payload = result_to_dict(result)
    assert payload["templates"][0]["quoted"].startswith("adding an assistant message")
    assert payload["terminators"][0]["where"] == [{"where": VERDICT, "related": []}]
    probes = [p["probe"] for p in result_explain_dict(result)["probes"]]
    assert probes[-1] == "prompt"


def test_shieldgemma_quotes_and_writes_nothing_after_the_reply_position(tmp_path):
    result = _check(real_repo("shieldgemma.jinja", tmp_path / "r"))
    c = result.check
    assert c.terminators.terminators == ()
    assert c.stop_strings == ()
    assert c.terminators.templates[0].quoted is not None
    (finding,) = [f for f in c.findings if f.code == "EOS009"]
    assert "quotes the conversation" in finding.message
    assert c.proposed is None  # nothing to write: fix never adds a token taken from the quote


# Variants written for these tests: the same shapes with other token names.
_CHATML_REWRITE = (
    "{%- set target = 'Assistant' if messages[-1].role == 'assistant' else 'User' -%}"
    "<|im_start|>user\nJudge the last {{ target }} message.\n"
    "{% for m in messages %}{{ 'User' if m.role == 'user' else 'Assistant' }}: {{ m.content }}\n"
    "{% endfor %}Answer safe or unsafe.<|im_end|>\n"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SAME_TURN = (
    "<|user|>Conversation:\n{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    "Is the last message harmful?<|end|>{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_ALWAYS_OPENS = (  # a fixed system turn first, and the reply's opener always written
    "<|hdr|>system<|/hdr|>You are a classifier.<|stop|><|hdr|>user<|/hdr|>Check:\n"
    "{% for m in messages %}{{ m.role }} says: {{ m.content }}\n{% endfor %}"
    "Verdict for the last {{ messages[-1].role }} message?<|stop|><|hdr|>assistant<|/hdr|>"
)
_NO_PROMPT = (  # ShieldGemma's shape: quoted between tags, the question last, no opener
    "{% if messages[-1].role == 'user' %}Is this prompt safe?\n<q>\nPrompt: "
    "{{ messages[-1].content }}\n</q>\n{% else %}Is this response safe?\n<q>\nPrompt: "
    "{{ messages[-2].content }}\n</q>\n<q>\nResponse: {{ messages[-1].content }}\n</q>\n"
    "{% endif %}Answer Yes or No.\n"
)
VARIANTS = {
    "rewritten instructions, ChatML": (
        _CHATML_REWRITE,
        ["<|im_end|>", "<|im_start|>"],
        "<|im_end|>",
    ),
    "same turn, a role token per turn": (
        _SAME_TURN,
        ["<|end|>", "<|user|>", "<|assistant|>"],
        "<|end|>",
    ),
    "a system turn first, the opener always written": (
        _ALWAYS_OPENS,
        ["<|stop|>", "<|hdr|>", "<|/hdr|>"],
        "<|stop|>",
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_variant_guard_ends_its_verdict_as_its_prompt_turn_ends(variant, tmp_path):
    template, tokens, closer = VARIANTS[variant]
    result = _check(template_repo(tmp_path / "r", template, tokens))
    _assert_verdict(result, closer)


def test_a_variant_with_no_reply_position_of_its_own_names_nothing(tmp_path):
    repo = template_repo(tmp_path / "r", _NO_PROMPT, ["</s>", "<q>", "</q>"])
    c = _check(repo).check
    assert c.terminators.templates[0].quoted is not None
    assert c.terminators.terminators == ()
    assert c.stop_strings == ()
    assert [f.code for f in c.findings] == ["EOS009"]


@pytest.mark.parametrize(
    ("template", "tokens"),
    [
        # BlenderBot: the conversation as plain text, closed by </s>: nothing follows a reply
        (
            (
                "{% for m in messages %}{% if m.role == 'user' %} {% endif %}{{ m.content }}"
                "{% if not loop.last %}  {% endif %}{% endfor %}</s>"
            ),
            ["</s>"],
        ),
        # a suffix on the last user message only (its lead-in differs, its control tokens agree)
        (
            (
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                "{% if loop.last and m.role == 'user' %} (answer briefly){% endif %}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
            ),
            ["<|im_end|>", "<|im_start|>"],
        ),
        # Alpaca: plain text between turns, the reply right after the prompt's lead-in
        (
            (
                "{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}"
                "\n\n{% else %}### Response:\n{{ m.content }}</s>\n\n{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}### Response:\n{% endif %}"
            ),
            ["</s>"],
        ),
    ],
    ids=["blenderbot", "last-user-suffix", "alpaca"],
)
def test_a_chat_template_is_not_a_quote(template, tokens, tmp_path):
    c = _check(template_repo(tmp_path / "r", template, tokens)).check
    assert c.terminators.templates[0].quoted is None
    assert all(VERDICT not in w for w in c.terminators.positions().values())
