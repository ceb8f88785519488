"""What the page shows of one check, made from its rows (``eosfix.render.rows``), never from
another output's text: the answer first (one clause per way the runtimes behave, now and after
the fix, each naming its runtimes), the badge in words, the template text that proves each
terminator with the probe's stand-in messages named as what they stand for, and the diff's
lines by kind. The templates (``eosfix/serve/templates``) branch on these typed fields. Every
string here that came from a repo is text: the templates escape it (Jinja2 autoescape).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eosfix.render.gguf_hub import group_parts, params_change, params_source
from eosfix.render.rows import RepoRows, RuntimeLine, RuntimeState, StopIdRow
from eosfix.render.words import NO_TEMPLATE_TEXT, NOT_A_MODEL_TEXT, STAND_INS

# How a verdict looks: ok (green), warn (amber), bad (red), na (grey).
TONES = {
    "ok": "ok",
    "warned": "warn",
    "fixed": "ok",
    "fixable": "bad",
    "problems": "bad",
    "error": "bad",
    "no_template": "na",
    "not_a_model": "na",
}


@dataclass(frozen=True)
class Piece:
    """A run of template text: ``special`` a special token, ``stand_in`` what a probe's own
    message stands for (``reply``, ``user message``), ``newline`` the ``\\n`` ending a line."""

    text: str
    kind: str = "text"


@dataclass(frozen=True)
class Clause:
    """One way some runtimes behave: ``what`` (``runs on past``, ``stops inside a reply
    at``, ``stops``, ``needs the stop string``, ``cannot load it``), the tokens it names, and
    the runtimes; ``tone`` as the grid colours it."""

    what: str
    tokens: tuple[str, ...]
    runtimes: tuple[str, ...]
    tone: str
    every: bool = False  # every runtime that loads it
    unless: str = ""  # what would make them stop after all


@dataclass(frozen=True)
class Answer:
    """Where the model stops, first: the clauses now and after the planned fix (none when
    nothing is planned), or one sentence where no runtime can be compared."""

    now: tuple[Clause, ...] = ()
    after: tuple[Clause, ...] = ()
    sentence: str | None = None
    taken_out: tuple[StopIdRow, ...] = ()  # stop ids the fix takes out (they cut or never fire)
    after_what: str = "After the fix"  # which fix: a GGUF's header, its params file, or both


@dataclass
class View:
    rows: RepoRows
    repo: str
    badge: str
    tone: str
    answer: Answer
    evidence: list[list[list[Piece]]] = field(default_factory=list)
    messages: list[list[Piece]] = field(default_factory=list)  # each finding's message
    diffs: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    hub: bool = False  # a Hub repo: its fix can be a pull request
    carries_pr: bool = False  # this result's fix is what the repo's pull request carries
    pr: dict[str, Any] | None = None  # the open eosfix PR: url, num, words
    group: str = ""  # a GGUF group: whose default it is, the files alike, what it differs in
    params_source: str = ""  # where ``ollama run hf.co`` takes its stop list from
    params_change: str = ""  # what the planned params file changes


def _names(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _clauses(states: Sequence[tuple[str, RuntimeState]]) -> tuple[Clause, ...]:
    """The runtimes grouped by how they behave in one state, worst first."""
    loading = [(n, s) for n, s in states if s.applicable]
    runs_on: dict[tuple[str, ...], list[str]] = {}
    early: dict[tuple[str, ...], list[str]] = {}
    text: dict[tuple[str, ...], list[str]] = {}
    stops, unknown = [], []
    for name, s in loading:
        if s.missed:
            runs_on.setdefault(s.missed, []).append(name)
        if s.early:
            early.setdefault(tuple(s.early), []).append(name)
        if not s.missed and not s.early:
            if s.needs_text:
                text.setdefault(s.needs_text, []).append(name)
            elif any(s.stops.values()):
                stops.append(name)
            else:
                unknown.append(name)
    n = len(loading)
    out = [Clause("runs on past", t, _names(r), "bad", len(r) == n) for t, r in runs_on.items()]
    out += [Clause("stops inside a reply at", t, _names(r), "bad", len(r) == n)
            for t, r in early.items()]  # fmt: skip
    out += [Clause("runs on past the plain text", t, _names(r), "warn", len(r) == n,
                   "unless it is given that text as a stop string") for t, r in text.items()]  # fmt: skip
    if stops:
        out.append(Clause("stops", (), _names(stops), "ok", len(stops) == n))
    if unknown:
        out.append(Clause("cannot be compared (no token id)", (), _names(unknown), "na"))
    skipped = [name for name, s in states if not s.applicable]
    if skipped:
        out.append(Clause("cannot load it (no config.json)", (), _names(skipped), "na"))
    return tuple(out)


def answer(rows: RepoRows) -> Answer:
    """The answer the page leads with (see ``Answer``)."""
    v = rows.verdict
    if rows.error is not None:
        return Answer(sentence=rows.error)
    if v.status == "no_template":
        return Answer(sentence=NO_TEMPLATE_TEXT[0].upper() + NO_TEMPLATE_TEXT[1:] + ".")
    if v.status == "not_a_model":
        return Answer(sentence=NOT_A_MODEL_TEXT[0].upper() + NOT_A_MODEL_TEXT[1:] + ".")
    lines: Sequence[RuntimeLine] = rows.runtimes
    now = _clauses([(r.label, r.now) for r in lines])
    planned = bool(rows.changes) or rows.action.pr_file is not None
    after = _clauses([(r.label, r.after) for r in lines]) if planned else ()
    taken_out = tuple(s for s in rows.stops_now if not s.after) if rows.proposed else ()
    return Answer(now, after if after != now else (), taken_out=taken_out, after_what=_fixes(rows))


def _fixes(rows: RepoRows) -> str:
    """What "after the fix" stands for: a GGUF file's fixes are two (a new file's header, for
    llama.cpp; the repo's params file, for ``ollama run hf.co``)."""
    header = rows.gguf is not None and bool(rows.changes)
    params = rows.ollama_hub is not None and rows.ollama_hub.after is not None
    if header and params:
        return "With a new file's header and the params file"
    if header:
        return "With a new file's header"
    if params:
        return "With the params file"
    return "After the fix"


def pieces(text: str, specials: Iterable[str]) -> list[list[Piece]]:
    """``text`` as lines of pieces: each special token of ``specials`` its own piece, each
    probe message (``eosfix.render.words.STAND_INS``) named as what it stands for; a line
    break is kept as a visible ``\\n`` at the end of its line."""
    names = sorted({s for s in specials if s}, key=len, reverse=True)
    ordered = sorted(STAND_INS, key=len, reverse=True)
    split = re.compile("(" + "|".join(map(re.escape, [*names, *ordered])) + ")")
    marked = set(names)
    lines: list[list[Piece]] = []
    for raw in text.split("\n"):
        line = []
        for p in split.split(raw):
            if not p:
                continue
            kind = "special" if p in marked else "stand_in" if p in STAND_INS else "text"
            line.append(Piece(STAND_INS[p] if kind == "stand_in" else p, kind))
        lines.append(line)
    for line in lines[:-1]:
        line.append(Piece("\\n", "newline"))
    return [line for line in lines if line]


_STAND_IN = re.compile(
    "(" + "|".join(map(re.escape, sorted(STAND_INS, key=len, reverse=True))) + ")"
)


def stand_ins(text: str) -> list[Piece]:
    """``text`` (a finding's message, which may quote a probe) with each probe message named
    as what it stands for."""
    return [
        Piece(STAND_INS[p], "stand_in") if p in STAND_INS else Piece(p)
        for p in _STAND_IN.split(text)
        if p
    ]


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """Each line of a unified diff with its kind (add, del, hunk, head, same)."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, line))
    return out


def badge(rows: RepoRows) -> str:
    """The verdict in words (``runs on: fixable``, ``needs a stop string``, ``no chat
    template``): never an internal name."""
    v = rows.verdict
    return f"{v.words}: fixable" if v.verdict == "fixable" and v.problem else v.words


def build(rows: RepoRows, *, name: str, hub: bool) -> View:
    """The page's view of one result's rows; ``name``: how the page names it."""
    view = View(rows, name, badge(rows), TONES.get(rows.verdict.verdict, "na"), answer(rows))
    view.hub = hub
    if rows.gguf is not None:
        view.group = "; ".join(group_parts(rows.gguf))
    if rows.ollama_hub is not None:
        view.params_source = params_source(rows.ollama_hub)
        view.params_change = params_change(rows.ollama_hub)
    if rows.error is not None:
        return view
    marked = {*rows.control_tokens, *(t.content for t in rows.terminators)}
    marked |= {s.token or "" for s in rows.stop_ids}
    view.evidence = [pieces(t.evidence or "", marked) for t in rows.terminators]
    view.messages = [stand_ins(f.message) for f in rows.findings]
    view.diffs = [(c.file, diff_lines(c.diff)) for c in rows.changes if c.diff]
    return view
