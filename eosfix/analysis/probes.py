"""Probes: renders of a chat template with sentinel messages, used as evidence.

A sentinel is a plain alphanumeric string, so ``trim``, ``split`` and ``capitalize``-free
templates keep it intact; what the template writes around a sentinel is what a model
trained on that template learned to emit there.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2

from eosfix.analysis.template import TemplateRefusal, render_chat
from eosfix.core.limits import RenderLimitExceeded, SandboxEscape

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


def _user(text: str, parts: bool = False) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": text}] if parts else text
    return {"role": "user", "content": content}


def _assistant(text: str, parts: bool = False, **extra: Any) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": text}] if parts else text
    return {"role": "assistant", "content": content, **extra}


def _tool_call_message(args_as_string: bool, content: str | None) -> dict[str, Any]:
    arguments: Any = {"q": TOOL_ARG}
    if args_as_string:
        arguments = json.dumps(arguments)
    call = {"id": CALL_ID, "type": "function", "function": {"name": TOOL, "arguments": arguments}}
    return {"role": "assistant", "content": content, "tool_calls": [call]}


_TOOL_RESULT_MSG = {"role": "tool", "tool_call_id": CALL_ID, "name": TOOL, "content": TOOL_RESULT}


@dataclass(frozen=True)
class ProbeSpec:
    """One input shape: which messages, which extra variables, and which sentinels matter."""

    name: str
    kind: str  # "final" | "reasoning" | "history" | "tool_call" | "tool_result"
    messages: tuple[dict[str, Any], ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    end_marker: str = ASSISTANT1  # the assistant text whose tail is read
    next_marker: str | None = None  # the next turn's text (history shapes)


def _specs() -> tuple[ProbeSpec, ...]:
    tools = {"tools": [TOOL_SCHEMA]}
    return (
        ProbeSpec("final", "final", (_user(USER1), _assistant(ASSISTANT1))),
        ProbeSpec(
            "final+system",
            "final",
            ({"role": "system", "content": SYSTEM}, _user(USER1), _assistant(ASSISTANT1)),
        ),
        ProbeSpec("final+parts", "final", (_user(USER1, True), _assistant(ASSISTANT1, True))),
        # Some templates iterate ``tools`` or ``documents`` unconditionally (Command R).
        ProbeSpec("final+tools", "final", (_user(USER1), _assistant(ASSISTANT1)), tools),
        ProbeSpec(
            "final+documents",
            "final",
            (_user(USER1), _assistant(ASSISTANT1)),
            {"documents": [{"title": "Eosfixtitle", "text": "Eosfixdoc"}], "tools": []},
        ),
        # The legacy OpenAI "functions" role some function-calling templates require first.
        ProbeSpec(
            "final+functions",
            "final",
            (
                {"role": "functions", "content": json.dumps([TOOL_SCHEMA["function"]])},
                _user(USER1),
                _assistant(ASSISTANT1),
            ),
        ),
        ProbeSpec(
            "final+reasoning",
            "reasoning",
            (_user(USER1), _assistant(ASSISTANT1, reasoning_content=THINK1)),
        ),
        ProbeSpec(
            "history",
            "history",
            (_user(USER1), _assistant(ASSISTANT0), _user(USER2), _assistant(ASSISTANT1)),
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        ProbeSpec(
            "history+system",
            "history",
            (
                {"role": "system", "content": SYSTEM},
                _user(USER1),
                _assistant(ASSISTANT0),
                _user(USER2),
                _assistant(ASSISTANT1),
            ),
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        # Templates that iterate ``tools`` unconditionally (Command R) render history only so.
        ProbeSpec(
            "history+tools",
            "history",
            (_user(USER1), _assistant(ASSISTANT0), _user(USER2), _assistant(ASSISTANT1)),
            tools,
            end_marker=ASSISTANT0,
            next_marker=USER2,
        ),
        ProbeSpec(
            "tool_call",
            "tool_call",
            (_user(USER1), _tool_call_message(False, None)),
            tools,
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+json_args",
            "tool_call",
            (_user(USER1), _tool_call_message(True, None)),
            tools,
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+empty_content",
            "tool_call",
            (_user(USER1), _tool_call_message(False, "")),
            {},
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_call+builtin_tools",
            "tool_call",
            (_user(USER1), _tool_call_message(False, None)),
            {**tools, "builtin_tools": [TOOL]},
            end_marker=TOOL_ARG,
        ),
        ProbeSpec(
            "tool_result",
            "tool_result",
            (_user(USER1), _tool_call_message(False, None), dict(_TOOL_RESULT_MSG)),
            tools,
            end_marker=TOOL_ARG,
            next_marker=TOOL_RESULT,
        ),
    )


SPECS = _specs()


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


@dataclass(frozen=True)
class Probe:
    """The outcome of one probe on one template: rendered text, or why it was refused."""

    spec: ProbeSpec
    template: str  # template name
    text: str | None = None
    refusal: str | None = None
    limit: str | None = None  # the render bound it hit ("time", "output", "sandbox"...)

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


# What a template can raise from inside the sandbox (besides raise_exception).
RENDER_ERRORS = (
    jinja2.TemplateError,
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    ZeroDivisionError,
    OverflowError,
    RecursionError,
)


def run_probe(
    source: str, template_name: str, spec: ProbeSpec, special_tokens: Mapping[str, str]
) -> Probe:
    """Render one probe; a refusal or error is kept as evidence, never raised."""
    try:
        text = render_chat(
            source,
            [dict(m) for m in spec.messages],
            special_tokens=special_tokens,
            add_generation_prompt=False,
            **dict(spec.kwargs),
        )
    except TemplateRefusal as exc:
        return Probe(spec, template_name, refusal=f"raise_exception: {exc}")
    except (RenderLimitExceeded, SandboxEscape) as exc:
        return Probe(spec, template_name, refusal=str(exc), limit=exc.limit)
    except RENDER_ERRORS as exc:
        return Probe(spec, template_name, refusal=f"{type(exc).__name__}: {exc}")
    return Probe(spec, template_name, text=text)


def run_generation_prompt(source: str, special_tokens: Mapping[str, str]) -> str | None:
    """What ``add_generation_prompt=True`` appends after a user turn: the assistant opener."""
    user: list[Mapping[str, Any]] = [_user(USER1)]
    shapes: tuple[tuple[list[Mapping[str, Any]], dict[str, Any]], ...] = (
        (user, {}),
        (user, {"tools": [TOOL_SCHEMA]}),
    )
    for messages, extra in shapes:
        try:
            without, with_prompt = (
                render_chat(
                    source,
                    messages,
                    special_tokens=special_tokens,
                    add_generation_prompt=flag,
                    **extra,
                )
                for flag in (False, True)
            )
        except (TemplateRefusal, *RENDER_ERRORS):
            continue
        return with_prompt[_divergence(without, with_prompt) :]
    return None


def _divergence(without: str, with_prompt: str) -> int:
    """Where the generation prompt starts: after the common prefix of both renders.

    A template may write something *instead of* the prompt (Phi-3 writes ``<|endoftext|>``
    in the ``else`` of ``add_generation_prompt``): the renders then part inside a token
    (``<|end|>\n<|`` + ``assistant|>`` / ``endoftext|>``), so back up to a token boundary.
    """
    n = 0
    while n < min(len(without), len(with_prompt)) and without[n] == with_prompt[n]:
        n += 1
    if n < len(without):
        while n > 0 and not with_prompt[n - 1].isspace() and with_prompt[n - 1] not in ">]":
            n -= 1
    return n
