"""Render results as text or JSON, and own the exit code (``Report``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import click

from eosfix.analyze import Placement, Terminator
from eosfix.api import RepoResult
from eosfix.check import RepoCheck, Severity, Status
from eosfix.positions import (
    CONVERSATION_END,
    EARLIER_REPLIES,
    EVERY_REPLY,
    FINAL_REPLY,
    HISTORY_REPLY,
    LAST_REPLY,
    NEXT_TURN,
    PLAIN_TEXT,
    TOOL_CALL,
)
from eosfix.runtimes import Pins
from eosfix.stopsets import (
    CONFIG_READERS,
    FIRST_ID_ONLY,
    RuntimeTable,
    runtime_rows_json,
    runtime_table,
)

EXIT_OK = 0  # nothing to fix / nothing changed
EXIT_FINDINGS = 1  # findings (check) or files changed (fix)
EXIT_INPUT = 2  # usage error or an input that cannot be read
EXIT_INTERNAL = 3  # a bug: rerun with EOSFIX_DEBUG=1 for the traceback


@dataclass
class Report:
    """Counts what happened to each repo; decides the exit code, like black's Report."""

    results: list[RepoResult] = field(default_factory=list)

    def record(self, result: RepoResult) -> None:
        self.results.append(result)

    @property
    def exit_code(self) -> int:
        if any(r.error is not None for r in self.results):
            return EXIT_INPUT
        if any(r.written for r in self.results):
            return EXIT_FINDINGS
        bad = (Status.FIXABLE, Status.PROBLEMS)
        if any(r.status in bad and not r.written for r in self.results if r.check):
            return EXIT_FINDINGS
        return EXIT_OK

    def summary(self, *, fixing: bool, dry_run: bool) -> str:
        counts = dict.fromkeys(VERDICTS, 0)
        for r in self.results:
            status = "error" if r.check is None else r.check.status.value
            findings = r.check is not None and bool(r.check.findings)
            counts[verdict_of(status, written=bool(r.written), has_findings=findings)] += 1
        fixable = "would be fixed" if (dry_run or not fixing) else "fixed"
        parts = summary_parts(counts, fixable=fixable, ok="already stop correctly")
        text = ", ".join(f"{n} {_plural(n)} {what}" for n, what in parts)
        return text or "no repos checked"


# What one repo (or cache snapshot) comes to, in the order summaries list them.
VERDICTS = ("fixed", "fixable", "problems", "warned", "ok", "no_template", "error")


def verdict_of(status: str, *, written: bool, has_findings: bool) -> str:
    """One of VERDICTS: ``error`` (unreadable), ``fixed`` (files written), ``warned`` (stops
    on every id but has warnings), else the check status."""
    if status == "error":
        return "error"
    if written:
        return "fixed"
    if status == Status.OK.value and has_findings:
        return "warned"
    return status


def summary_parts(counts: dict[str, int], *, fixable: str, ok: str) -> list[tuple[int, str]]:
    """(count, what) for each verdict that occurred, in VERDICTS order."""
    what = {
        "fixed": "fixed",
        "fixable": fixable,
        "problems": "with problems eosfix cannot fix",
        "warned": "with warnings only",
        "ok": ok,
        "no_template": "without a chat template",
        "error": "could not be read",
    }
    return [(counts[v], what[v]) for v in VERDICTS if counts.get(v)]


# What each kind of terminator is, in a few words (the PR description uses it too).
KIND_TEXT = {
    "turn_end": "closes a reply",
    "tool_call": "written after a tool call",
    "next_turn_opener": "opens the next turn (replies have no closing token)",
    "stop_string": "plain text: needs a stop string",
    "conversation_end": "written only when the whole conversation ends (an optional stop)",
}


def _where_text(p: Placement) -> str:
    """Where the template writes a token, as a clause (``eosfix.positions.WHERE``)."""
    rel = ", ".join(p.related)
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
}


def placement_text(t: Terminator) -> str:
    """Where the template writes ``t``: every placement, first evidence first."""
    clauses = list(dict.fromkeys(_where_text(p) for p in t.placements))
    if not clauses:
        return KIND_TEXT.get(t.kind, t.kind)
    text = clauses[0]
    for clause in clauses[1:]:  # "written after every reply and after a tool call"
        same_verb = clause.startswith("written ") and text.startswith("written ")
        text += f" and {clause.removeprefix('written ')}" if same_verb else f"; {clause}"
    return text


def terminator_to_dict(t: Terminator) -> dict[str, Any]:
    """The JSON shape of one terminator (or additional stop)."""
    return {
        "content": t.content,
        "id": t.id,
        "kind": t.kind,
        "required": t.required,
        "where": [{"where": p.where, "related": list(p.related)} for p in t.placements],
        "templates": list(t.templates),
        "probe": t.probe,
        "evidence": t.evidence,
        "id_source": t.id_source,
    }


def stop_source_text(c: RepoCheck) -> str:
    """Where the current stop ids come from, as a phrase."""
    if c.stop.source != "none":
        return f"from {c.stop.source}"
    if c.repo.config is None:
        return "generation_config.json and config.json are missing"
    return "generation_config.json is missing; config.json sets no eos_token_id"


def _plural(n: int) -> str:
    return "repo" if n == 1 else "repos"


def _ids(ids: Iterable[int] | int | None) -> str:
    if ids is None:
        return "(not set)"
    if isinstance(ids, int):
        return str(ids)
    return "[" + ", ".join(str(i) for i in ids) + "]"


def result_to_dict(r: RepoResult, pins: Pins | None = None) -> dict[str, Any]:
    """The JSON shape of one repo (stable keys, documented in the README); ``pins`` picks the
    rule of a runtime version for the ``runtimes`` verdicts."""
    out: dict[str, Any] = {"path": str(r.path), "name": r.name}
    if r.error is not None:
        out.update(status="error", error=str(r.error))
        return out
    c = r.check
    assert c is not None
    gguf = getattr(c, "container", None) == "gguf"
    out.update(
        status=c.status.value,
        templates=[
            {
                "name": ta.name,
                "file": ta.file,
                "probes_rendered": len(ta.rendered),
                "refusals": [f"{p.spec.name}: {p.refusal}" for p in ta.refusals],
                "possible": [{"content": tok, "line": line} for tok, line in ta.unreached_literals],
                "positions": {tok: list(wheres) for tok, wheres in ta.positions},
            }
            for ta in c.terminators.templates
        ],
        terminators=[terminator_to_dict(t) for t in c.terminators.terminators],
        additional_stops=[terminator_to_dict(t) for t in c.terminators.additional],
        acceptable=list(c.terminators.acceptable),
        unwritten_eog_tokens=[{"content": t, "id": i} for t, i in c.unwritten_eog_tokens],
        in_turn=list(c.terminators.in_turn),
        stop_strings=list(c.stop_strings),
        tokenizer_eos=None
        if c.tokenizer_eos is None
        else {"content": c.tokenizer_eos.content, "id": c.tokenizer_eos.id},
        eos_token_id=c.stop.raw,
        eos_token_id_source=c.stop.source,
        proposed_eos_token_id=None if c.proposed is None else list(c.proposed),
        findings=[
            {
                "code": f.code,
                "severity": f.severity.value,
                "file": f.file,
                "message": f.message,
                "fixable": f.fixable,
            }
            for f in c.findings
        ],
        changes=[{"file": p.file, "created": p.created, "diff": p.diff()} for p in r.patches],
        written=list(r.written),
        runtimes=runtime_rows_json(runtime_table(c, r.patches, pins))
        if c.repo.templates and not gguf
        else [],
    )
    out.update(r.extra)
    if gguf:
        from eosfix.ggufreport import gguf_result_dict

        return gguf_result_dict(r, out)
    return out


def render_json(
    results: list[RepoResult], report: Report, *, pins: Pins | None = None, **_: Any
) -> str:
    repos = [result_to_dict(r, pins) for r in results]
    payload = {"repos": repos, "exit_code": report.exit_code}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def _finding_line(r: RepoResult, code: str, file: str, message: str, severity: Severity) -> str:
    color = "red" if severity is Severity.ERROR else "yellow"
    where = f"{r.name}/{file}" if file else r.name
    return f"{where}: {click.style(code, fg=color, bold=True)} {message}"


def render_repo_text(
    r: RepoResult, *, fixing: bool = False, show_diff: bool = False, pins: Pins | None = None
) -> str:
    """One repo, read in a glance: what ends a turn, what the config says, what changes, why."""
    if r.error is not None:
        return f"{click.style('error', fg='red', bold=True)}: {r.error}"
    c = r.check
    assert c is not None
    if getattr(c, "container", None) == "gguf":
        from eosfix.ggufreport import render_gguf_text

        return render_gguf_text(r, fixing=fixing, show_diff=show_diff)
    if c.status is Status.NO_TEMPLATE:
        return f"{r.name}: no chat template: nothing to check"
    lines = [click.style(r.name, bold=True)]
    for t in c.terminators.terminators:
        lines.append(f"  ends a turn   {_terminator_line(t)}")
    if not c.terminators.terminators:
        lines.append("  ends a turn   (nothing found)")
    for t in c.terminators.additional:
        lines.append(f"  ends the chat {_terminator_line(t, '; an optional stop')}")
    if c.terminators.in_turn:
        lines.append(f"  inside a turn {' '.join(c.terminators.in_turn)}  (never a stop id)")
    lines.append(f"  stops on      {_ids(c.stop.raw)}  ({stop_source_text(c)})")
    lines += ["  " + _finding_line(r, f.code, f.file, f.message, f.severity) for f in c.findings]
    if c.proposed is not None:
        verb = "wrote" if r.written else "fix"
        lines.append(
            f"  {verb:<13} eos_token_id -> {_ids(c.proposed)}"
            + ("" if r.written or fixing else f"  (run: eosfix fix {r.path})")
        )
    lines.append(f"  runtimes      {runtimes_line(runtime_table(c, r.patches, pins))}")
    if show_diff:
        lines += [p.diff().rstrip("\n") for p in r.patches]
    return "\n".join(lines)


def _terminator_line(t: Terminator, note: str = "") -> str:
    templates = ", ".join(t.templates)
    return f"{t.content}  {t.id_str}, {placement_text(t)}{note} (template {templates})"


def _why_still(table: RuntimeTable, still: list[str]) -> list[str]:
    """Why runtimes still fail after the fix, when the reason is config.json."""
    why = []
    cfg_fixes = table.fixed_by_config_json()
    if cfg_fixes:
        why.append(f"{', '.join(cfg_fixes)}: use --config-json")
    if not table.has_config_json:
        absent = [n for n in still if n in CONFIG_READERS]
        if absent:
            why.append(f"{', '.join(absent)}: no config.json here")
    elif table.first_config_id is not None:
        why += [
            f"{n} stops only on config.json's first id, {table.first_config_id}"
            for n in still
            if n in FIRST_ID_ONLY
        ]
    if "llama.cpp" in still:  # its converter never reads generation_config.json
        why.append("llama.cpp: after converting, run eosfix fix on the .gguf")
    return why


def runtimes_line(table: RuntimeTable) -> str:
    """One glanceable line: runtimes that would not stop now, and after the planned fix."""
    if all(i is None for i in table.terminators.values()):
        return "nothing to compare: no terminator has a known token id"
    before = table.failing_before()
    if not before:
        return f"all {len(table.rows)} stop at every terminator"
    after = table.failing_after()
    text = f"would not stop: {', '.join(before)}"
    if after != before:
        text += f"; after fix: {', '.join(after) if after else 'all stop'}"
    why = _why_still(table, after)
    return text + (f" ({'; '.join(why)})" if why else "")


def render_text(
    results: list[RepoResult],
    report: Report,
    *,
    fixing: bool = False,
    show_diff: bool = False,
    dry_run: bool = False,
    pins: Pins | None = None,
) -> str:
    blocks = [render_repo_text(r, fixing=fixing, show_diff=show_diff, pins=pins) for r in results]
    return "\n\n".join([*blocks, report.summary(fixing=fixing, dry_run=dry_run)])


RENDERER_BY_NAME: dict[str, Callable[..., str]] = {"text": render_text, "json": render_json}
