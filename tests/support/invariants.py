"""What a report must never say of itself, checked on any repo folder (``contradictions``).

1. A token a finding says cuts a reply (a stop id written inside a turn or ordinary text,
   EOS011/EOS012; a closer also written inside a turn or before more of a tool-calling reply,
   EOS010/EOS016) is never in the stop set ``fix`` proposes: never added, and never kept by
   a ``fix`` that says it takes it out. Only what ``fix`` cannot fix stays where it is (the
   reply's only closer, EOS010/EOS016: nothing else would end the reply).
2. A token named as ending a turn is never one that every render follows with another closer:
   a reply's terminator (``turn_end``) is, in some render, the first control token after a
   reply's text; a tool call's (``tool_call``) is, in some render of a call that ends the
   conversation, the last control token the call's closer writes (a conversation-end stop or a
   token written between reasoning and answer, which the report names aside, left out). Read
   off the rendered probes, not off the analysis's placements.
3. ``check`` after ``fix`` reports nothing ``fix`` could change, and ``fix`` again writes
   nothing.
4. The text, JSON and ``explain`` outputs name the same terminators and optional stops.

Also the helpers that make repo folders of a bare template (render goldens, hostile and fuzz
templates, generated shapes): ``template_repo``.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

from eosfix import api
from eosfix.analysis.inturn import closers_inside_a_turn
from eosfix.analysis.positions import TURN_OPENER, SpecialScanner
from eosfix.analysis.shapes import ASSISTANT1, TOOL_ARG, find_marker, rfind_marker
from eosfix.analysis.terminators import STOP_STRING, TOOL_CALL, TURN_END, scanner_for
from eosfix.decide.check import RepoCheck, Status
from eosfix.render.explain import render_explain, result_explain_dict
from eosfix.render.report import render_repo_text, result_to_dict
from eosfix.result import RepoResult

FIRST_ID = 100
# Literals shaped like control tokens: <|x|>, <｜x｜>, <tag>, </tag>, [TAG], [/TAG].
CONTROL_SHAPE = re.compile(
    r"<\|[^<>|\s]{1,40}\|>|<｜[^<>｜\s]{1,40}｜>|</?[A-Za-z_][\w.-]{0,30}>|\[/?[A-Z_]{2,30}\]"
)


def template_repo(
    root: Path,
    template: str,
    tokens: Sequence[str] = (),
    *,
    eos: str | None = None,
    bos: str | None = None,
    stop: Sequence[str] | None = None,
) -> Path:
    """A model folder of ``template``: ``tokens`` (default: the literals shaped like control
    tokens, eos and bos first) as special added tokens, ids from ``FIRST_ID`` in order; the
    tokenizer's eos (default: the first token); generation_config.json stopping on ``stop``
    (default: the eos)."""
    names = list(dict.fromkeys(t for t in (eos, bos, *tokens) if t))
    if not tokens:
        names += [t for t in dict.fromkeys(CONTROL_SHAPE.findall(template)) if t not in names]
    root.mkdir(parents=True, exist_ok=True)
    decoder = {str(FIRST_ID + i): {"content": t, "special": True} for i, t in enumerate(names)}
    tok: dict[str, object] = {"added_tokens_decoder": decoder}
    eos = eos or (names[0] if names else None)
    if eos:
        tok["eos_token"] = eos
    if bos:
        tok["bos_token"] = bos
    (root / "tokenizer_config.json").write_text(json.dumps(tok, indent=2) + "\n")
    (root / "chat_template.jinja").write_text(template)
    ids = [FIRST_ID + names.index(t) for t in (stop if stop is not None else [eos]) if t in names]
    (root / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}) + "\n")
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}) + "\n")
    return root


def golden_repo(case: dict, root: Path) -> Path:
    """A model folder of a render golden's template (its context's bos and eos tokens)."""
    context = case["context"]
    eos, bos = (
        context.get(k) if isinstance(context.get(k), str) else None
        for k in ("eos_token", "bos_token")
    )
    return template_repo(root, case["template"], eos=eos or None, bos=bos or None)


# --- the invariants --------------------------------------------------------------------


def contradictions(path: Path, workdir: Path, *, fix: bool = True) -> list[str]:
    """Every way the report of the repo folder ``path`` contradicts itself (empty: none).
    ``workdir``: an empty folder for a copy ``fix`` may write; ``fix``: also run invariant 3."""
    result = api.check(path)
    if result.error is not None or result.check is None:
        return []
    c = result.check
    out = [*_cut_yet_proposed(c), *_followed_in_every_render(c), *_outputs_disagree(result)]
    if fix and c.proposed is not None and not c.unfinished:
        out += _fix_leaves_nothing(path, workdir)
    return out


def _ids(c: RepoCheck, tokens: Iterable[str]) -> dict[int, str]:
    found = {}
    for token in tokens:
        info = c.repo.resolve(token)
        if info is not None and info.id is not None:
            found[info.id] = token
    return found


def _cut_yet_proposed(c: RepoCheck) -> list[str]:
    """1: what a finding says cuts a reply, added to the stop set by ``fix``, or kept there by
    a ``fix`` that says it takes it out. What ``fix`` leaves alone stays: the reply's only
    closer (EOS010, EOS016: removing it would leave nothing that ends the reply)."""
    if c.proposed is None:
        return []
    cutting = {s.id: s.label for s in c.review.cutting}
    if {f.code for f in c.findings} & {"EOS010", "EOS016"}:
        cutting |= _ids(c, closers_inside_a_turn(c.terminators))
    before = set(c.stop.ids or ())
    out = []
    for token_id, label in cutting.items():
        if token_id not in c.proposed:
            continue
        if token_id not in before:
            out.append(f"{label} cuts a reply (a finding says so), yet fix adds it")
        elif token_id in c.review.remove:
            out.append(f"{label} cuts a reply and fix says it takes it out, yet it keeps it")
    return out


def _followed_in_every_render(c: RepoCheck) -> list[str]:
    """2: a named terminator that no render shows where its kind says a turn ends."""
    scanner = scanner_for(c.repo)
    optional = {t.content for t in c.terminators.additional}
    inside = {*c.terminators.in_turn, *c.terminators.in_call}
    out = []
    for t in c.terminators.terminators:
        if t.kind == TURN_END:
            seen, ok = _first_after(c, t.content, ASSISTANT1, scanner, inside)
        elif t.kind == TOOL_CALL:  # nor a token written between reasoning and answer
            seen, ok = _last_after(c, t.content, scanner, optional | set(c.terminators.in_turn))
        else:
            continue
        if seen and not ok:
            what = "first after a reply" if t.kind == TURN_END else "last after a call"
            out.append(
                f"{t.content} is named as ending a turn ({t.kind}), but every render follows it "
                f"with another closer (it is never the {what})"
            )
    return out


def _renders(c: RepoCheck, kinds: tuple[str, ...]) -> list[str]:
    return [
        p.text or ""
        for ta in c.terminators.templates
        if ta.quoted is None
        for p in ta.rendered
        if p.spec.kind in kinds
    ]


def _first_after(
    c: RepoCheck, token: str, marker: str, scanner: SpecialScanner, inside: set[str]
) -> tuple[bool, bool]:
    """(written after a reply's text in some render, written there first in some render)."""
    seen = ok = False
    for text in _renders(c, ("final", "history", "reasoning")):
        at = rfind_marker(text, marker)
        if at < 0:
            continue
        hits = [tok for tok, _ in scanner.find(text[at + len(marker) :]) if tok not in inside]
        seen |= token in hits
        ok |= bool(hits) and hits[0] == token
    return seen, ok


def _last_after(
    c: RepoCheck, token: str, scanner: SpecialScanner, optional: set[str]
) -> tuple[bool, bool]:
    """(written after a call that ends a conversation, the last control token of its closer
    in some render: up to the next turn's opener, conversation-end stops left aside)."""
    seen = ok = False
    openers = {tok for tok, wheres in c.terminators.positions().items() if TURN_OPENER in wheres}
    for text in _renders(c, ("tool_call",)):
        at = find_marker(text, TOOL_ARG)
        if at < 0:
            continue
        hits = list(
            itertools.takewhile(
                lambda tok: tok not in openers,
                (tok for tok, _ in scanner.find(text[at:]) if tok not in optional),
            )
        )
        seen |= token in hits
        ok |= bool(hits) and hits[-1] == token
    return seen, ok


def _outputs_disagree(result: RepoResult) -> list[str]:
    """4: the terminators of the text, the JSON and explain."""
    c = result.check
    assert c is not None
    payload = result_to_dict(result)
    named = [t["content"] for t in payload["terminators"]]
    optional = [t["content"] for t in payload["additional_stops"]]
    text = click.unstyle(render_repo_text(result))
    said = re.findall(r"^  ends a turn   (.*?)  (?:id \d+|no id), ", text, re.MULTILINE)
    said_optional = re.findall(r"^  ends the chat (.*?)  (?:id \d+|no id), ", text, re.MULTILINE)
    explain = click.unstyle(render_explain(result))
    explained = [
        m.group(1) or _unquote(m.group(2))
        for m in re.finditer(
            r"^(?:(\S+) ends a turn \(|('.*') ends a turn as plain text)", explain, re.MULTILINE
        )
    ]
    explained_optional = re.findall(r"^(\S+) is an optional stop: ", explain, re.MULTILINE)
    explain_json = result_explain_dict(result)
    out = []
    if said != named:
        out.append(f"text names {said}, JSON {named}")
    if said_optional != optional:
        out.append(f"text names the optional stops {said_optional}, JSON {optional}")
    if explained != named:
        out.append(f"explain names {explained}, JSON {named}")
    if explained_optional != optional:
        out.append(f"explain names the optional stops {explained_optional}, JSON {optional}")
    if [t["content"] for t in explain_json["terminators"]] != named:
        out.append("explain --format json names other terminators than check --format json")
    if (
        not named
        and c.repo.templates
        and "(nothing found)" not in text
        and c.status is not Status.NOT_A_MODEL
    ):
        out.append("no terminator, yet the text does not say nothing was found")
    if any(t.kind == STOP_STRING for t in c.terminators.terminators) != bool(c.stop_strings):
        out.append("stop strings and plain-text terminators disagree")
    return out


def _unquote(text: str) -> str:
    return str(ast.literal_eval(text)) if text else text


def _fix_leaves_nothing(path: Path, workdir: Path) -> list[str]:
    """3: ``fix`` on a copy, then ``check``: nothing ``fix`` could change."""
    copy = workdir / f"{path.name}.fixed"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("fixed", "expected.txt"))
    copy.chmod(0o755)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    first = api.fix(copy)
    if first.error is not None:
        return []
    after = api.check(copy)
    assert after.check is not None
    out = [
        f"after fix, check still reports {f.code} (fixable): {f.message}"
        for f in after.check.findings
        if f.fixable
    ]
    if after.check.proposed is not None:
        out.append(f"after fix, check still proposes {list(after.check.proposed)}")
    again = api.fix(copy)
    if again.written:
        out.append(f"fix again wrote {list(again.written)}")
    return out
