"""Find the tokens that end an assistant turn, and check the stop configuration against them.
One module, over 400 lines: the types every later layer reads (``Terminator``,
``TemplateAnalysis``, ``TerminatorSet``) with the one analysis that makes them and the memos
keyed on them.

Vocabulary:

- **turn terminator**: a token that must be a stop id: the first token a model can emit after
  a complete reply. Found, in order of evidence: (1) the control tokens right after the
  assistant text when the conversation ends with an assistant message (the training target),
  compared with the same reply in history (another turn follows); (2) the same after an
  assistant tool call; (3) when replies followed by another turn have no closing token, the
  opener of that turn (GLM: ``<|user|>``, ``<|observation|>``); (4) when no control token
  separates turns, plain-text stop strings. ``eosfix.analysis.positions`` says where each is written.
- **additional stop**: a token written only once, after the last reply's closer, when the
  whole conversation ends (Phi-3 ``<|endoftext|>`` after ``<|end|>``). Reported, never
  required, and never instead of the per-reply closer.
- **in-turn token**: a control token written *inside* one assistant turn (between reasoning
  and answer). It is never a terminator (gpt-oss ``<|end|>``).
- **in-call token**: a control token a reply that makes tool calls writes before its last
  argument (between two calls of one message or two arguments of one call, or after the
  assistant's opener before the call). It is never a terminator either (``</tool_call>``
  between calls; a reply closer written before a call the model goes on to write).

Everything here is pure: no printing, no writing, no network.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

from jinja2 import nodes

from eosfix.analysis.branches import branch_gates, branch_specs
from eosfix.analysis.memo import Same
from eosfix.analysis.positions import (
    CONVERSATION_END,
    NEXT_TURN,
    REQUIRED_KINDS,
    STOP_STRING,
    TOOL_CALL,
    TURN_END,
    Sighting,
    SpecialScanner,
    in_turn_tokens,
    quoted_reply,
    turn_openers,
    where_written,
)
from eosfix.analysis.probes import run_generation_prompt, run_probe
from eosfix.analysis.reads import ending_literals
from eosfix.analysis.replies import read_template
from eosfix.analysis.shapes import (
    SPECS,
    Probe,
    flagged_reasoning_spec,
    history_twin,
    reasoning_part_specs,
    several_calls_specs,
)
from eosfix.analysis.template import (
    compile_template,
    current_limits,
    is_struck,
    parse_template,
    refused_renders,
    strike_scope,
)
from eosfix.analysis.toolcalls import (
    Disagreement,
    history_disagreements,
    in_call_tokens,
    wants_history,
)
from eosfix.core.errors import TemplateError
from eosfix.core.limits import RenderLimits
from eosfix.core.repo import ChatTemplate, ModelRepo

__all__ = [
    "CONVERSATION_END",
    "NEXT_TURN",
    "STOP_STRING",
    "TOOL_CALL",
    "TURN_END",
    "Placement",
    "SpecialScanner",
    "TemplateAnalysis",
    "Terminator",
    "TerminatorSet",
    "analyze_template",
    "find_terminators",
]
_EVIDENCE_CHARS = 48


class Placement(NamedTuple):
    """Where a template writes a terminator (one of ``eosfix.analysis.positions.WHERE``).

    ``related``: the tokens that placement refers to: the history closer a last-reply token
    replaces, the closer a conversation-end token follows, the final closer an
    earlier-replies token differs from.
    """

    where: str
    related: tuple[str, ...] = ()


class Terminator(NamedTuple):
    content: str
    id: int | None
    kind: str  # turn_end | tool_call | next_turn_opener | stop_string | conversation_end
    templates: tuple[str, ...]
    probe: str  # the probe that showed it
    evidence: str  # rendered text around it, sentinel included
    id_source: str | None = None
    special: bool | None = None  # marked special by the tokenizer (None: unknown)
    placements: tuple[Placement, ...] = ()  # where it is written, first evidence first

    @property
    def id_str(self) -> str:
        return f"id {self.id}" if self.id is not None else "no id"

    @property
    def required(self) -> bool:
        """Whether the stop set must hold it (a conversation-end token need not)."""
        return self.kind in REQUIRED_KINDS


class TemplateAnalysis(NamedTuple):
    name: str
    file: str
    probes: tuple[Probe, ...]
    generation_prompt: str | None = None
    unreached_literals: tuple[tuple[str, int], ...] = ()  # (token, template line)
    # Where this template writes each control token: (token, (where, ...)), for rules that
    # need to know whether a token is written inside a turn, after every reply, at the end...
    positions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # A user message rendered with add_generation_prompt=True: the reply position is its end.
    prompt: Probe | None = None
    # Call probes rendered again with their results after them (the message in history),
    # where the message writes before its calls a token that also closes replies.
    twins: tuple[Probe, ...] = ()
    # Variables an ``if`` tests to choose a branch writing an assistant message or a tool
    # call, probed on both sides: (name, the value set, the template line of the ``if``).
    branches: tuple[tuple[str, object, int], ...] = ()
    # Set when the probes are read: why the template quotes its assistant messages inside
    # another turn (guards, classifiers; None: replies are turns of their own), and the call
    # probes whose message renders otherwise when the conversation ends with it.
    quoted: str | None = None
    disagreements: tuple[Disagreement, ...] = ()

    @property
    def refusals(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.refusal is not None)

    @property
    def rendered(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.text is not None)

    @property
    def placeholders(self) -> dict[str, object]:
        """Variables no probe passes that renders needed, with the placeholder given."""
        return {n: p.spec.kwargs[n] for p in self.rendered for n in p.placeholders}


class TerminatorSet(NamedTuple):
    terminators: tuple[Terminator, ...]  # every one must be a stop id
    acceptable: tuple[str, ...] = ()  # may also be stop ids: the reply is complete there
    in_turn: tuple[str, ...] = ()  # never stop ids: written inside one turn
    templates: tuple[TemplateAnalysis, ...] = ()
    additional: tuple[Terminator, ...] = ()  # reported stops never required (conversation end)
    # never stop ids: written by a reply that makes tool calls before its last argument
    in_call: tuple[str, ...] = ()

    def positions(self) -> dict[str, tuple[str, ...]]:
        """Where any template writes each control token (token -> where values)."""
        out: dict[str, dict[str, None]] = {}
        for ta in self.templates:
            for token, wheres in ta.positions:
                out.setdefault(token, {}).update(dict.fromkeys(wheres))
        return {token: tuple(wheres) for token, wheres in out.items()}


def _evidence(text: str, start: int, end: int, tokens: Iterable[tuple[str, int]] = ()) -> str:
    """The rendered text around ``text[start:end]``, cut only where a reader expects it: at
    a line start and after a line end when the window holds one, never inside a control token
    (``tokens``: (token, position) in ``text``) or a word; "…" marks text left out."""
    lo = max(0, start - _EVIDENCE_CHARS)
    hi = min(len(text), end + _EVIDENCE_CHARS)
    line_start = text.find("\n", lo, start)
    lo = line_start + 1 if line_start != -1 else lo
    line_end = text.rfind("\n", end, hi)
    hi = line_end + 1 if line_end != -1 else hi
    for tok, pos in tokens:  # widen to whole tokens
        if pos < lo < pos + len(tok):
            lo = pos
        if pos < hi < pos + len(tok):
            hi = pos + len(tok)
    while 0 < lo < start and text[lo - 1].isalnum() and text[lo].isalnum():
        lo += 1  # narrow to whole words
    while end < hi < len(text) and text[hi - 1].isalnum() and text[hi].isalnum():
        hi -= 1
    return ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")


@functools.lru_cache(maxsize=256)
def _template_literals(source: str) -> tuple[tuple[str, int], ...]:
    """Every string the template can write verbatim (constants and raw text), with its line."""
    try:  # the environment transformers uses, so {% generation %} parses
        ast = parse_template(source)
    except TemplateError:
        return ()
    consts = [(c.value, c.lineno) for c in ast.find_all(nodes.Const) if isinstance(c.value, str)]
    raw = [(d.data, d.lineno) for d in ast.find_all(nodes.TemplateData)]
    return tuple(consts + raw)


def _unreached_literals(
    source: str,
    rendered: Iterable[str],
    scanner: SpecialScanner,
    special_tokens: dict[str, str],
) -> tuple[tuple[str, int], ...]:
    """Control-token literals no probe rendered that the template text writes right after
    what the model writes (where a reply can end), with their line."""
    seen = "".join(rendered)
    out: dict[str, int] = {}
    for text, lineno in _template_literals(source):
        for tok, _ in scanner.find(text):
            if tok not in seen and tok not in out:
                out[tok] = lineno
    if out:  # walk the template only when some literal went unreached
        ending = ending_literals(source, scanner, tuple(sorted(special_tokens.items())))
        out = {tok: line for tok, line in out.items() if tok in ending}
    return tuple(sorted(out.items(), key=lambda kv: kv[1]))


def analyze_template(
    template: ChatTemplate, repo: ModelRepo, scanner: SpecialScanner
) -> TemplateAnalysis:
    """Run every probe on one template (``TemplateError`` if it is not valid Jinja). Of the
    repo it reads only the special-token texts, never an id: repos that share a template and
    those texts share one analysis, kept in a process-wide memo."""
    try:
        compile_template(template.source)
    except TemplateError as exc:  # with the repo's own path, never memoized
        raise TemplateError(exc.message, path=repo.root / template.file) from None
    limits = current_limits()
    tokens = tuple(sorted(repo.special_tokens.items()))
    if is_struck(template.source, limits):  # refused at once in this repo's scope: no memo
        return _analysis(template, tokens, scanner)
    try:
        return _memo_analysis(template, tokens, scanner, limits)
    except _Unkept as unkept:
        return unkept.analysis


class _Unkept(Exception):
    """An analysis a bound, the backstop or the sandbox refused a render of: it depends on
    the repo's strike scope and, for the backstop, on the machine then (EOS103 stays
    retryable), so it is never kept (``functools.lru_cache`` keeps no raised result)."""

    def __init__(self, analysis: TemplateAnalysis) -> None:
        super().__init__()
        self.analysis = analysis


_Tokens = tuple[tuple[str, str], ...]  # (name, content) of each special token, sorted


@functools.lru_cache(maxsize=256)
def _memo_analysis(
    template: ChatTemplate, tokens: _Tokens, scanner: SpecialScanner, limits: RenderLimits
) -> TemplateAnalysis:
    """``_analysis``, keyed by everything it depends on (``limits``: those every render
    gets); raises ``_Unkept`` for an analysis that must not be kept."""
    before = refused_renders()
    analysis = _analysis(template, tokens, scanner)
    if refused_renders() != before or any(p.limit is not None for p in analysis.probes):
        raise _Unkept(analysis)
    return analysis


def _analysis(
    template: ChatTemplate, special: _Tokens, scanner: SpecialScanner
) -> TemplateAnalysis:
    source, name, tokens = template.source, template.name, dict(special)
    probes = [run_probe(source, name, s, tokens) for s in SPECS]
    parts = reasoning_part_specs(source)
    probes += [run_probe(source, name, s, tokens) for s in parts]
    gates = branch_gates(source, frozenset(tokens))
    probes += [run_probe(source, name, s, tokens) for s in branch_specs(gates, parts)]
    flagged = flagged_reasoning_spec(source, probes)
    if flagged is not None:
        probes.append(run_probe(source, name, flagged, tokens))
    several = several_calls_specs(probes)
    for spec in several:  # one call of two arguments only when several calls are refused
        probes.append(run_probe(source, name, spec, tokens))
        if probes[-1].text is not None:
            break
    texts = [p.text for p in probes if p.text is not None]
    generation_prompt, prompt = run_generation_prompt(source, name, tokens)
    openers = turn_openers(probes, generation_prompt, scanner)
    again = wants_history(probes, scanner, generation_prompt, openers)
    return TemplateAnalysis(
        name,
        template.file,
        tuple(probes),
        generation_prompt,
        _unreached_literals(source, texts, scanner, tokens),
        prompt=prompt,
        twins=tuple(run_probe(source, name, history_twin(p.spec), tokens) for p in again),
        branches=tuple((gate.name, value, gate.line) for gate, value in gates),
    )


class _Collector:
    """Accumulates terminators across probes and templates, first evidence wins."""

    def __init__(self, repo: ModelRepo, scanner: SpecialScanner) -> None:
        self.repo = repo
        self.scanner = scanner
        self.found: dict[str, Terminator] = {}
        self.additional: dict[str, Terminator] = {}
        self.acceptable: list[str] = []

    def add(self, s: Sighting) -> None:
        if s.acceptable or s.kind == CONVERSATION_END:
            self.acceptable.append(s.token)
        if s.kind is None:
            return
        table = self.additional if s.kind == CONVERSATION_END else self.found
        template = s.probe.template
        placement = Placement(s.where, s.related)
        old = table.get(s.token)
        if old is not None:
            templates = old.templates + (() if template in old.templates else (template,))
            placements = tuple(dict.fromkeys((*old.placements, placement)))
            table[s.token] = old._replace(templates=templates, placements=placements)
            return
        info = self.repo.resolve(s.token) if s.kind != STOP_STRING else None
        text = s.probe.text or ""
        table[s.token] = Terminator(
            content=s.token,
            id=info.id if info else None,
            kind=s.kind,
            templates=(template,),
            probe=f"{template}/{s.probe.spec.name}",
            evidence=_evidence(text, s.pos, s.pos + len(s.token), self.scanner.find(text)),
            id_source=info.source if info else None,
            special=info.special if info else None,
            placements=(placement,),
        )


@strike_scope()  # a hostile template costs one render's budget per repo, and only per repo
def find_terminators(repo: ModelRepo) -> TerminatorSet:
    """Analyze every named template of the repo and collect its turn terminators."""
    scan = scanner_for(repo)
    analyses = tuple(analyze_template(t, repo, scan) for t in repo.templates)
    reading = _read_templates(Same(analyses), scan)
    col = _Collector(repo, scan)
    for s in reading.sightings:
        col.add(s)
    additional = tuple(t for c, t in col.additional.items() if c not in col.found)
    acceptable = tuple(dict.fromkeys(a for a in col.acceptable if a not in col.found))
    return TerminatorSet(
        tuple(col.found.values()),
        acceptable,
        reading.in_turn,
        reading.analyses,
        additional,
        reading.in_call,
    )


class _Reading(NamedTuple):
    """What the templates' probes say, before any token is resolved to an id."""

    analyses: tuple[TemplateAnalysis, ...]  # with their positions
    sightings: tuple[Sighting, ...]  # every template's, in order
    in_turn: tuple[str, ...]
    in_call: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _read_templates(key: Same[TemplateAnalysis], scan: SpecialScanner) -> _Reading:
    """Read the analyses' probes (a pure function of them and the scanner): memoized, so the
    repos that share an analysis read it once and differ only in the ids of what was found."""
    analyses = [_read_shape(ta, scan) for ta in key.items]
    own_in_turn = [set() if ta.quoted else in_turn_tokens(ta.rendered, scan) for ta in analyses]
    openers = [turn_openers(ta.rendered, ta.generation_prompt, scan) for ta in analyses]
    own_in_call = [
        set()
        if ta.quoted
        else in_call_tokens(ta.rendered, scan, ta.generation_prompt, ta.disagreements, openers[i])
        for i, ta in enumerate(analyses)
    ]
    in_turn: set[str] = set().union(*own_in_turn)
    in_call: set[str] = set().union(*own_in_call)
    inside = in_turn | in_call
    found: list[Sighting] = []
    for i, ta in enumerate(analyses):
        prompt = ta.prompt if ta.quoted else None
        sightings = read_template(
            ta.rendered, ta.generation_prompt, scan, inside, prompt, openers[i]
        )
        found += sightings
        positions = where_written(sightings, own_in_turn[i], openers[i], own_in_call[i])
        analyses[i] = ta._replace(positions=positions)
    return _Reading(tuple(analyses), tuple(found), tuple(sorted(in_turn)), tuple(sorted(in_call)))


def _read_shape(ta: TemplateAnalysis, scan: SpecialScanner) -> TemplateAnalysis:
    """``ta`` with what its probes say of its shape: whether it quotes its assistant messages
    (the first plain final reply, in the prompt's variables, against the prompt), and which
    call probes render otherwise in history."""
    if not ta.rendered:
        return ta
    same = ta.prompt.spec.name.replace("prompt", "final") if ta.prompt is not None else None
    final = next((p for p in ta.rendered if p.spec.name == same), None)
    quoted = quoted_reply(final, ta.prompt, scan)
    differ: tuple[Disagreement, ...] = ()
    if ta.twins and not quoted:
        differ = tuple(history_disagreements(ta.rendered, ta.twins, scan))
    if quoted is None and not differ:
        return ta
    return ta._replace(quoted=quoted, disagreements=differ)


def scanner_for(repo: ModelRepo) -> SpecialScanner:
    """The control tokens of ``repo``: its special and named tokens, and its added tokens
    shaped like a tag (``</tool_call>``, ``<think>``, ``[TOOL_CALLS]``) whether or not the
    tokenizer marks them special: the model emits each as one token, so the flag (which only
    says whether decoding hides it) must not decide where a reply ends. Added tokens that
    are words or whitespace (``python``, runs of spaces) stay text."""
    specials = set(repo.iter_special_strings())
    tags = [c for c, info in repo.added_tokens.items() if not info.special and _is_tag(c)]
    plain = [c for c, info in repo.added_tokens.items() if not info.special and not _is_tag(c)]
    return SpecialScanner(specials | set(tags), [c for c in plain if c not in specials])


def _is_tag(content: str) -> bool:
    """``<...>`` or ``[...]`` with no whitespace inside: markup, not a word."""
    pairs = (("<", ">"), ("[", "]"))
    return (
        len(content) > 2
        and any(content.startswith(a) and content.endswith(b) for a, b in pairs)
        and not any(ch.isspace() for ch in content)
    )
