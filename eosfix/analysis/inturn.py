"""Where a chat template writes a token inside an assistant turn, with the rendered evidence.

``eosfix.analysis.positions`` places control tokens; this module finds, for one token (a control
token placed ``in_turn`` / ``in_tool_call``, or an added token the tokenizer treats as text,
such as ``</think>``), the probe text that shows it inside the turn, for a person to read.
Pure.
"""

from __future__ import annotations

from eosfix.analysis.positions import EVERY_REPLY, FINAL_REPLY, IN_TURN, LAST_REPLY
from eosfix.analysis.shapes import ASSISTANT1, THINK1, Probe
from eosfix.analysis.terminators import TemplateAnalysis, TerminatorSet
from eosfix.analysis.toolcalls import between_arguments

_EVIDENCE_CHARS = 40


def in_turn_sighting(
    ta: TemplateAnalysis, token: str, *, whole_call: bool = True
) -> tuple[str, str] | None:
    """Where ``ta`` writes ``token`` inside an assistant turn, with the rendered evidence.

    Between reasoning and answer (a reasoning probe), or in a reply that makes a tool call:
    after the generation prompt, up to the call's arguments, or between two calls of one
    reply or two arguments of one call (``whole_call``: also up to the end of the render, for
    a control token ``eosfix.analysis.positions`` placed inside the call). When the
    template has no generation prompt and writes the token before a plain reply's text too
    (Mistral's ``[/INST]``), the model's output cannot be told from the prompt: not counted.
    """
    for probe in ta.rendered:
        text = probe.text or ""
        if probe.spec.kind == "reasoning":
            think, answer = text.rfind(THINK1), text.rfind(ASSISTANT1)
            at = text.find(token, think + len(THINK1), answer) if 0 <= think < answer else -1
            if at >= 0:
                return "between the reasoning and the answer", _evidence(text, at, token)
    if _before_plain_reply(ta, token):
        return None
    gp = ta.generation_prompt or ""
    for probe in ta.rendered if gp else ():
        text = probe.text or ""
        think = text.rfind(THINK1) if probe.spec.kind == "reasoning" else -1
        opener = text.rfind(gp, 0, think) if think >= 0 else -1
        at = text.find(token, opener + len(gp), think) if opener >= 0 else -1
        if at >= 0:
            return "where the reply opens, before its reasoning", _evidence(text, at, token)
    for whole in (False, True) if whole_call else (False,):
        for probe in ta.rendered:
            if probe.spec.kind == "tool_call":
                found = _in_call(probe, token, ta.generation_prompt, whole)
                if found is not None:
                    where = "in a reply that makes a tool call"
                    return where, _evidence(probe.text or "", found, token)
        for probe in ta.rendered if not whole else ():
            text = probe.text or ""
            span = between_arguments(text) if probe.spec.kind == "tool_calls" else None
            at = text.find(token, *span) if span is not None else -1
            if at >= 0:
                where = "between two tool calls of one reply, or two arguments of one call"
                return where, _evidence(text, at, token)
    return None


def _before_plain_reply(ta: TemplateAnalysis, token: str) -> bool:
    """The token is written before a plain reply's text, where no generation prompt tells
    the prompt from what the model writes (with one, what follows it is the model's)."""
    final = next((p.text for p in ta.rendered if p.spec.name == "final"), None)
    if final is None or ASSISTANT1 not in final:
        return False
    prefix = final[: final.rfind(ASSISTANT1)]
    gp = ta.generation_prompt
    return not (gp and gp in prefix) and token in prefix


def _in_call(
    probe: Probe, token: str, generation_prompt: str | None, whole_call: bool
) -> int | None:
    """Offset of ``token`` after the assistant's opener: up to the end of the call's
    arguments, or (``whole_call``) up to the next message."""
    text = probe.text or ""
    args = probe.tail_start
    if args is None:
        return None
    start = text.rfind(generation_prompt, 0, args) if generation_prompt else -1
    start = start + len(generation_prompt or "") if start >= 0 else 0
    at = text.find(token, start)
    end = probe.next_start if probe.next_start is not None else len(text)
    return at if 0 <= at < (end if whole_call else args) else None


def _evidence(text: str, at: int, token: str) -> str:
    lo, hi = max(0, at - _EVIDENCE_CHARS), min(len(text), at + len(token) + _EVIDENCE_CHARS)
    return ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def closers_inside_a_turn(ts: TerminatorSet) -> list[str]:
    """Tokens written inside a turn (between reasoning and answer, or by a reply that makes
    tool calls before its last argument) that close the last reply, when no other token
    does: no stop id ends such a reply without cutting another (EOS010, EOS016)."""
    closes = {EVERY_REPLY, LAST_REPLY, FINAL_REPLY}
    if any(closes & {p.where for p in t.placements} for t in ts.terminators):
        return []
    inside = {*ts.in_turn, *ts.in_call}
    return [
        token
        for token, wheres in ts.positions().items()
        if (IN_TURN in wheres or token in inside) and closes & set(wheres)
    ]


def closers_inside_a_call(ts: TerminatorSet) -> list[str]:
    """Of ``closers_inside_a_turn``, those written by a reply that makes tool calls before
    more of its own text, and not between reasoning and answer (EOS016)."""
    return [t for t in closers_inside_a_turn(ts) if t in ts.in_call and t not in ts.in_turn]
