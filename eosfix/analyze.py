"""Find the tokens that end an assistant turn, and check the stop configuration against them.

Vocabulary:

- **turn terminator**: a token the model emits to end its assistant turn. Found, in order of
  evidence: (1) the special tokens right after the assistant text when the conversation ends
  with an assistant message (the training target; the last of them is the turn-level one,
  earlier ones are acceptable stops); (2) the same after an assistant tool call; (3) only when
  (1) writes no special token at all, the opener of the turn that follows (GLM: ``<|user|>``,
  ``<|observation|>``); (4) when no special token separates turns, plain-text stop strings.
- **in-turn token**: a special token written *inside* one assistant turn (between reasoning
  and answer). It is never a terminator (gpt-oss ``<|end|>``).

Everything here is pure: no printing, no writing, no network.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from jinja2 import nodes

from eosfix.errors import TemplateError
from eosfix.models import eos_tuple
from eosfix.probes import (
    ASSISTANT1,
    SPECS,
    SYSTEM,
    THINK1,
    USER1,
    Probe,
    run_generation_prompt,
    run_probe,
)
from eosfix.repo import CONFIG, GENERATION_CONFIG, ChatTemplate, ModelRepo, TokenInfo
from eosfix.template import compile_template, parse_template

TURN_END = "turn_end"
TOOL_CALL = "tool_call"
NEXT_TURN = "next_turn_opener"
STOP_STRING = "stop_string"
_EVIDENCE_CHARS = 48
# Literals shaped like control tokens (``<|x|>``, ``<｜x｜>``) that a tokenizer may not list.
_CONTROL_SHAPE = re.compile(r"<\|[^<>|\s]{1,40}\|>|<｜[^<>｜\s]{1,40}｜>")


@dataclass(frozen=True)
class Terminator:
    content: str
    id: int | None
    kind: str  # turn_end | tool_call | next_turn_opener | stop_string
    templates: tuple[str, ...]
    probe: str  # the probe that showed it
    evidence: str  # rendered text around it, sentinel included
    id_source: str | None = None
    special: bool | None = None  # marked special by the tokenizer (None: unknown)

    @property
    def id_str(self) -> str:
        return f"id {self.id}" if self.id is not None else "no id"


@dataclass(frozen=True)
class TemplateAnalysis:
    name: str
    file: str
    probes: tuple[Probe, ...]
    generation_prompt: str | None = None
    unreached_literals: tuple[tuple[str, int], ...] = ()  # (token, template line)

    @property
    def refusals(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.refusal is not None)

    @property
    def rendered(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.text is not None)


@dataclass(frozen=True)
class TerminatorSet:
    terminators: tuple[Terminator, ...]
    acceptable: tuple[str, ...] = ()
    in_turn: tuple[str, ...] = ()
    templates: tuple[TemplateAnalysis, ...] = field(default_factory=tuple)


class SpecialScanner:
    """Finds control-token strings in rendered text, longest match first."""

    def __init__(self, specials: Iterable[str], plain: Iterable[str] = ()) -> None:
        self._plain = frozenset(plain)  # added tokens the tokenizer treats as text
        self._tokens = tuple(sorted({s for s in specials if s}, key=len, reverse=True))

    def find(self, text: str) -> list[tuple[str, int]]:
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


def _evidence(text: str, start: int, end: int) -> str:
    lo = max(0, start - _EVIDENCE_CHARS)
    hi = min(len(text), end + _EVIDENCE_CHARS)
    return ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def _tail_specials(
    probe: Probe, scanner: SpecialScanner, openers: frozenset[str] = frozenset()
) -> list[tuple[str, int]]:
    """Control tokens after the end marker, up to where a next turn opens.

    A turn opens at the next turn's sentinel (history shapes) or at the first token that
    opens turns in this template (``openers``): templates that always append the
    generation prompt write ``<|eot_id|><|start_header_id|>assistant...`` after a reply.
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


def _turn_openers(ta: TemplateAnalysis, scanner: SpecialScanner) -> frozenset[str]:
    """Control tokens that open a turn: those of the generation prompt (the assistant opener).

    When the template ignores ``add_generation_prompt`` (it always appends the opener), read
    what it writes before the first message's text in the probe with a system message.
    """
    if ta.generation_prompt:
        return frozenset(tok for tok, _ in scanner.find(ta.generation_prompt))
    by_name = {p.spec.name: p.text for p in ta.rendered}
    for name, marker in (("final+system", SYSTEM), ("final", USER1)):
        text = by_name.get(name)
        if text is not None and marker in text:
            return frozenset(tok for tok, _ in scanner.find(text[: text.find(marker)]))
    return frozenset()


def _in_turn_tokens(probes: Iterable[Probe], scanner: SpecialScanner) -> set[str]:
    """Control tokens between an assistant message's reasoning and its answer."""
    found: set[str] = set()
    for probe in probes:
        if probe.spec.kind != "reasoning" or probe.text is None:
            continue
        think, answer = probe.text.rfind(THINK1), probe.text.rfind(ASSISTANT1)
        if 0 <= think < answer:
            found.update(tok for tok, _ in scanner.find(probe.text[think + len(THINK1) : answer]))
    return found


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
    source: str, rendered: Iterable[str], scanner: SpecialScanner
) -> tuple[tuple[str, int], ...]:
    """Control-token literals of the template that no probe rendered, with their line."""
    seen = "".join(rendered)
    out: dict[str, int] = {}
    for text, lineno in _template_literals(source):
        for tok, _ in scanner.find(text):
            if tok not in seen and tok not in out:
                out[tok] = lineno
    return tuple(sorted(out.items(), key=lambda kv: kv[1]))


def analyze_template(
    template: ChatTemplate, repo: ModelRepo, scanner: SpecialScanner
) -> TemplateAnalysis:
    """Run every probe on one template (``TemplateError`` if it is not valid Jinja)."""
    try:
        compile_template(template.source)
    except TemplateError as exc:
        raise TemplateError(exc.message, path=repo.root / template.file) from None
    probes = tuple(run_probe(template.source, template.name, s, repo.special_tokens) for s in SPECS)
    texts = [p.text for p in probes if p.text is not None]
    return TemplateAnalysis(
        template.name,
        template.file,
        probes,
        run_generation_prompt(template.source, repo.special_tokens),
        _unreached_literals(template.source, texts, scanner),
    )


class _Collector:
    """Accumulates terminators across probes and templates, first evidence wins."""

    def __init__(self, repo: ModelRepo) -> None:
        self.repo = repo
        self.found: dict[str, Terminator] = {}
        self.acceptable: list[str] = []

    def add(self, content: str, kind: str, probe: Probe, pos: int) -> None:
        text = probe.text or ""
        if content in self.found:
            old = self.found[content]
            if probe.template not in old.templates:
                self.found[content] = _replace_templates(old, (*old.templates, probe.template))
            return
        info = self.repo.resolve(content) if kind != STOP_STRING else None
        self.found[content] = Terminator(
            content=content,
            id=info.id if info else None,
            kind=kind,
            templates=(probe.template,),
            probe=f"{probe.template}/{probe.spec.name}",
            evidence=_evidence(text, pos, pos + len(content)),
            id_source=info.source if info else None,
            special=info.special if info else None,
        )


def _replace_templates(t: Terminator, templates: tuple[str, ...]) -> Terminator:
    return dataclasses.replace(t, templates=templates)


def _collect_final(
    ta: TemplateAnalysis,
    scan: SpecialScanner,
    col: _Collector,
    in_turn: set[str],
    openers: frozenset[str],
) -> bool:
    """Rule 1 and 2: the last control token after the final assistant text / tool call.

    Returns whether a final-position probe rendered and wrote no control token at all.
    """
    wrote_special = rendered_final = False
    tails = []
    for probe in ta.rendered:
        if probe.spec.kind not in ("final", "reasoning", "tool_call"):
            continue
        rendered_final |= probe.spec.kind != "tool_call" and probe.tail_start is not None
        specials = _tail_specials(probe, scan, openers)
        if specials:
            wrote_special |= probe.spec.kind != "tool_call"
            tails.append((probe, specials))
    # A token that another shape follows with more control tokens is not turn-level
    # (LFM2 writes <|tool_call_end|> and then, when there is content, <|im_end|>).
    followed = {tok for probe, sp in tails if probe.spec.kind == "tool_call" for tok, _ in sp[:-1]}
    for probe, specials in tails:
        *earlier, (last, pos) = specials
        if last in in_turn:
            continue  # e.g. a template that closes reasoning last: never stop inside a turn
        if probe.spec.kind == "tool_call":
            if last not in followed:
                col.add(last, TOOL_CALL, probe, pos)
            continue  # tool-call syntax tokens are not acceptable turn ends
        col.add(last, TURN_END, probe, pos)
        col.acceptable += [tok for tok, _ in earlier if tok not in in_turn]
    return rendered_final and not wrote_special


def _call_tail(ta: TemplateAnalysis, scan: SpecialScanner) -> list[str]:
    """What closes a tool call in final position (to strip it from the tool-result gap)."""
    for probe in ta.rendered:
        if probe.spec.kind == "tool_call":
            return [tok for tok, _ in _tail_specials(probe, scan)]
    return []


def _collect_openers(
    ta: TemplateAnalysis,
    scan: SpecialScanner,
    col: _Collector,
    in_turn: set[str],
    openers: frozenset[str],
) -> None:
    """Rule 3 and 4: replies have no closing token, so the next turn's first control token
    ends them (GLM: ``<|user|>``, ``<|observation|>``); with none, plain-text stop strings."""
    call_tail = _call_tail(ta, scan)
    for probe in ta.rendered:
        if probe.spec.kind not in ("history", "tool_result") or probe.next_start is None:
            continue
        specials = [(t, p) for t, p in _tail_specials(probe, scan) if t not in in_turn]
        if probe.spec.kind == "tool_result":  # the call's own closing tokens come first
            while specials and call_tail and specials[0][0] == call_tail[0]:
                specials, call_tail = specials[1:], call_tail[1:]
        text, start = probe.text or "", probe.tail_start or 0
        if specials:
            tok, pos = specials[0]
            # Followed by a turn opener, it ends this turn (a template that closes a reply only
            # when another turn follows); otherwise it opens the next turn itself (GLM).
            rest = {t for t, _ in scan.find(text[pos + len(tok) : probe.next_start])}
            kind = TURN_END if rest & openers else NEXT_TURN
            col.add(tok, kind, probe, pos)
            continue
        between = text[start : probe.next_start]
        for line in between.splitlines():
            if line.strip():
                col.add(line.strip(), STOP_STRING, probe, start + between.find(line))
                break


def find_terminators(repo: ModelRepo) -> TerminatorSet:
    """Analyze every named template of the repo and collect its turn terminators."""
    specials = set(repo.iter_special_strings())
    plain = [c for c, info in repo.added_tokens.items() if not info.special and c not in specials]
    scan = SpecialScanner(specials, plain)
    analyses = tuple(analyze_template(t, repo, scan) for t in repo.templates)
    col = _Collector(repo)
    in_turn: set[str] = set()
    for ta in analyses:
        in_turn |= _in_turn_tokens(ta.rendered, scan)
    for ta in analyses:
        openers = _turn_openers(ta, scan)
        if _collect_final(ta, scan, col, in_turn, openers):
            _collect_openers(ta, scan, col, in_turn, openers)
    acceptable = tuple(dict.fromkeys(a for a in col.acceptable if a not in col.found))
    return TerminatorSet(tuple(col.found.values()), acceptable, tuple(sorted(in_turn)), analyses)


@dataclass(frozen=True)
class StopConfig:
    """What transformers stops on today, and where that comes from."""

    ids: tuple[int, ...] | None
    source: str  # "generation_config.json", "config.json", "config.json text_config", "none"
    generation_config_exists: bool
    raw: int | list[int] | None


def current_stop_config(repo: ModelRepo) -> StopConfig:
    """transformers reads generation_config.json alone; only a missing file falls back."""
    if repo.generation_config is not None:
        raw = repo.generation_config.eos_token_id
        return StopConfig(eos_tuple(raw), GENERATION_CONFIG, True, raw)
    if repo.config is not None:
        if repo.config.eos_token_id is not None:
            raw = repo.config.eos_token_id
            return StopConfig(eos_tuple(raw), CONFIG, False, raw)
        if repo.config.text_config is not None and repo.config.text_config.eos_token_id is not None:
            raw = repo.config.text_config.eos_token_id
            return StopConfig(eos_tuple(raw), f"{CONFIG} text_config", False, raw)
    return StopConfig(None, "none", False, None)


def tokenizer_eos(repo: ModelRepo) -> TokenInfo | None:
    content = repo.eos_token
    if content is None:
        return None
    return repo.resolve(content) or TokenInfo(content, None, True, False, "unresolved")


def propose_eos(
    current: tuple[int, ...] | None, eos: TokenInfo | None, terminators: Iterable[Terminator]
) -> tuple[int, ...] | None:
    """The list to write, or None when every terminator is already a stop id.

    Existing ids first in their order (transformers pads with the first; ExLlamaV2 keeps only
    the first), then the tokenizer's eos (TGI and mlx-lm replace it with the list), then each
    terminator id.
    """
    have = list(current or ())
    missing = [t.id for t in terminators if t.id is not None and t.id not in have]
    if not missing:
        return None
    extra = [eos.id] if eos is not None and eos.id is not None else []
    return tuple(dict.fromkeys([*have, *extra, *missing]))
