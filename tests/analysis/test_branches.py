"""Tool use behind a variable other than ``tools``: the probes reach every branch that writes
an assistant message or a tool call (Command R7B and Command A: ``{% if documents %}`` a
tool-use template ``{% else %}`` a plain one), and ``explain`` says what was set."""

from __future__ import annotations

import pytest

from eosfix import api
from eosfix.analysis.branches import branch_variables
from eosfix.analysis.positions import EVERY_REPLY, IN_TOOL_CALL, TOOL_CALL
from eosfix.analysis.terminators import TURN_END
from eosfix.render.explain import render_explain, result_explain_dict
from eosfix.render.report import result_to_dict
from tests.support.invariants import FIRST_ID, template_repo
from tests.support.real_templates import real_repo, token_id

COHERE = ["command-r7b.jinja", "command-a.jinja"]


def _found(path):
    result = api.check(path)
    assert result.error is None
    assert result.check is not None
    return result, {t.content: t for t in result.check.terminators.terminators}


@pytest.mark.parametrize("name", COHERE)
def test_a_tool_call_written_only_with_documents_is_found(name, tmp_path):
    result, found = _found(real_repo(name, tmp_path / "r"))
    assert found["<|END_RESPONSE|>"].kind == TURN_END
    call = found["<|END_OF_TURN_TOKEN|>"]
    assert call.kind == TOOL_CALL
    assert call.probe.endswith("/tool_call+documents")
    assert "<|END_ACTION|>" not in found  # the action's closer: the turn's closer follows it
    positions = result.check.terminators.positions()
    assert IN_TOOL_CALL in positions["<|END_ACTION|>"]
    assert EVERY_REPLY in positions["<|END_RESPONSE|>"]


@pytest.mark.parametrize("name", COHERE)
def test_with_another_eos_it_would_run_on_after_every_tool_call_and_fix_adds_the_closer(
    name, tmp_path
):
    repo = real_repo(name, tmp_path / "r", stop=["<EOS_TOKEN>"])
    result = api.check(repo)
    missing = [f.message for f in result.check.findings if f.code == "EOS001"]
    assert any("<|END_OF_TURN_TOKEN|>" in m for m in missing), missing
    fixed = api.fix(repo)
    assert fixed.error is None
    after = api.check(repo).check
    assert token_id(name, "<|END_OF_TURN_TOKEN|>") in after.stop.ids
    assert token_id(name, "<|END_RESPONSE|>") in after.stop.ids
    assert after.status.value == "ok"


@pytest.mark.parametrize("name", COHERE)
def test_explain_lists_the_variable_and_the_probes_that_set_it(name, tmp_path):
    result = api.check(real_repo(name, tmp_path / "r"))
    text = render_explain(result)
    line = next(x for x in text.splitlines() if x.strip().startswith("documents (template line"))
    assert '= [{"title": "Eosfixtitle", "text": "Eosfixdoc"}]' in line
    for probe in ("tool_call+documents", "history+documents", "tool_result+documents"):
        assert probe in line
    assert "branch variables" in text
    entry = result_to_dict(result)["templates"][0]
    assert entry["branch_variables"] == [
        {"name": "documents", "value": [{"title": "Eosfixtitle", "text": "Eosfixdoc"}], "line": 1}
    ]
    probes = {p["probe"] for p in result_explain_dict(result)["probes"]}
    assert {"tool_call+documents", "tool_calls+two"} <= probes


# Variants written for these tests: the same shape, other names and other tests of the
# variable. Each writes tool calls only on one side; a call ends with <|calls_done|> after
# <|/act|>, a reply with <|eot|>.
_TOOL_BRANCH = (
    "{% for m in messages %}<|turn|>{{ m.role }}\n{% if m.tool_calls %}<|act|>"
    "{{ m.tool_calls[0].function.arguments | tojson }}<|/act|><|calls_done|>"
    "{% else %}{{ m.content }}<|eot|>{% endif %}\n{% endfor %}"
)
_PLAIN_BRANCH = "{% for m in messages %}<|turn|>{{ m.role }}\n{{ m.content }}<|eot|>\n{% endfor %}"
_PROMPT = "{% if add_generation_prompt %}<|turn|>assistant\n{% endif %}"
TOKENS = ["<|eot|>", "<|turn|>", "<|act|>", "<|/act|>", "<|calls_done|>"]
VARIANTS = {
    "truthy": ("{% if knowledge %}", "knowledge", True),
    "compared": ("{% if mode == 'agent' %}", "mode", "agent"),
    "defined": ("{% if retrieval is defined %}", "retrieval", True),
    "is true": ("{% if agentic is true %}", "agentic", True),
    "in a list": ("{% if 'search' in capabilities %}", "capabilities", ["search"]),
    "negated": ("{% if not plain_chat %}", "plain_chat", True),
}


def _variant(test: str) -> str:
    return test + _TOOL_BRANCH + "{% else %}" + _PLAIN_BRANCH + "{% endif %}" + _PROMPT


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_variant_gate_is_probed_on_both_sides(variant, tmp_path):
    test, name, value = VARIANTS[variant]
    source = _variant(test)
    gates = branch_variables(source)
    assert [g.name for g in gates] == [name]
    repo = template_repo(tmp_path / "r", source, TOKENS)
    result, found = _found(repo)
    assert found["<|eot|>"].kind == TURN_END
    assert found["<|calls_done|>"].kind == TOOL_CALL
    assert "<|/act|>" not in found
    ta = result.check.terminators.templates[0]
    assert ta.branches == ((name, value, 1),)


def test_without_probing_the_other_side_the_call_would_be_missed(tmp_path):
    """The call branch is the one an unset variable does not take: the probes that set it
    are the only ones that show the call's closer."""
    result, found = _found(template_repo(tmp_path / "r", _variant("{% if knowledge %}"), TOKENS))
    ta = result.check.terminators.templates[0]
    showing = [
        p.spec.name for p in ta.rendered if p.text is not None and "<|calls_done|>" in p.text
    ]
    assert showing
    assert all(
        ta.probes[[p.spec.name for p in ta.probes].index(n)].spec.kwargs.get("knowledge")
        for n in showing
    )
    assert found["<|calls_done|>"].id == FIRST_ID + TOKENS.index("<|calls_done|>")


def test_a_flag_inside_the_assistant_branch_is_a_branch_variable():
    source = (
        "{% for m in messages %}{% if m['role'] | lower == 'assistant' %}"
        "{% if xml_calls %}<call>{{ m.content }}</call>{% else %}{{ m.content }}{% endif %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    assert [g.name for g in branch_variables(source)] == ["xml_calls"]


@pytest.mark.parametrize(
    "source",
    [
        # tested around the system block only: no assistant message or call in its branches
        (
            "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}"
            "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
        ),
        # a macro's parameter, the loop, a namespace and a name the template sets
        (
            "{% macro turn(documents) %}{% if documents %}{{ documents }}{% endif %}{% endmacro %}"
            "{% set ns = namespace(seen=false) %}{% set style = 'x' %}"
            "{% for m in messages %}{% if not loop.last and not ns.seen and style %}"
            "{% if m.role == 'assistant' %}{{ m.content }}{% endif %}{% endif %}{% endfor %}"
        ),
    ],
    ids=["system-block", "locals"],
)
def test_what_is_not_a_branch_variable(source):
    assert branch_variables(source) == ()


def test_a_template_without_branch_variables_gets_no_extra_probe(tmp_path):
    result, _ = _found(template_repo(tmp_path / "r", _PLAIN_BRANCH + _PROMPT, TOKENS))
    ta = result.check.terminators.templates[0]
    assert ta.branches == ()
    assert "branch_variables" not in result_to_dict(result)["templates"][0]
    assert "branch variables" not in render_explain(result)
