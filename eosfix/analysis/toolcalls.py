"""Rule 2: what closes an assistant tool call (gpt-oss ``<|call|>``, Llama 3.1 builtin tools
``<|eom_id|>``), or, with nothing, the tool turn's opener that follows it (GLM); and which
control tokens a reply that makes tool calls writes before its last argument (never a
terminator). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from eosfix.analysis.positions import (
    IN_TOOL_CALL,
    TOOL_CALL,
    Gap,
    Sighting,
    SpecialScanner,
    read_opener,
    split_gap,
    tail_specials,
)
from eosfix.analysis.shapes import CALL_ARGS, TOOL_ARG, USER1, Probe, find_marker, rfind_marker


class Disagreement(NamedTuple):
    """A call probe's message rendered last (``final``) and in history (``history``), with
    the control tokens each writes before its last argument, where they differ."""

    final: Probe
    history: Probe
    final_tokens: tuple[str, ...]
    history_tokens: tuple[str, ...]


def in_call_tokens(
    probes: Sequence[Probe],
    scanner: SpecialScanner,
    generation_prompt: str | None,
    disagreements: Sequence[Disagreement] = (),
    openers: frozenset[str] = frozenset(),
) -> set[str]:
    """Control tokens a reply that makes tool calls writes before its last argument: the model
    writes more of that same message after them, so stopping there cuts it.

    Between two calls of one message, or two arguments of one call (``</tool_call>``,
    ``</arg_value>``: a probe with one call of one argument cannot tell them from what closes
    the reply), and after the assistant's opener (the generation prompt) before the first
    argument (``<tool_call>``, or a token that also closes plain replies, written between the
    reply's text and a call the model goes on to write).

    A call probe whose message renders otherwise in history (``disagreements``: the same
    message followed by its results, ``history_disagreements``) is read in history, after the
    last of its ``openers`` where the generation prompt is not written there: that is what
    the model sees of its own past replies (Nemotron-Nano-v2 closes the text and opens a
    second assistant block before the calls only when the conversation ends with them).
    """
    found: set[str] = set()
    differ = {d.final.spec.name: d.history for d in disagreements}
    for probe in probes:
        if probe.text is None or probe.spec.kind not in ("tool_call", "tool_calls"):
            continue
        twin = differ.get(probe.spec.name)
        read = probe if twin is None else twin
        text = read.text or ""
        spans = _call_spans(
            read, probe.spec.kind, generation_prompt, None if twin is None else openers
        )
        for span in spans:
            found.update(tok for tok, _ in scanner.find(text[span[0] : span[1]]))
    return found


def _call_spans(
    probe: Probe, kind: str, generation_prompt: str | None, openers: frozenset[str] | None
) -> list[tuple[int, int]]:
    """Where a call probe's message (of ``kind``) is written before its last argument:
    between its first and last argument (several calls or arguments), and from its opener
    to the first argument (after the generation prompt; ``openers``: where the prompt is not
    written, after the last of these before the call)."""
    text = probe.text or ""
    spans = [between_arguments(text)] if kind == "tool_calls" else []
    before = before_call(text, generation_prompt) if generation_prompt else None
    if before is None and openers is not None:
        before = _after_opener(text, openers)
    return [span for span in (*spans, before) if span is not None]


def _after_opener(text: str, openers: frozenset[str]) -> tuple[int, int] | None:
    """From the last control token that opens a turn after the user's message (a history
    reply's opener: ``<SPECIAL_11>``) to the call's first argument."""
    user = find_marker(text, USER1)
    args = [at for a in (TOOL_ARG, *CALL_ARGS) if (at := find_marker(text, a)) >= 0]
    if user < 0 or not args:
        return None
    ends = [at + len(tok) for tok in openers if (at := text.rfind(tok, user, min(args))) >= 0]
    return (max(ends), min(args)) if ends else None


def history_disagreements(
    probes: Sequence[Probe], twins: Sequence[Probe], scanner: SpecialScanner
) -> list[Disagreement]:
    """Call probes whose message writes other control tokens before its last argument when
    the conversation ends with it than when its results follow (both render the same
    arguments): only the part the model writes, from the user's message on."""
    by_name = {t.spec.name: t for t in twins if t.text is not None}
    out = []
    for probe in probes:
        twin = by_name.get(f"{probe.spec.name}+result")
        if twin is None or probe.text is None or twin.text is None:
            continue
        mine, theirs = _interior(probe.text, scanner), _interior(twin.text, scanner)
        if mine is None or theirs is None or mine[0] != theirs[0] or mine[1] == theirs[1]:
            continue
        out.append(Disagreement(probe, twin, mine[1], theirs[1]))
    return out


def _interior(text: str, scanner: SpecialScanner) -> tuple[frozenset[str], tuple[str, ...]] | None:
    """The arguments a render writes, and its control tokens between the user's message and
    its last argument (None: no user message or no argument)."""
    user = find_marker(text, USER1)
    args = {a: rfind_marker(text, a) for a in (TOOL_ARG, *CALL_ARGS)}
    present = {a: at for a, at in args.items() if at >= 0}
    if user < 0 or not present:
        return None
    end = max(present.values())
    tokens = tuple(tok for tok, _ in scanner.find(text[user + len(USER1) : end]))
    return frozenset(present), tokens


def wants_history(
    probes: Sequence[Probe],
    scanner: SpecialScanner,
    generation_prompt: str | None,
    openers: frozenset[str],
) -> list[Probe]:
    """Call probes worth rendering again in history (``eosfix.analysis.shapes.
    history_twin``): those that write, before their last argument, a token the template
    also writes to close a reply (after its text, before the next turn's ``openers``):
    whether that token is written inside the message decides what can end a reply."""
    inside: dict[int, set[str]] = {}
    for i, probe in enumerate(probes):
        if probe.text is None or probe.spec.kind not in ("tool_call", "tool_calls"):
            continue
        spans = _call_spans(probe, probe.spec.kind, generation_prompt, None)
        found = {tok for a, b in spans for tok, _ in scanner.find(probe.text[a:b])}
        if found:
            inside[i] = found
    if not inside:
        return []
    closing = {
        tok
        for probe in probes
        if probe.spec.kind in ("final", "history")
        for tok, _ in tail_specials(probe, scanner, openers)
    }
    return [probes[i] for i, found in inside.items() if found & closing]


def between_calls_tokens(probes: Sequence[Probe], scanner: SpecialScanner) -> set[str]:
    """Control tokens written between two calls of one message or two arguments of one call."""
    found: set[str] = set()
    for probe in probes:
        span = between_arguments(probe.text or "") if probe.spec.kind == "tool_calls" else None
        if span is not None and probe.text is not None:
            found.update(tok for tok, _ in scanner.find(probe.text[span[0] : span[1]]))
    return found


def between_arguments(text: str) -> tuple[int, int] | None:
    """From the end of the first argument written to the start of the last one (a probe of
    several calls and arguments), or None when fewer than two are written."""
    firsts = [(at, arg) for arg in CALL_ARGS if (at := find_marker(text, arg)) >= 0]
    lasts = [rfind_marker(text, arg) for arg in CALL_ARGS]
    if len(firsts) < 2:
        return None
    at, arg = min(firsts)
    return at + len(arg), max(lasts)


def before_call(text: str, generation_prompt: str) -> tuple[int, int] | None:
    """From the end of the assistant's opener (the first after the user's message: a template
    may open the turn again for the call) to the call's first argument."""
    user = find_marker(text, USER1)
    args = [at for a in (TOOL_ARG, *CALL_ARGS) if (at := find_marker(text, a)) >= 0]
    if user < 0 or not args:
        return None
    start = text.find(generation_prompt, user + len(USER1), min(args))
    return None if start < 0 else (start + len(generation_prompt), min(args))


def read_tool_calls(
    probes: Sequence[Probe],
    scanner: SpecialScanner,
    openers: frozenset[str],
    in_turn: set[str],
    conversation_end: set[str],
    generation_prompt: str | None = None,
) -> list[Sighting]:
    """Rule 2: what closes an assistant tool call (gpt-oss ``<|call|>``, Llama 3.1 builtin
    tools ``<|eom_id|>``); with nothing, the tool turn's opener that follows (GLM).

    The last token of the call's tail closes it (earlier ones close one call of several:
    they are written inside the turn, like the tokens that open a call); tokens written only
    because the conversation ends there are dropped first, and so are tokens written inside
    the turn (``in_turn``: between reasoning and answer, between two calls or arguments).
    """
    tails = []
    out: list[Sighting] = []
    # No control token after a call in final position but those written between two calls
    # (the loop's own: GLM writes </tool_call> after each call, and nothing after the loop).
    between = between_calls_tokens(probes, scanner)
    wrote_nothing = True
    for probe in probes:
        if probe.spec.kind == "tool_call" and probe.text is not None:
            out += _call_syntax(probe, scanner, generation_prompt, openers)
            after = tail_specials(probe, scanner, frozenset())
            wrote_nothing &= all(tok in between for tok, _ in after)
            tail = [h for h in tail_specials(probe, scanner, openers) if h[0] not in in_turn]
            while len(tail) > 1 and tail[-1][0] in conversation_end:
                tail.pop()
            tails.append((probe, tail))
    # A token that another shape follows with more control tokens is not turn-level
    # (LFM2 writes <|tool_call_end|> and then, when there is content, <|im_end|>).
    followed = {tok for _, tail in tails for tok, _ in tail[:-1]}
    for probe, tail in tails:
        out += [Sighting(t, IN_TOOL_CALL, probe, p) for t, p in tail[:-1]]
        if tail and tail[-1][0] not in followed:
            out.append(Sighting(tail[-1][0], TOOL_CALL, probe, tail[-1][1], TOOL_CALL))
    closing = {t for _, tail in tails for t, _ in tail}
    for probe in probes:
        if probe.spec.kind != "tool_result" or probe.text is None:
            continue
        gap = split_gap(probe, scanner, openers, _last_special(probe, scanner), frozenset(closing))
        if gap is not None:
            out += _read_tool_gap(gap, closing, in_turn, wrote_nothing)
    return out


def _call_syntax(
    probe: Probe, scanner: SpecialScanner, generation_prompt: str | None, openers: frozenset[str]
) -> list[Sighting]:
    """Positions only: control tokens between the assistant opener and a call's arguments
    (``<tool_call>``, ``<|tool_calls_begin|>``): written inside the turn."""
    text, args = probe.text or "", probe.tail_start
    if args is None:
        return []
    start = text.rfind(generation_prompt, 0, args) if generation_prompt else -1
    if start >= 0:
        start += len(generation_prompt or "")
    else:  # the call's turn opens differently: start after the last opener token
        hits = [(t, p) for t, p in scanner.find(text[:args]) if t in openers]
        if not hits:
            return []
        start = hits[-1][1] + len(hits[-1][0])
    return [
        Sighting(tok, IN_TOOL_CALL, probe, start + pos)
        for tok, pos in scanner.find(text[start:args])
        if tok not in openers
    ]


def _last_special(probe: Probe, scanner: SpecialScanner) -> str | None:
    """The last control token before the next message (the tool turn's opener, if any)."""
    if probe.text is None or probe.tail_start is None or probe.next_start is None:
        return None
    hits = scanner.find(probe.text[probe.tail_start : probe.next_start])
    return hits[-1][0] if hits else None


def _read_tool_gap(
    gap: Gap, closing: set[str], in_turn: set[str], wrote_nothing: bool
) -> list[Sighting]:
    """A tool call followed by its result: no closer means the tool turn's opener ends the
    call; a closer the final-position call never writes must be a stop id too.

    The opener is required only when a call in final position is followed by no control
    token at all (GLM). A template that writes a whole new turn after the last call (Command
    R's tool_use appends a system turn) shows an opener, not what the model writes after the
    call: that opener is reported as an acceptable stop, not required.
    """
    closer = [(t, p) for t, p in gap.closer if t not in in_turn]
    if not closer:  # nothing, or only tokens written inside the turn, follows the call
        found = read_opener(gap, in_turn)
        if wrote_nothing:
            return found
        return [s._replace(kind=None, acceptable=True) for s in found]
    if closer[-1][0] in closing or closing & {t for t, _ in closer}:
        return [Sighting(t, TOOL_CALL, gap.probe, p) for t, p in closer]
    out = [Sighting(t, TOOL_CALL, gap.probe, p) for t, p in closer[:-1]]
    tok, pos = closer[-1]
    return [*out, Sighting(tok, TOOL_CALL, gap.probe, pos, TOOL_CALL)]
