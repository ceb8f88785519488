"""Rules 1, 3 and 4: what closes an assistant reply, placed against history.

The final reply (the conversation ends there) is compared with the same reply in history
(another turn follows); ``eosfix.analysis.positions`` names the places. Everything is pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from eosfix.analysis.positions import (
    CONVERSATION_END,
    EARLIER_REPLIES,
    EVERY_REPLY,
    FINAL_REPLY,
    HISTORY_REPLY,
    LAST_REPLY,
    TURN_END,
    VERDICT,
    Gap,
    Hit,
    Sighting,
    SpecialScanner,
    common_prefix,
    last_special_before,
    read_opener,
    split_gap,
    tail_specials,
    verdict_closer,
)
from eosfix.analysis.shapes import USER1, Probe
from eosfix.analysis.toolcalls import read_tool_calls


def read_final(
    probe: Probe, tail: Sequence[Hit], history: Gap | None, in_turn: set[str]
) -> list[Sighting]:
    """Place the tokens after the last reply against the history closer (rule 1).

    The first of them is required: it is the first token the model emits after a complete
    reply. Shared with the history closer, it is written after every reply and what follows
    it only when the conversation ends; not shared, it replaces the history closer.
    """
    final = [h for h in tail if h[0] not in in_turn]
    seen = _in_turn_seen(probe, tail, history, in_turn)
    if not final:
        return seen
    first, pos = final[0]
    if history is None:
        out = [Sighting(first, FINAL_REPLY, probe, pos, TURN_END, True)]
        return out + [Sighting(t, FINAL_REPLY, probe, p, None, True) for t, p in final[1:]] + seen
    closer = [t for t, _ in history.closer if t not in in_turn]
    shared = common_prefix([t for t, _ in final], closer)
    if shared:
        out = [Sighting(first, EVERY_REPLY, probe, pos, TURN_END, True)]
        out += [
            Sighting(t, EVERY_REPLY, probe, p, None, True, (first,)) for t, p in final[1:shared]
        ]
    else:
        replaced = tuple(dict.fromkeys(t for t, _ in history.closer))[:1]
        out = [Sighting(first, LAST_REPLY, probe, pos, TURN_END, True, replaced)]
    after = final[shared - 1][0] if shared else first
    rest = final[max(shared, 1) :]
    return [
        *out,
        *(
            Sighting(t, CONVERSATION_END, probe, p, CONVERSATION_END, True, (after,))
            for t, p in rest
        ),
        *seen,
    ]


def _in_turn_seen(
    probe: Probe, tail: Sequence[Hit], history: Gap | None, in_turn: set[str]
) -> list[Sighting]:
    """Positions only: in-turn tokens the final reply's closer writes too (gpt-oss-like
    templates close the reasoning message and history replies with the same token)."""
    closing = {t for t, _ in history.closer} if history is not None else set()
    where = FINAL_REPLY if history is None else LAST_REPLY
    return [
        Sighting(t, EVERY_REPLY if t in closing else where, probe, p)
        for t, p in tail
        if t in in_turn
    ]


def read_history(gap: Gap, final: Sequence[str] | None, in_turn: set[str]) -> list[Sighting]:
    """Place a history closer against the final one; with no closer, the next turn's opener
    (rule 3), or with no control token at all, the plain text between turns (rule 4)."""
    probe = gap.probe
    if not gap.closer:
        return read_opener(gap, in_turn)
    seen = [  # positions only: in-turn tokens that close history replies too
        Sighting(t, EVERY_REPLY if final and t in final else EARLIER_REPLIES, probe, p)
        for t, p in gap.closer
        if t in in_turn
    ]
    closer = [(t, p) for t, p in gap.closer if t not in in_turn]
    if final is None:  # no final probe rendered: nothing to compare with
        return seen + [
            Sighting(t, HISTORY_REPLY, probe, p, TURN_END if i == 0 else None, True)
            for i, (t, p) in enumerate(closer)
        ]
    final_kept = [t for t in final if t not in in_turn]
    shared = common_prefix(final_kept, [t for t, _ in closer])
    out = [Sighting(t, EVERY_REPLY, probe, p, None, True) for t, p in closer[:shared]]
    ends_last = tuple(final_kept[:1])
    for i, (t, p) in enumerate(closer[shared:]):
        first = i == 0 and not shared
        out.append(
            Sighting(t, EARLIER_REPLIES, probe, p, TURN_END if first else None, True, ends_last)
        )
    return out + seen


def read_template(
    probes: Sequence[Probe],
    generation_prompt: str | None,
    scanner: SpecialScanner,
    in_turn: set[str],
    prompt: Probe | None,
    openers: frozenset[str],
) -> list[Sighting]:
    """Every sighting of one template's probes (replies, history, tool calls); ``openers``:
    the control tokens that open its assistant turn (``turn_openers``). With ``prompt`` (a
    template that quotes its assistant messages: ``eosfix.analysis.positions.quoted_reply``),
    only what closes the prompt's turn before its reply position: no quoted message is a
    turn."""
    if prompt is not None:
        return read_verdict(prompt, generation_prompt, openers, scanner)
    rendered = [p for p in probes if p.text is not None]
    finals = [
        (p, tail_specials(p, scanner, openers))
        for p in rendered
        if p.spec.kind in ("final", "reasoning") and p.tail_start is not None
    ]
    history = history_gap(rendered, scanner, openers, finals)
    out: list[Sighting] = []
    for probe, tail in finals:
        out += read_final(probe, tail, history, in_turn)
    if history is not None:
        final = [t for t, _ in finals[0][1]] if finals else None
        out += read_history(history, final, in_turn)
    ended = {s.token for s in out if s.where == CONVERSATION_END}
    calls = read_tool_calls(rendered, scanner, openers, in_turn, ended, generation_prompt)
    return out + calls


def read_verdict(
    prompt: Probe, generation_prompt: str | None, openers: frozenset[str], scanner: SpecialScanner
) -> list[Sighting]:
    """A quoting template's verdict is written at the prompt's reply position, in a turn
    opened as the prompt's own: it ends as the prompt's turn does, with the first control token
    that closes it (the rest of that closer: acceptable stops)."""
    closer = verdict_closer(prompt, generation_prompt, openers, scanner)
    return [
        Sighting(t, VERDICT, prompt, p, TURN_END if i == 0 else None, True)
        for i, (t, p) in enumerate(closer)
    ]


def history_gap(
    rendered: Sequence[Probe],
    scanner: SpecialScanner,
    openers: frozenset[str],
    finals: Sequence[tuple[Probe, Sequence[Hit]]],
) -> Gap | None:
    """The first history probe's gap, split into the reply's closer and the user's opener."""
    keep = frozenset(t for _, tail in finals for t, _ in tail)
    for probe in rendered:
        if probe.spec.kind != "history":
            continue
        role_opener = last_special_before(probe, USER1, scanner)
        gap = split_gap(probe, scanner, openers, role_opener, keep)
        if gap is not None:
            return gap
    return None
