"""Generated chat templates (hypothesis): the shapes of this project's issues with token names
nobody has seen. Every report keeps the invariants of ``tests.support.invariants``, and what each
shape is known to need holds: the reply's closer ends a turn, a turn's opener or a call's
opening tag never does, a tool call reached only through a branch variable is found, a guard
template names only what closes its prompt's turn and no stop string."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosfix import api
from tests.support.invariants import contradictions, template_repo

WORDS = st.sampled_from(
    ["fin", "stop", "halt", "close", "done", "open", "turn", "hdr", "msg", "seg", "blk",
     "act", "run", "tag", "cue", "mark", "node", "unit", "part", "knot", "zed", "quux"]
)  # fmt: skip
SHAPES = ("<|{}|>", "<{}>", "[{}]", "<｜{}｜>")


@dataclass(frozen=True)
class Names:
    opener: str  # opens every turn (with the role's name after it)
    closer: str  # closes every reply
    after: str | None  # written after the closer of every reply
    last: str | None  # closes the last reply instead of the closer (gpt-oss-like)
    end: str | None  # written once the conversation ends (Phi-3-like)
    call_open: str
    call_close: str
    calls_done: str | None  # closes the call list before the reply's closer
    gate: str | None  # the variable the tool branch is written under
    split: bool  # the last reply's text and its calls in two blocks (Nemotron-like)
    # reasoning: None, "tags" (between a tag pair of its own) or "closer" (closed by the
    # reply's closer, the answer in a second block opened as a turn: gpt-oss-like)
    reasoning: str | None = None
    think: tuple[str, str] = ("", "")


@st.composite
def names(draw) -> Names:
    words = draw(st.lists(WORDS, min_size=10, max_size=10, unique=True))
    shape = draw(st.sampled_from(SHAPES))
    tok = [shape.format(w.upper() if shape.startswith("[") else w) for w in words]
    maybe = draw(st.lists(st.booleans(), min_size=5, max_size=5))
    last = tok[3] if maybe[1] else None
    return Names(
        opener=tok[0],
        closer=tok[1],
        after=tok[2] if maybe[0] else None,
        last=last,
        end=tok[4] if maybe[2] and last is None else None,
        call_open=tok[5],
        call_close=tok[6],
        calls_done=tok[7] if maybe[3] else None,
        gate=draw(st.sampled_from(["retrieval", "agent_mode", "ctx_docs"])) if maybe[4] else None,
        split=draw(st.booleans()),
        reasoning=draw(st.sampled_from([None, "tags", "closer"])),
        think=(tok[8], tok[9]),
    )


def chat_template(n: Names) -> str:
    after = n.after or ""
    close = f"{n.closer}{after}"
    last = (
        f"{{% if loop.last %}}{n.last}{after}{{% else %}}{close}{{% endif %}}" if n.last else close
    )
    calls = (
        f"{{% for c in m.tool_calls %}}{n.call_open}{{{{ c.function.arguments | tojson }}}}"
        f"{n.call_close}{{% endfor %}}{n.calls_done or ''}"
    )
    if n.split:  # the last reply, when it makes calls after text: two blocks
        reply = (
            "{% if loop.last and m.content and m.tool_calls %}{{ m.content }}" + close
            + f"{n.opener}assistant\n" + calls + last
            + "{% else %}{{ m.content or '' }}{% if m.tool_calls %}" + calls + "{% endif %}"
            + last + "{% endif %}"
        )  # fmt: skip
    else:
        reply = "{{ m.content or '' }}{% if m.tool_calls %}" + calls + "{% endif %}" + last
    if n.reasoning == "tags":
        think = f"{n.think[0]}{{{{ m.reasoning_content }}}}{n.think[1]}"
    else:
        think = f"{{{{ m.reasoning_content }}}}{close}{n.opener}assistant\n"
    if n.reasoning:
        reply = "{% if m.reasoning_content %}" + think + "{% endif %}" + reply
    plain = "{{ m.content or '' }}" + last
    if n.gate:
        reply = f"{{% if {n.gate} %}}{reply}{{% else %}}{plain}{{% endif %}}"
    turn = (
        f"{{% for m in messages %}}{n.opener}{{{{ m.role }}}}\n"
        f"{{% if m.role == 'assistant' %}}{reply}{{% else %}}{{{{ m.content }}}}{close}"
        "{% endif %}\n{% endfor %}"
    )
    end = f"{{% else %}}{n.end}" if n.end else ""
    return turn + f"{{% if add_generation_prompt %}}{n.opener}assistant\n{end}{{% endif %}}"


def guard_template(n: Names, style: str) -> str:
    """The conversation quoted inside one user turn; the instructions name the last role.
    ``style``: the reply's opener as the generation prompt, always written (Llama Guard 3),
    or always written after a fixed system turn closed like the prompt's."""
    system = f"{n.opener}system\nYou judge safety.{n.closer}\n" if style == "system" else ""
    opener = f"{n.opener}assistant\n"
    reply = (
        f"{{% if add_generation_prompt %}}{opener}{{% endif %}}" if style == "prompt" else opener
    )
    return (
        f"{system}{n.opener}user\nIs the last {{{{ messages[-1].role }}}} message safe?\n"
        "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n{% endfor %}"
        f"Answer safe or unsafe.{n.closer}\n{reply}"
    )


def _tokens(n: Names) -> list[str]:
    found = [n.closer, n.opener, n.after, n.last, n.end, n.call_open, n.call_close, n.calls_done]
    if n.reasoning == "tags":
        found += n.think
    return [t for t in found if t]


SETTINGS = settings(
    max_examples=int(os.environ.get("EOSFIX_SHAPE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(names(), st.booleans())
def test_a_generated_chat_template(n, healthy):
    with tempfile.TemporaryDirectory() as tmp:
        stop = [n.last or n.closer] if healthy else []
        repo = template_repo(Path(tmp) / "repo", chat_template(n), _tokens(n), stop=stop)
        (Path(tmp) / "work").mkdir()
        assert contradictions(repo, Path(tmp) / "work") == []
        c = api.check(repo).check
        found = {t.content for t in c.terminators.terminators}
        closes = n.last or n.closer
        codes = {f.code for f in c.findings}
        if n.reasoning == "closer" and not n.last:
            assert n.closer not in found  # it also ends the reasoning, inside the turn
            if n.end is None:  # and nothing else ends the reply: EOS010
                assert "EOS010" in codes
            else:  # the conversation's end token is the one that does not cut
                assert n.end in found
            return
        assert closes in found, (found, chat_template(n))
        assert n.opener not in found
        assert n.call_open not in found
        assert c.stop_strings == ()
        proposed = set(c.proposed or c.stop.ids or ())
        by_id = {i.id: t for t, i in c.repo.added_tokens.items()}
        assert not {by_id.get(i) for i in proposed} & {n.opener, n.call_open}
        if n.gate:  # the calls are reached on the side of the gate the probes set
            ta = c.terminators.templates[0]
            assert ta.branches
            assert ta.branches[0][0] == n.gate
            assert any(p.spec.kind == "tool_call" and n.call_open in (p.text or "")
                       for p in ta.rendered)  # fmt: skip
        if n.split and not n.calls_done and not n.after and not n.last:
            # the split shows the closer before the calls only at the end: history is followed
            assert n.closer not in c.terminators.in_call


@SETTINGS
@given(names(), st.sampled_from(["prompt", "always", "system"]))
def test_a_generated_guard_template(n, style):
    with tempfile.TemporaryDirectory() as tmp:
        template = guard_template(n, style)
        repo = template_repo(Path(tmp) / "repo", template, [n.closer, n.opener], stop=[])
        (Path(tmp) / "work").mkdir()
        assert contradictions(repo, Path(tmp) / "work") == []
        c = api.check(repo).check
        assert [t.content for t in c.terminators.terminators] == [n.closer]
        assert c.stop_strings == ()
        assert c.terminators.templates[0].quoted is not None
