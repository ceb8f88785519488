"""The words every output of a check uses for the same thing, in one place: where a template
writes a terminator, what kind it is, where the stop ids come from, a verdict and what is
wrong, what a probe and its stand-in messages were. Text, JSON's neighbours (Markdown, CSV)
and the page say a thing with these words, so no two surfaces word it apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from eosfix.analysis.positions import (
    CONVERSATION_END,
    EARLIER_REPLIES,
    EMPTY_TEMPLATE,
    EVERY_REPLY,
    FINAL_REPLY,
    HISTORY_REPLY,
    LAST_REPLY,
    NEXT_TURN,
    PLAIN_TEXT,
    TOOL_CALL,
    VERDICT,
)
from eosfix.analysis.shapes import (
    ASSISTANT0,
    ASSISTANT1,
    CALL_CONTENT,
    FIRST_A,
    FIRST_B,
    SECOND_A,
    SECOND_B,
    SYSTEM,
    THINK1,
    TOOL,
    TOOL_ARG,
    TOOL_RESULT,
    USER1,
    USER2,
)
from eosfix.analysis.terminators import Placement, Terminator
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck
from eosfix.decide.stopids import (
    EOS,
    IN_TURN_KIND,
    ORDINARY,
    OUT_OF_VOCAB,
    SPECIAL,
    TERMINATOR,
    UNCHECKED,
)

NO_TEMPLATE_TEXT = (
    "no chat template: nothing to check (fine for a base model; a chat model without one has "
    "lost its template)"
)
NOT_A_MODEL_TEXT = (
    "not a model repo: no config.json, generation_config.json or weights, so no runtime loads "
    "a model from it (tokenizer files only); nothing to fix"
)

# What each kind of terminator is, in a few words (the PR description uses it too).
KIND_TEXT = {
    "turn_end": "closes a reply",
    "tool_call": "written after a tool call",
    "next_turn_opener": "opens the next turn (replies have no closing token)",
    "stop_string": "plain text: needs a stop string",
    "conversation_end": "written only when the whole conversation ends (an optional stop)",
}

# The words of each verdict (eosfix.core.outcome.VERDICTS) in tables and on the page; a
# verdict with a problem says what is wrong instead (PROBLEM_TEXT), as `eosfix check`'s
# runtimes line does ("would not stop: ...", "stop inside a turn at ...").
VERDICT_TEXT = {
    "fixed": "fixed",
    "fixable": "would be fixed",
    "problems": "problems eosfix cannot fix",
    "warned": "ok, with warnings",
    "ok": "ok",
    "no_template": "no chat template",
    "not_a_model": "not a model repo",
    "error": "error",
}
PROBLEM_TEXT = {
    "runs_on": "runs on",
    "stops_early": "stops early",
    "runs_on_and_stops_early": "runs on and stops early",
    "never_fires": "lists ids that never fire",
    "needs_stop_string": "needs a stop string",
}


# What a stop id is (``eosfix.decide.stopids``' kinds), for a person.
STOP_ID_TEXT = {
    TERMINATOR: "ends a turn",
    EOS: "the tokenizer's eos",
    SPECIAL: "a special token",
    IN_TURN_KIND: "written inside a turn: it cuts replies",
    ORDINARY: "an ordinary token: it cuts replies",
    OUT_OF_VOCAB: "no token: it never fires",
    UNCHECKED: "its token is unknown without tokenizer.json",
}


def verdict_words(verdict: str, problem: str | None) -> str:
    """``runs on``, ``stops early``... for a repo with something wrong; ``... (eosfix cannot
    fix it)`` for problems; else the verdict's words."""
    if not problem:
        return VERDICT_TEXT[verdict]
    words = PROBLEM_TEXT[problem]
    return f"{words} (eosfix cannot fix it)" if verdict == "problems" else words


def no_model_repos(label: str, *, author: bool) -> str:
    """What a listing of no model repo at all says (``eosfix hub --author``, the page's
    audit): the author's, or the listing's (``label``: how it was asked)."""
    if author:
        return f"{label}: no model repos on the Hub under this author"
    return f"{label}: no model repos on the Hub match this listing"


def _where_text(p: Placement, token: Callable[[str], str] = str) -> str:
    """Where the template writes a token, as a clause (``eosfix.analysis.positions.WHERE``);
    ``token`` shows each token it names (a Markdown code span in a PR)."""
    rel = ", ".join(token(r) for r in p.related)
    if p.where == LAST_REPLY:
        why = f"earlier replies end with {rel}" if rel else "other replies have no closing token"
        return f"written after the last reply only ({why})"
    if p.where == EARLIER_REPLIES:
        last = f"the last one ends with {rel}" if rel else "nothing closes the last one"
        return f"written after replies another turn follows ({last})"
    if p.where == CONVERSATION_END:
        after = f", after {rel}" if rel else ""
        return f"written once, when the whole conversation ends{after}"
    return _WHERE_TEXT.get(p.where, p.where)


_WHERE_TEXT = {
    EVERY_REPLY: "written after every reply",
    FINAL_REPLY: "written after the final reply (no history turn rendered to compare)",
    HISTORY_REPLY: "written after a reply another turn follows (no final reply rendered to compare)",
    TOOL_CALL: "written after a tool call",
    NEXT_TURN: "opens the next turn (replies have no closing token)",
    PLAIN_TEXT: "plain text: needs a stop string",
    VERDICT: (
        "written where the prompt's turn ends, before the reply: the verdict's turn ends the "
        "same way (the template quotes the conversation as text, it renders no reply)"
    ),
    EMPTY_TEMPLATE: "the tokenizer's eos: the template writes nothing, so nothing else ends a reply",
}


def placement_text(t: Terminator, token: Callable[[str], str] = str) -> str:
    """Where the template writes ``t``: every placement, first evidence first (``token``: as
    in ``_where_text``)."""
    clauses = list(dict.fromkeys(_where_text(p, token) for p in t.placements))
    if not clauses:
        return KIND_TEXT.get(t.kind, t.kind)
    text = clauses[0]
    for clause in clauses[1:]:  # "written after every reply and after a tool call"
        same_verb = clause.startswith("written ") and text.startswith("written ")
        text += f" and {clause.removeprefix('written ')}" if same_verb else f"; {clause}"
    return text


def stop_source_text(c: RepoCheck) -> str:
    """Where the current stop ids come from, as a phrase."""
    if c.stop.detail:  # the reader builds its set from the container's keys (a GGUF)
        return c.stop.detail
    if c.stop.source == GENERATION_CONFIG and c.stop.raw is None:
        return "generation_config.json sets no eos_token_id"  # not "(not set) (from ...)"
    if c.stop.source != "none":
        return f"from {c.stop.source}"
    if c.repo.config is None:
        return "generation_config.json and config.json are missing"
    return "generation_config.json is missing; config.json sets no eos_token_id"


def ids_text(ids: Iterable[int] | int | None) -> str:
    """``7``, ``[7, 9]``; a value that is not ids (EOS018) as the file writes it."""
    if ids is None:
        return "(not set)"
    if type(ids) is int:
        return str(ids)
    if isinstance(ids, (list, tuple)) and all(type(i) is int for i in ids):
        return "[" + ", ".join(str(i) for i in ids) + "]"
    return json.dumps(ids, ensure_ascii=False)


# What a probe's conversation was (``eosfix.analysis.shapes``: a probe's name is its shape,
# then ``+`` and what it adds), in words for a person.
_PROBE_WORDS = {
    "final": "a conversation that ends with a reply",
    "history": "a reply another turn follows",
    "tool_call": "a reply that calls a tool",
    "tool_calls": "a reply that calls tools",
    "tool_result": "a tool call and its result",
}
# The messages the probes send (plain letters and digits, so templates keep them whole), as a
# person reads them in an excerpt: what stands in that place of a real conversation.
STAND_INS = {
    SYSTEM: "system message",
    USER1: "user message",
    USER2: "user message",
    ASSISTANT0: "reply",
    ASSISTANT1: "reply",
    THINK1: "reasoning",
    TOOL: "tool name",
    TOOL_ARG: "argument",
    TOOL_RESULT: "tool result",
    CALL_CONTENT: "reply",
    FIRST_A: "argument",
    FIRST_B: "argument",
    SECOND_A: "argument",
    SECOND_B: "argument",
}


def probe_words(probe: str) -> str:
    """Where a probe showed a token, for a person: ``default/final`` is "in a conversation
    that ends with a reply (the chat template)"; a named template is named."""
    template, _, name = probe.rpartition("/")
    shape = name.partition("+")[0]
    what = _PROBE_WORDS.get(shape, "a rendered conversation")
    which = "the chat template" if template in ("", "default") else f"the {template} template"
    return f"in {what} ({which})"
