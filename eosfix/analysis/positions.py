"""Where a chat template writes each control token, relative to the assistant's replies.

A probe's text is cut at the assistant text it probes (a sentinel). What follows, up to where
another turn opens, *closes* the reply; the next turn's leading control tokens *open* that
turn. Comparing the closer of the final reply (the conversation ends there) with the closer of
the same reply in history (another turn follows) places every token (``WHERE``):

- ``every_reply``: written after every reply: final and history agree;
- ``last_reply``: written after the last reply only, instead of what closes replies in
  history (gpt-oss ``<|return|>``, while history replies end with ``<|end|>``);
- ``earlier_replies``: written after replies another turn follows, never after the last one;
- ``conversation_end``: written once, after the last reply's own closer, when the whole
  conversation ends (Phi-3 ``<|endoftext|>`` after ``<|end|>``);
- ``final_reply``: written after the final reply, where no history probe rendered to compare;
- ``history_reply``: written after a reply in history, where no final probe rendered;
- ``tool_call``: written after an assistant tool call;
- ``next_turn_opener``: replies have no closer; the next turn's opener follows them (GLM);
- ``in_turn``: inside one assistant turn (between its reasoning and its answer);
- ``in_tool_call``: inside an assistant turn that makes tool calls, before its last argument:
  opening a call, between two calls of the message or two arguments of a call, or after the
  assistant's opener before the call (``eosfix.analysis.toolcalls.in_call_tokens``: never a
  terminator), or closing one call of several;
- ``turn_opener``: opens the assistant turn (the generation prompt);
- ``verdict``: closes the prompt's turn, right before the generation prompt, in a template
  that quotes the conversation as text inside that turn (guard and classifier templates:
  Llama Guard, Granite Guardian): the verdict's turn is opened the same way, so it ends the
  same way. No assistant message of such a template is a turn (``quoted_reply``).

The stop set must hold the first token a model can emit after a complete reply. So the first
token after the last reply is always required, and so is the first token of a history closer
the final reply does not share; a token that only ever follows another closer (the
conversation end, the rest of a closer of several tokens) is not. Everything is pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from eosfix.analysis.shapes import (
    ASSISTANT1,
    SYSTEM,
    THINK1,
    USER1,
    Probe,
    find_marker,
    rfind_marker,
)

EVERY_REPLY = "every_reply"
LAST_REPLY = "last_reply"
EARLIER_REPLIES = "earlier_replies"
CONVERSATION_END = "conversation_end"
FINAL_REPLY = "final_reply"
HISTORY_REPLY = "history_reply"
TOOL_CALL = "tool_call"
NEXT_TURN = "next_turn_opener"
IN_TURN = "in_turn"
IN_TOOL_CALL = "in_tool_call"
TURN_OPENER = "turn_opener"
PLAIN_TEXT = "plain_text"
VERDICT = "verdict"
# Not a place in a render: the template writes nothing at all, and the tokenizer's eos is what
# ends a reply (``eosfix.decide.check``).
EMPTY_TEMPLATE = "empty_template"
WHERE = (
    EVERY_REPLY,
    LAST_REPLY,
    EARLIER_REPLIES,
    CONVERSATION_END,
    FINAL_REPLY,
    HISTORY_REPLY,
    TOOL_CALL,
    NEXT_TURN,
    PLAIN_TEXT,
    VERDICT,
    EMPTY_TEMPLATE,
    IN_TURN,
    IN_TOOL_CALL,
    TURN_OPENER,
)

# Terminator kinds (what a sighting asks of the stop set): these, each a stop id it must
# hold, or CONVERSATION_END, an optional stop. TOOL_CALL and NEXT_TURN are kinds and places.
TURN_END = "turn_end"
STOP_STRING = "stop_string"
REQUIRED_KINDS = (TURN_END, TOOL_CALL, NEXT_TURN, STOP_STRING)

Hit = tuple[str, int]  # a control token and its offset in the probe's text
# Literals shaped like control tokens (``<|x|>``, ``<｜x｜>``) that a tokenizer may not list.
_CONTROL_SHAPE = re.compile(r"<\|[^<>|\s]{1,40}\|>|<｜[^<>｜\s]{1,40}｜>")


class SpecialScanner:
    """Finds control-token strings in rendered text, longest match first. Two scanners of the
    same tokens are equal (a cache key)."""

    def __init__(self, specials: Iterable[str], plain: Iterable[str] = ()) -> None:
        self._plain = frozenset(plain)  # added tokens the tokenizer treats as text
        self._tokens = tuple(sorted(sorted({s for s in specials if s}), key=len, reverse=True))
        self._hash = hash((self._tokens, self._plain))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SpecialScanner):
            return NotImplemented
        return (self._tokens, self._plain) == (other._tokens, other._plain)

    def __hash__(self) -> int:
        return self._hash

    def find(self, text: str) -> list[Hit]:
        # Tokenizers list hundreds of reserved tokens; a text holds a handful. Compiling a
        # pattern of only those present is much cheaper than one of all of them.
        present = tuple(t for t in self._tokens if t in text)
        found = ((m.group(0), m.start()) for m in _scanner_regex(present).finditer(text))
        return [(tok, pos) for tok, pos in found if tok not in self._plain]


@functools.lru_cache(maxsize=1024)
def _scanner_regex(tokens: tuple[str, ...]) -> re.Pattern[str]:
    """Longest token first, then anything shaped like a control token."""
    alternation = "|".join(re.escape(t) for t in tokens)
    return re.compile(
        f"{alternation}|{_CONTROL_SHAPE.pattern}" if tokens else _CONTROL_SHAPE.pattern
    )


class Sighting(NamedTuple):
    """One control token (or plain-text stop) at one place of one probe.

    ``kind`` is what it asks of the stop set: one of ``REQUIRED_KINDS`` (it must be a stop
    id), ``conversation_end`` (an optional stop), or None (a position only). ``acceptable``:
    a stop id there does no harm (the reply is complete). ``related``: the tokens the
    placement refers to (the history closer a last-reply token replaces, the closer a
    conversation-end token follows, the final closer an earlier-replies token differs from).
    """

    token: str
    where: str
    probe: Probe
    pos: int
    kind: str | None = None
    acceptable: bool = False
    related: tuple[str, ...] = ()


class Gap(NamedTuple):
    """What a history probe writes between the probed assistant text and the next message."""

    probe: Probe
    closer: tuple[Hit, ...]  # closes the probed turn
    opener: tuple[Hit, ...]  # opens the next turn


def tail_specials(probe: Probe, scanner: SpecialScanner, openers: frozenset[str]) -> list[Hit]:
    """Control tokens after the probed text, up to the next message or the first turn opener.

    Templates that always append the generation prompt write ``<|eot_id|><|start_header_id|>
    assistant...`` after the last reply: the opener is not part of the closer.
    """
    start = probe.tail_start
    if start is None or probe.text is None:
        return []
    stop = probe.next_start if probe.next_start is not None else len(probe.text)
    out = []
    for tok, pos in scanner.find(probe.text[start:stop]):
        if tok in openers:
            break
        out.append((tok, start + pos))
    return out


def turn_openers(
    probes: Sequence[Probe], generation_prompt: str | None, scanner: SpecialScanner
) -> frozenset[str]:
    """Control tokens that open the assistant turn: those of the generation prompt.

    When the template ignores ``add_generation_prompt`` (it always appends the opener), read
    what it writes before the first message's text. A token that closes history replies is
    not an opener, even when the generation prompt writes it first (a template that closes
    the previous turn only when the next one opens): it comes first between two messages,
    but never before the first one.
    """
    found: frozenset[str] = frozenset()
    if generation_prompt:
        found = frozenset(tok for tok, _ in scanner.find(generation_prompt))
    else:
        by_name = {p.spec.name: p.text for p in probes if p.text is not None}
        for name, marker in (("final+system", SYSTEM), ("final", USER1), ("final+parts", USER1)):
            text = by_name.get(name)
            at = -1 if text is None else find_marker(text, marker)
            if text is not None and at >= 0:
                found = frozenset(tok for tok, _ in scanner.find(text[:at]))
                break
    closers = set()
    for probe in probes:
        at = -1 if probe.text is None else find_marker(probe.text, USER1)
        if probe.spec.kind == "history" and probe.text is not None and at >= 0:
            hits = tail_specials(probe, scanner, frozenset())
            if len(hits) > 1 and hits[0][0] not in probe.text[:at]:
                closers.add(hits[0][0])
    return found - closers


def in_turn_tokens(probes: Iterable[Probe], scanner: SpecialScanner) -> set[str]:
    """Control tokens between an assistant message's reasoning and its answer."""
    found: set[str] = set()
    for probe in probes:
        if probe.spec.kind != "reasoning" or probe.text is None:
            continue
        think, answer = rfind_marker(probe.text, THINK1), rfind_marker(probe.text, ASSISTANT1)
        if 0 <= think < answer:
            found.update(tok for tok, _ in scanner.find(probe.text[think + len(THINK1) : answer]))
    return found


def split_gap(
    probe: Probe,
    scanner: SpecialScanner,
    openers: frozenset[str],
    role_opener: str | None,
    keep: frozenset[str],
) -> Gap | None:
    """Split a history gap into the probed turn's closer and the next turn's opener.

    The opener starts at the first assistant-opener token (``<|im_start|>``, shared by every
    role), or is the last control token before the next message when that token is the
    next role's own opener (``role_opener``: ``<|user|>``, ``[INST]``, ``<|observation|>``)
    and does not close the turn elsewhere (``keep``).
    """
    if probe.text is None or probe.tail_start is None or probe.next_start is None:
        return None
    start, stop = probe.tail_start, probe.next_start
    hits = [(tok, start + pos) for tok, pos in scanner.find(probe.text[start:stop])]
    cut = next((i for i, (tok, _) in enumerate(hits) if tok in openers), len(hits))
    if cut == len(hits) and hits and hits[-1][0] == role_opener and role_opener not in keep:
        cut -= 1
    return Gap(probe, tuple(hits[:cut]), tuple(hits[cut:]))


def last_special_before(probe: Probe, marker: str, scanner: SpecialScanner) -> str | None:
    """The last control token before the first occurrence of ``marker`` (a role's opener)."""
    at = -1 if probe.text is None else find_marker(probe.text, marker)
    if probe.text is None or at < 0:
        return None
    hits = scanner.find(probe.text[:at])
    return hits[-1][0] if hits else None


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def read_opener(gap: Gap, in_turn: set[str]) -> list[Sighting]:
    """Replies have no closing token: the next turn's first control token ends them (GLM
    ``<|user|>``, ``<|observation|>``); with none, the first line of plain text between turns."""
    probe, text = gap.probe, gap.probe.text or ""
    opener = [(t, p) for t, p in gap.opener if t not in in_turn]
    if opener:
        tok, pos = opener[0]
        return [Sighting(tok, NEXT_TURN, probe, pos, NEXT_TURN)]
    if gap.opener:  # only in-turn tokens open the next turn: nothing to stop on
        return []
    start, stop = probe.tail_start or 0, probe.next_start or 0
    between = text[start:stop]
    for line in between.splitlines():
        if line.strip():
            where = start + between.find(line)
            return [Sighting(line.strip(), PLAIN_TEXT, probe, where, STOP_STRING)]
    return []


def where_written(
    sightings: Iterable[Sighting],
    in_turn: Iterable[str],
    openers: Iterable[str],
    in_call: Iterable[str] = (),
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Where one template writes each control token (``TemplateAnalysis.positions``): its
    sightings' places, then inside a turn, inside a tool call, as a turn's opener."""
    out: dict[str, dict[str, None]] = {}
    for s in sightings:
        out.setdefault(s.token, {})[s.where] = None
    for token in sorted(in_turn):  # sets: sorted, or the order would change per process
        out.setdefault(token, {})[IN_TURN] = None
    for token in sorted(in_call):
        out.setdefault(token, {})[IN_TOOL_CALL] = None
    for token in sorted(openers):
        out.setdefault(token, {})[TURN_OPENER] = None
    return tuple((token, tuple(wheres)) for token, wheres in out.items())


# --- templates that quote the conversation (guards, classifiers) --------------------------


def quoted_reply(final: Probe | None, prompt: Probe | None, scanner: SpecialScanner) -> str | None:
    """Why the template quotes its assistant messages as text inside another turn, or None
    when an assistant message renders at a reply position of its own.

    ``final``: the conversation [user, assistant] rendered; ``prompt``: [user] rendered with
    the generation prompt (its reply position is its end). A reply is at its own position when
    the render of the user's message and what precedes it is the same in both, and the text
    between the user's message and the reply leads where the prompt's does: one is a prefix
    of the other (``<|im_end|>\n<|im_start|>assistant\n``, ``### Response:``), or they share a
    control token (``[/INST]``). A guard template rewrites its instructions around the whole
    conversation (``'Agent' messages`` once an assistant message is there), or writes the
    assistant's text right after the user's inside the same turn (``\nAgent: ``), and goes
    on writing its own text after it (the question it asks about the conversation): a
    template that only closes the conversation after the reply (BlenderBot's ``</s>``) does
    not quote it.
    """
    if final is None or prompt is None or final.text is None or prompt.text is None:
        return None
    f, x = final.text, prompt.text
    u, xu = find_marker(f, USER1), find_marker(x, USER1)
    a = rfind_marker(f, ASSISTANT1)
    if u < 0 or xu < 0 or a < u:
        return None
    u, xu = u + len(USER1), xu + len(USER1)
    after = f[a + len(ASSISTANT1) :]
    for tok, _ in scanner.find(after):
        after = after.replace(tok, " ")
    if not after.strip():  # nothing but control tokens after the reply: it ends the render
        return None
    if f[:u] != x[:xu]:
        return "adding an assistant message rewrites the text before the user's message"
    lead, reply_lead = f[u:a], x[xu:]
    if lead.startswith(reply_lead) or reply_lead.startswith(lead):
        return None
    if {t for t, _ in scanner.find(lead)} & {t for t, _ in scanner.find(reply_lead)}:
        return None
    return "the assistant's text follows the user's inside the same turn"


def verdict_closer(
    prompt: Probe, generation_prompt: str | None, openers: frozenset[str], scanner: SpecialScanner
) -> list[Hit]:
    """The control tokens that close the prompt's turn right before its reply position, with
    only whitespace between them and the reply's opener: the generation prompt, or, where the
    template writes its opener itself (Llama Guard 3 ignores add_generation_prompt), the
    trailing control tokens from the last one a role's name follows
    (``<|start_header_id|>assistant<|end_header_id|>``), else the trailing ones among
    ``openers``. None when text of the prompt follows them (ShieldGemma writes its question
    after its last control token)."""
    text = prompt.text or ""
    end = len(text)
    if generation_prompt and text.endswith(generation_prompt):
        end -= len(generation_prompt)
    start = prompt.tail_start or 0
    hits = [(t, start + p) for t, p in scanner.find(text[start:end])]

    def after(i: int) -> str:  # the text between hit i and the next hit (or the end)
        return text[hits[i][1] + len(hits[i][0]) : hits[i + 1][1] if i + 1 < len(hits) else end]

    first = len(hits)  # where the reply's own opener starts among the hits
    if end == len(text):  # no generation prompt written: the template opens the reply itself
        named = [i for i in range(len(hits)) if _ROLE_NAME.fullmatch(after(i))]
        if named:
            first = named[-1]
        else:
            while first > 0 and hits[first - 1][0] in openers and not after(first - 1).strip():
                first -= 1
    out: list[Hit] = []
    for i in range(first - 1, -1, -1):
        if after(i).strip():
            break
        out.insert(0, hits[i])
    return out


_ROLE_NAME = re.compile(r"\s*[A-Za-z_]{2,20}\s*")
