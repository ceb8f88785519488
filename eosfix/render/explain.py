"""The in-depth view of one repo: probes as rendered, terminators and their evidence, and the
exact ids a hand-written generation loop must compare after each step."""

from __future__ import annotations

import json
from typing import Any

import click

from eosfix.analysis.shapes import Probe
from eosfix.analysis.terminators import STOP_STRING, SpecialScanner, TemplateAnalysis, Terminator
from eosfix.decide.check import RepoCheck
from eosfix.ports.loop import TokenizedProbe, tokenize_probe
from eosfix.ports.render import loop_stops
from eosfix.render.report import render_repo_text, result_to_dict
from eosfix.render.rows import RepoRows, RuntimeLine, repo_rows
from eosfix.render.words import placement_text, stop_source_text
from eosfix.result import RepoResult

_SHOWN_PROBES = ("final", "final+system", "tool_call", "history")


def visible_lines(text: str, scanner: SpecialScanner) -> list[str]:
    """Rendered text as a person reads it: one output line per rendered line, each newline
    shown as a literal ``\\n`` at the end of its line, control tokens highlighted."""
    out, last = [], 0
    for tok, pos in scanner.find(text):
        out.append(text[last:pos])
        out.append(click.style(tok, fg="cyan", bold=True))
        last = pos + len(tok)
    out.append(text[last:])
    styled = "".join(out)
    return [line.replace("\n", "\\n") for line in styled.splitlines(keepends=True)] or [""]


def _quoted(text: str, scanner: SpecialScanner, indent: str = "  ") -> list[str]:
    return [f"{indent}| {line}" for line in visible_lines(text, scanner)]


def _scanner(c: RepoCheck) -> SpecialScanner:
    return SpecialScanner(c.repo.iter_special_strings())


def _probe_summary(ta: TemplateAnalysis) -> tuple[list[str], list[Probe]]:
    """The count line, what is folded or left out, and the probes to show (distinct texts)."""
    shown: list[Probe] = []
    folded: list[str] = []
    others: list[str] = []
    first_with: dict[str, str] = {}
    for probe in ta.rendered:
        assert probe.text is not None
        same = first_with.setdefault(probe.text, probe.spec.name)
        if probe.spec.name in _SHOWN_PROBES and same == probe.spec.name:
            shown.append(probe)
        elif same != probe.spec.name:
            folded.append(f"{probe.spec.name} = {same}")
        else:
            others.append(probe.spec.name)
    n, k = len(ta.probes), len(ta.rendered)
    lines = [f"  {n} probes (message shapes eosfix tries): {k} rendered, {n - k} refused"]
    if folded:
        lines.append(f"  same text as an earlier probe (folded): {', '.join(folded)}")
    if others:
        lines.append(f"  not shown (--format json has every text): {', '.join(others)}")
    return lines, shown


def _template_block(ta: TemplateAnalysis, scanner: SpecialScanner) -> list[str]:
    counts, shown = _probe_summary(ta)
    lines = [click.style(f"template {ta.name!r} ({ta.file})", bold=True), *counts]
    if ta.refusals:
        lines.append(
            "  refused (expected: a template accepts only some message shapes; each refusal "
            "is evidence, not an error):"
        )
        lines += [f"    {probe.spec.name}: {probe.refusal}" for probe in ta.refusals]
    for probe in shown:
        assert probe.text is not None
        lines.append(f"  --- probe {probe.spec.name} (add_generation_prompt=False) ---")
        lines += _quoted(probe.text, scanner)
    if ta.generation_prompt is not None:
        lines.append("  --- generation prompt (what add_generation_prompt=True appends) ---")
        lines += _quoted(ta.generation_prompt, scanner)
    lines += _branch_lines(ta)
    lines += _shape_lines(ta, scanner)
    for tok, line in ta.unreached_literals:
        lines.append(
            f"  possible: {tok} is written at template line {line} but no probe reached it"
        )
    return lines


_VALUE_CHARS = 60


def _branch_lines(ta: TemplateAnalysis) -> list[str]:
    """The variables that choose a branch writing an assistant message or a tool call, what
    the probes set each to, and which probes set it."""
    if not ta.branches:
        return []
    lines = [
        (
            "  branch variables (an if on each chooses a branch that writes an assistant "
            "message or a tool call; probed on both sides):"
        )
    ]
    for name, value, line in ta.branches:
        shown = json.dumps(value, ensure_ascii=False)
        if len(shown) > _VALUE_CHARS:
            shown = shown[: _VALUE_CHARS - 1] + "…"
        probes = [p.spec.name for p in ta.probes if p.spec.kwargs.get(name) == value]
        where = ", ".join(probes) if probes else "no probe"
        lines.append(
            f"    {name} (template line {line}) = {shown} in {where}; unset in the other probes"
        )
    return lines


def _shape_lines(ta: TemplateAnalysis, scanner: SpecialScanner) -> list[str]:
    """A template that quotes its replies (the prompt whose end the verdict follows), and a
    last message rendered otherwise than in history (both renders, and which is followed)."""
    lines: list[str] = []
    if ta.quoted is not None and ta.prompt is not None and ta.prompt.text is not None:
        lines += [
            (
                f"  quoted conversation: {ta.quoted} (probe final against probe "
                f"{ta.prompt.spec.name}), so no assistant message is a turn of its own; the "
                "model writes its verdict at the end of the prompt, and what closes the "
                "prompt's turn there closes the verdict"
            ),
            f"  --- probe {ta.prompt.spec.name} (add_generation_prompt=True) ---",
            *_quoted(ta.prompt.text, scanner),
        ]
    for d in ta.disagreements:
        mine = " ".join(d.final_tokens) or "no control token"
        theirs = " ".join(d.history_tokens) or "no control token"
        lines += [
            (
                f"  last message and history disagree: probe {d.final.spec.name} (the "
                f"conversation ends with the message) writes {mine} before its last argument, "
                f"probe {d.history.spec.name} (its results follow) writes {theirs}; eosfix "
                "follows the history, which is what the model sees of its own past replies"
            ),
            f"  --- probe {d.history.spec.name} (add_generation_prompt=False) ---",
            *_quoted(d.history.text or "", scanner),
        ]
    return lines


def _shown_besides(ta: TemplateAnalysis) -> tuple[Probe, ...]:
    """Renders that are not probes but that a report stands on: the prompt whose end a
    quoting template's verdict follows, and the history renders followed over the last
    message's."""
    prompt = (ta.prompt,) if ta.quoted is not None and ta.prompt is not None else ()
    return (*prompt, *(d.history for d in ta.disagreements))


def loop_ids(c: RepoCheck) -> tuple[list[int], str]:
    """The ids a generation loop must stop on, and where they come from."""
    stops = loop_stops(c)
    return list(stops.ids), stops.source


def _runtime_cells(row: RuntimeLine, config_json_written: bool) -> tuple[str, ...]:
    cfg = "(written)" if config_json_written else row.with_config_json.words
    verdicts = (row.now.words, row.after.words, cfg if row.now.applicable else row.now.words)
    return (row.label, *verdicts, row.versions, row.basis, row.reads)


def render_runtime_table(rows: RepoRows) -> str:
    """The per-runtime table: does each runtime stop at every terminator, now and after fix.

    Plain aligned columns: the runtime (``name==version`` when pinned), the verdicts, the
    versions the rule holds for, whether the rule was executed against the runtime or only
    modelled, and (last, so nothing wraps mid-word) what it reads; then each runtime's note
    and the source its rule was read from. Runtimes that cannot load this folder (no
    config.json) are shown as not applicable.
    """
    head = ("runtime", "now", "after fix", "fix --config-json", "versions", "basis",
            "reads eos from")  # fmt: skip
    table = [head] + [_runtime_cells(r, rows.config_json_written) for r in rows.runtimes]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    lines = [
        "  "
        + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        + "  "
        + row[-1]
        for row in table
    ]
    lines.insert(1, "  " + "-" * (len(lines[0]) - 2))
    lines.append("  notes, and where each rule was read:")
    for r in rows.runtimes:
        note = f"{r.note} " if r.note else ""
        lines.append(f"    {r.label}: {note}[{r.source}]")
    return "\n".join(line.rstrip() for line in lines)


def _tokenized_lines(tp: TokenizedProbe) -> list[str]:
    s = tp.split
    lines = [
        (
            f"  probe {s.template}/{s.probe} tokenized with tokenizer.json "
            "(add_special_tokens=False, as apply_chat_template(tokenize=True)):"
        ),
        (f"  prompt ids ({len(tp.prompt_ids)}, add_generation_prompt=True): {list(tp.prompt_ids)}"),
        f"  reply ids: {list(tp.reply_ids)}",
    ]
    if tp.stop_at is None:
        lines.append(f"  a loop comparing with {list(tp.stop_ids)} never stops in this reply")
    else:
        stop_id = tp.reply_ids[tp.stop_at]
        lines.append(
            f"  a correct loop stops at reply position {tp.stop_at} (id {stop_id}, "
            f"generated token {tp.stop_at + 1}, sequence position "
            f"{len(tp.prompt_ids) + tp.stop_at}): {tp.decoded_reply!r}"
        )
    return lines


def _evidence_lines(t: Terminator, scanner: SpecialScanner) -> list[str]:
    """What a terminator is, where it is written, the rendered text that shows it, its id."""
    if t.kind == STOP_STRING:  # text, not a token: quoted, and no id to look for
        head = f"{t.content!r} ends a turn as plain text: it needs a stop string"
    else:
        what = f"ends a turn ({t.kind.replace('_', ' ')})" if t.required else "is an optional stop"
        head = f"{t.content} {what}: {placement_text(t)}"
    seen = (
        [f"{head}; seen in probe {t.probe}:", *_quoted(t.evidence, scanner)]
        if t.probe
        else [
            f"{head}:"  # no probe shows it (an empty template: the tokenizer's eos)
        ]
    )
    return [*seen, f"  id {t.id} from {t.id_source}" if t.id is not None else "  no id"]


def render_explain(result: RepoResult) -> str:
    """The explain view as text."""
    if result.check is None:
        return render_repo_text(result)
    c = result.check
    scanner = _scanner(c)
    lines = [render_repo_text(result), ""]
    for ta in c.terminators.templates:
        lines += _template_block(ta, scanner)
        lines.append("")
    for t in (*c.terminators.terminators, *c.terminators.additional):
        lines += _evidence_lines(t, scanner)
    ids, source = loop_ids(c)
    for text, token_id in c.unwritten_eog_tokens if c.repo.templates else ():
        advice = (
            "it is among the loop's ids below (harmless: it fires only if the model emits it)"
            if token_id in ids
            else "add it to your loop only if the model emits it"
        )
        lines.append(
            f"{text} ({token_id}) is a special token runtimes stop on by name, but no "
            f"template writes it: {advice}"
        )
    where = stop_source_text(c) if source == "none" else source
    if c.repo.templates and result.runtimes is not None:
        lines += [
            "",
            click.style(
                "Runtimes: does generation stop at every terminator, and never inside a reply?",
                bold=True,
            ),
            render_runtime_table(repo_rows(result)),
        ]
    if c.repo.templates:
        lines += [
            "",
            click.style("For a hand-written generation loop", bold=True),
            f"  stop when the sampled id is in {ids}  ({where})",
        ]
        if c.stop_strings_needed:
            texts = list(c.stop_strings_needed)
            lines.append(f"  and stop on the text {texts} (no single id exists)")
        tp = tokenize_probe(c, ids)
        if tp is not None:
            lines += _tokenized_lines(tp)
    return "\n".join(lines)


def result_explain_dict(result: RepoResult) -> dict[str, Any]:
    """The explain view as JSON: the check payload plus every probe's rendered text."""
    out = result_to_dict(result)
    if result.check is None:
        return out
    out["probes"] = [
        {"template": p.template, "probe": p.spec.name, "text": p.text, "refusal": p.refusal}
        for ta in result.check.terminators.templates
        for p in (*ta.probes, *_shown_besides(ta))
    ]
    ids, source = loop_ids(result.check)
    out["loop"] = {"stop_ids": ids, "source": source}
    tp = tokenize_probe(result.check, ids)
    if tp is not None:
        out["loop"]["tokenized_probe"] = {
            "template": tp.split.template,
            "probe": tp.split.probe,
            "prompt_ids": list(tp.prompt_ids),
            "reply_ids": list(tp.reply_ids),
            "stop_at": tp.stop_at,
            "decoded_reply": tp.decoded_reply,
        }
    return out
