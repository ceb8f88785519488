"""The probe shapes: sentinel messages and the conversations built from them, and what one
render of a shape yields (``Probe``).

A sentinel is a plain alphanumeric string, so ``trim``, ``split`` and ``capitalize``-free
templates keep it intact; what the template writes around a sentinel is what a model
trained on that template learned to emit there.

``SPECS`` run on every template. Some shapes run only where they can show something: a
reasoning reply as a content part of each type the template names (``reasoning_part_specs``),
again with the flags that write a reasoning block when none was shown
(``flagged_reasoning_spec``), each shape again on the other side of a variable that chooses
a branch writing an assistant message or a tool call (``eosfix.analysis.branches``), and two
calls of two arguments in one message in the shape of the first single call the template
wrote (``several_calls_specs``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from eosfix.analysis.reads import mentions, reasoning_flags

SYSTEM = "Eosfixsystem0"
USER1 = "Eosfixuser1"
USER2 = "Eosfixuser2"
ASSISTANT0 = "Eosfixassistant0"
ASSISTANT1 = "Eosfixassistant1"
THINK1 = "Eosfixthink1"
TOOL = "eosfix_probe"
TOOL_ARG = "Eosfixarg1"
TOOL_RESULT = "Eosfixresult1"
CALL_ID = "a1b2c3d4e"  # nine alphanumerics: Mistral templates refuse other tool-call ids
CALL_ID2 = "f5g6h7i8j"
# Two calls of one message, two arguments each: what a template writes between them is
# written inside the turn (none is a substring of another, nor of TOOL_ARG).
FIRST_A, FIRST_B = "Eosfixfirsta", "Eosfixfirstb"
SECOND_A, SECOND_B = "Eosfixseconda", "Eosfixsecondb"
CALL_ARGS = (FIRST_A, FIRST_B, SECOND_A, SECOND_B)
CALL_CONTENT = "Eosfixcallcontent"  # text of a reply that also makes calls
# Where templates read a message's reasoning (google/minja include/minja/chat-template.hpp
# lists the patterns it detects; the corpus's render goldens use them too): fields
# ``reasoning_content`` (Qwen3, GLM), ``thinking`` (gpt-oss, LFM2.5, Command A), ``reasoning``
# (transformers aliases it to both), ``thought`` (MiniCPM3); and content parts of type
# "thinking" (Mistral, Command A's ``content[0].thinking``), "thoughts" (Apertus) or
# "reasoning", their text under the type's name or ``text``.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thought")  # ``thinking``: aliased
REASONING_PARTS = ("thinking", "reasoning", "thoughts")

TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": TOOL,
        "description": "A tool eosfix uses to see how tool calls are written",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "A query"}},
            "required": ["q"],
        },
    },
}


def user_message(text: str, parts: bool = False) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": text}] if parts else text
    return {"role": "user", "content": content}


def _assistant(text: str, parts: bool = False, **extra: Any) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": text}] if parts else text
    return {"role": "assistant", "content": content, **extra}


def _call(call_id: str, arguments: dict[str, str], args_as_string: bool) -> dict[str, Any]:
    args: Any = json.dumps(arguments) if args_as_string else arguments
    return {"id": call_id, "type": "function", "function": {"name": TOOL, "arguments": args}}


def _tool_call_message(args_as_string: bool, content: str | None) -> dict[str, Any]:
    call = _call(CALL_ID, {"q": TOOL_ARG}, args_as_string)
    return {"role": "assistant", "content": content, "tool_calls": [call]}


def _reasoning_part(part_type: str) -> dict[str, Any]:
    return {"type": part_type, part_type: THINK1, "text": THINK1}


_TOOL_RESULT_MSG = {"role": "tool", "tool_call_id": CALL_ID, "name": TOOL, "content": TOOL_RESULT}


class ProbeSpec(NamedTuple):
    """One input shape: which messages, which extra variables, and which sentinels matter."""

    name: str
    # "final" | "reasoning" | "history" | "tool_call" | "tool_calls" | "tool_result", and
    # "prompt" (a user message, add_generation_prompt=True) and "call_history" (a call probe's
    # message followed by its results: ``history_twin``), never in ``TemplateAnalysis.probes``
    kind: str
    messages: tuple[dict[str, Any], ...]
    kwargs: Mapping[str, Any] = {}
    end_marker: str = ASSISTANT1  # the assistant text whose tail is read
    next_marker: str | None = None  # the next turn's text (history shapes)


DOCUMENTS = [{"title": "Eosfixtitle", "text": "Eosfixdoc"}]


def _specs() -> tuple[ProbeSpec, ...]:
    tools = {"tools": [TOOL_SCHEMA]}
    return (
        ProbeSpec("final", "final", (user_message(USER1), _assistant(ASSISTANT1))),
        ProbeSpec(
            "final+system",
            "final",
            ({"role": "system", "content": SYSTEM}, user_message(USER1), _assistant(ASSISTANT1)),
        ),
        ProbeSpec(
            "final+parts", "final", (user_message(USER1, True), _assistant(ASSISTANT1, True))
        ),
        # Some templates iterate ``tools`` or ``documents`` unconditionally (Command R).
        ProbeSpec("final+tools", "final", (user_message(USER1), _assistant(ASSISTANT1)), tools),
        ProbeSpec(
            "final+documents",
            "final",
            (user_message(USER1), _assistant(ASSISTANT1)),
            {"documents": DOCUMENTS, "tools": []},
        ),
        # The legacy OpenAI "functions" role some function-calling templates require first.
        ProbeSpec(
            "final+functions",
            "final",
            (
                {"role": "functions", "content": json.dumps([TOOL_SCHEMA["function"]])},
                user_message(USER1),
                _assistant(ASSISTANT1),
            ),
        ),
        ProbeSpec(
            "final+reasoning",
            "reasoning",
            (
                user_message(USER1),
                {**_assistant(ASSISTANT1), **dict.fromkeys(REASONING_FIELDS, THINK1)},
            ),
        ),
        ProbeSpec(
            "history",
            "history",
            (
                user_message(USER1),
                _assistant(ASSISTANT0),
                user_message(USER2),
                _assistant(ASSISTANT1),
            ),
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        ProbeSpec(
            "history+system",
            "history",
            (
                {"role": "system", "content": SYSTEM},
                user_message(USER1),
                _assistant(ASSISTANT0),
                user_message(USER2),
                _assistant(ASSISTANT1),
            ),
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        # Templates that iterate ``tools`` unconditionally (Command R) render history only so.
        ProbeSpec(
            "history+tools",
            "history",
            (
                user_message(USER1),
                _assistant(ASSISTANT0),
                user_message(USER2),
                _assistant(ASSISTANT1),
            ),
            tools,
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        ProbeSpec(
            "tool_call",
            "tool_call",
            (user_message(USER1), _tool_call_message(False, None)),
            tools,
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+json_args",
            "tool_call",
            (user_message(USER1), _tool_call_message(True, None)),
            tools,
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+empty_content",
            "tool_call",
            (user_message(USER1), _tool_call_message(False, "")),
            {},
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+builtin_tools",
            "tool_call",
            (user_message(USER1), _tool_call_message(False, None)),
            {**tools, "builtin_tools": [TOOL]},
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_result",
            "tool_result",
            (user_message(USER1), _tool_call_message(False, None), dict(_TOOL_RESULT_MSG)),
            tools,
            end_marker=TOOL_ARG,
            next_marker=TOOL_RESULT,
        ),
    )


SPECS = _specs()


def reasoning_part_specs(source: str) -> tuple[ProbeSpec, ...]:
    """Replies whose reasoning is a content part, one per part type the template names
    (a template that never names ``"thoughts"`` cannot tell such a part from any other)."""
    used = mentions(source, frozenset(REASONING_PARTS))
    return tuple(
        ProbeSpec(
            f"final+{kind}_part",
            "reasoning",
            (user_message(USER1), _assistant_parts(_reasoning_part(kind))),
        )
        for kind in REASONING_PARTS
        if kind in used
    )


def flagged_reasoning_spec(source: str, rendered: Sequence[Probe]) -> ProbeSpec | None:
    """The reasoning reply again, with the variables that decide whether the template writes
    a reasoning block set to write it, when no reasoning probe showed the reasoning."""
    shown = any(
        p.spec.kind == "reasoning" and p.text is not None and find_marker(p.text, THINK1) >= 0
        for p in rendered
    )
    flags = () if shown else reasoning_flags(source)
    if not flags:
        return None
    spec = next(s for s in SPECS if s.kind == "reasoning")
    return spec._replace(name=f"{spec.name}+flags", kwargs=dict(flags))


def _assistant_parts(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [*parts, {"type": "text", "text": ASSISTANT1}]}


def several_calls_specs(rendered: Sequence[Probe]) -> tuple[ProbeSpec, ...]:
    """Two calls in one message, two arguments each, after some text of the reply, in the
    shape of the first single-call probe the template wrote (its variables and argument
    type); and one call with two arguments (its content as that probe's), for templates that
    refuse several calls."""
    base = next(
        (
            p.spec
            for p in rendered
            if p.spec.kind == "tool_call" and p.text is not None and p.tail_start is not None
        ),
        None,
    )
    if base is None:
        return ()
    user, message = base.messages[0], base.messages[-1]
    as_string = isinstance(message["tool_calls"][0]["function"]["arguments"], str)
    first = _call(CALL_ID, {"q": FIRST_A, "p": FIRST_B}, as_string)
    second = _call(CALL_ID2, {"q": SECOND_A, "p": SECOND_B}, as_string)
    two = {**message, "content": CALL_CONTENT, "tool_calls": [first, second]}
    one = {**message, "tool_calls": [first]}
    return (
        ProbeSpec("tool_calls+two", "tool_calls", (user, two), base.kwargs),
        ProbeSpec("tool_call+two_args", "tool_calls", (user, one), base.kwargs),
    )


def history_twin(spec: ProbeSpec) -> ProbeSpec:
    """A call probe's conversation again with a result for each of its calls after it: the
    same assistant message in history, where the model sees its own past replies."""
    calls = spec.messages[-1].get("tool_calls") or []
    results = tuple({**_TOOL_RESULT_MSG, "tool_call_id": call.get("id", CALL_ID)} for call in calls)
    return spec._replace(
        name=f"{spec.name}+result",
        kind="call_history",
        messages=(*spec.messages, *results),
        next_marker=TOOL_RESULT,
    )


def find_marker(text: str, marker: str, start: int = 0) -> int:
    """Offset of the first ``marker`` at or after ``start`` (-1: none), in any letter case.

    Templates may write content through ``upper``, ``lower``, ``capitalize`` or ``title``;
    the sentinels are ASCII letters and digits, so a case-blind match keeps offsets exact.
    """
    m = _marker_regex(marker).search(text, start)
    return -1 if m is None else m.start()


def rfind_marker(text: str, marker: str) -> int:
    """Offset of the last ``marker`` (-1: none), in any letter case."""
    last = -1
    for m in _marker_regex(marker).finditer(text):
        last = m.start()
    return last


@functools.lru_cache(maxsize=64)
def _marker_regex(marker: str) -> re.Pattern[str]:
    return re.compile(re.escape(marker), re.IGNORECASE)


class Probe(NamedTuple):
    """The outcome of one probe on one template: rendered text, or why it was refused."""

    spec: ProbeSpec
    template: str  # template name
    text: str | None = None
    refusal: str | None = None
    limit: str | None = None  # the render bound it hit ("time", "output", "sandbox"...)
    # Variables the template reads that no probe passes, given placeholders for this render
    # (their values are in ``spec.kwargs``): the render without them failed.
    placeholders: tuple[str, ...] = ()

    @property
    def tail_start(self) -> int | None:
        """Offset just after the last occurrence of the spec's end marker."""
        if self.text is None:
            return None
        pos = rfind_marker(self.text, self.spec.end_marker)
        return None if pos < 0 else pos + len(self.spec.end_marker)

    @property
    def next_start(self) -> int | None:
        """Offset of the next turn's sentinel after the end marker (history shapes)."""
        start = self.tail_start
        if start is None or self.spec.next_marker is None or self.text is None:
            return None
        pos = find_marker(self.text, self.spec.next_marker, start)
        return None if pos < 0 else pos
