"""Render results as text, JSON, GitHub annotations or SARIF, and count them (``Report``).

The exit code is ``eosfix.core.outcome``'s one rule for every command (README "Exit codes").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eosfix.analysis.terminators import TemplateAnalysis
from eosfix.core.errors import NotChecked, VerificationError, WriteError
from eosfix.core.outcome import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    QUIET,
    VERDICTS,
    exit_code,
    verdict_of,
)
from eosfix.render.annotations import render_github, render_sarif
from eosfix.render.rows import (
    FindingRow,
    RepoRows,
    RuntimeLine,
    TerminatorRow,
    fix_command,
    repo_rows,
    verdict_name,
)
from eosfix.render.runtimes import runtimes_line
from eosfix.render.text import render_repo_text
from eosfix.render.words import KIND_TEXT, placement_text, stop_source_text
from eosfix.result import OllamaHub, RemoteGguf, RepoResult

__all__ = [
    "EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "KIND_TEXT", "RENDERER_BY_NAME",
    "VERDICTS", "Report", "fix_command", "placement_text", "render_repo_text", "render_text",
    "result_to_dict", "runtimes_line", "stop_source_text", "summary_parts", "verdict_of",
]  # fmt: skip


verdict = verdict_name


_PHRASES: dict[str, tuple[str, str]] = {  # verdict -> (singular, plural)
    "fixed": ("fixed", "fixed"),
    "problems": ("with problems eosfix cannot fix", "with problems eosfix cannot fix"),
    "warned": ("with warnings only", "with warnings only"),
    "no_template": ("without a chat template", "without a chat template"),
    "not_a_model": ("with no model (tokenizer files only)", "with no model (tokenizer files only)"),
    "error": ("could not be checked", "could not be checked"),
}


def summary_parts(
    counts: dict[str, int],
    *,
    fixable: str,
    ok: tuple[str, str] = ("stops correctly", "stop correctly"),
    error: str = "could not be checked",
) -> list[tuple[int, str]]:
    """(count, what) for each verdict that occurred, in VERDICTS order; ``what`` agrees with
    the count ("1 stops correctly", "2 stop correctly")."""
    phrases = {**_PHRASES, "fixable": (fixable, fixable), "ok": ok, "error": (error, error)}
    return [(counts[v], phrases[v][counts[v] != 1]) for v in VERDICTS if counts.get(v)]


def _noun(r: RepoResult) -> str:
    return r.noun


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _in_groups(files: int, groups: int) -> str:
    """`` in 2 groups`` when results stand for more files than there are results."""
    return f" in {_counted(groups, 'group')}" if files > groups else ""


@dataclass
class Report:
    """Counts what happened to each repo; decides the exit code, like black's Report.

    ``strict``: warnings fail (exit 1) too.
    """

    results: list[RepoResult] = field(default_factory=list)
    strict: bool = False

    def record(self, result: RepoResult) -> None:
        self.results.append(result)

    @property
    def exit_code(self) -> int:
        counts = Counter(verdict(r) for r in self.results)
        failed = any(r.error is not None for r in self.results)
        return exit_code(counts, strict=self.strict, failed=failed)

    def summary(self, *, fixing: bool, dry_run: bool, caveats: int = 0) -> str:
        """One line: how many repos (GGUF files) came to what, then the paths not checked;
        ``caveats``: how many healthy repos printed runtime caveats. A GGUF repo on the Hub
        is checked by groups of alike files: its files are counted, and the groups named
        (``5 GGUF files in 1 group stop correctly``)."""
        checked = [r for r in self.results if not isinstance(r.error, NotChecked)]
        counts: Counter[tuple[str, str]] = Counter()
        groups: Counter[tuple[str, str]] = Counter()
        for r in checked:
            key = (_summary_verdict(r), _noun(r))
            counts[key] += len(r.gguf.files) if r.gguf is not None else 1
            groups[key] += 1
        phrases = _summary_phrases(already=fixing and not dry_run)
        parts = [
            f"{_counted(n, noun)}{_in_groups(n, groups[v, noun])} {phrases[v][n != 1]}"
            + (" (runtime caveats above)" if v == "ok" and caveats else "")
            for (v, noun), n in sorted(counts.items(), key=lambda kv: _ORDER.index(kv[0][0]))
        ]
        not_checked = len(self.results) - len(checked)
        if not_checked:
            parts.append(f"{_counted(not_checked, 'path')} not checked")
        text = ", ".join(parts)
        if checked:
            return text
        return f"nothing checked: {text}" if text else "nothing checked"


_ORDER = (*VERDICTS[:-1], "unfixed", "error")  # "unfixed": an error while writing


def _summary_verdict(r: RepoResult) -> str:
    """The verdict, with a write error told apart: the repo was read, not fixed."""
    v = verdict(r)
    return "unfixed" if v == "error" and isinstance(r.error, (WriteError, VerificationError)) else v


def _summary_phrases(*, already: bool) -> dict[str, tuple[str, str]]:
    ok = ("stops correctly", "stop correctly")
    return {
        **_PHRASES,
        "fixable": ("would be fixed",) * 2,
        "ok": ("already stops correctly", "already stop correctly") if already else ok,
        "unfixed": ("could not be fixed",) * 2,
    }


def terminator_to_dict(t: TerminatorRow) -> dict[str, Any]:
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


def _findings(findings: Sequence[FindingRow]) -> list[dict[str, Any]]:
    return [
        {"code": f.code, "severity": f.severity.value, "file": f.file, "message": f.message,
         "fixable": f.fixable}
        for f in findings
    ]  # fmt: skip


def runtime_rows_json(lines: Sequence[RuntimeLine]) -> list[dict[str, Any]]:
    """The ``"runtimes"`` key of ``--format json``: before and after the planned fix (after
    writing: as it is now), each with ``applicable`` (False: the runtime cannot load a folder
    without config.json)."""
    return [
        {"runtime": r.runtime, "version": r.pinned, "versions": r.versions,
         "executed": r.executed, "basis": r.basis, "source": r.source, "reads": r.reads,
         "stops_before": r.stops_before, "stops_after": r.stops_after,
         "stops_early_before": r.early_before, "stops_early_after": r.early_after,
         "ok_before": r.ok_before, "ok_after": r.ok_after, "note": r.note,
         "applicable": line.applicable}
        for line in lines
        for r in (line.row,)
    ]  # fmt: skip


def template_to_dict(ta: TemplateAnalysis) -> dict[str, Any]:
    """One template's entry; ``branch_variables``, ``quoted`` and ``history_differs`` only
    where the template has them."""
    out: dict[str, Any] = {
        "name": ta.name,
        "file": ta.file,
        "probes": len(ta.probes),
        "probes_rendered": len(ta.rendered),
        "refusals": [f"{p.spec.name}: {p.refusal}" for p in ta.refusals],
        "possible": [{"content": tok, "line": line} for tok, line in ta.unreached_literals],
        "positions": {tok: list(wheres) for tok, wheres in ta.positions},
        "placeholders": ta.placeholders,
    }
    if ta.branches:
        out["branch_variables"] = [
            {"name": name, "value": value, "line": line} for name, value, line in ta.branches
        ]
    if ta.quoted is not None:
        out["quoted"] = ta.quoted
    if ta.disagreements:
        out["history_differs"] = [
            {
                "probe": d.final.spec.name,
                "history_probe": d.history.spec.name,
                "last": list(d.final_tokens),
                "history": list(d.history_tokens),
            }
            for d in ta.disagreements
        ]
    return out


def result_to_dict(r: RepoResult, rows: RepoRows | None = None) -> dict[str, Any]:
    """The JSON shape of one repo or GGUF file (stable keys, documented in the README), from
    its rows (``eosfix.render.rows``, made here unless given). After ``fix`` wrote files, the
    keys describe the repo as written and ``before`` what it was."""
    rows = repo_rows(r) if rows is None else rows
    v = rows.verdict
    out: dict[str, Any] = {"path": str(r.path), "name": r.name, "container": r.container}
    if rows.error is not None:
        out.update(
            status="error", verdict="error", problem=None, runs_on=[], stops_early=[],
            error=rows.error, written=list(r.written),
        )  # fmt: skip
        out.update(origin_fields(r))  # a Hub repo's repo_id, revision and sha...
        return out
    c = r.check
    assert c is not None
    texts = rows.stop_strings
    out.update(
        status=v.status,
        verdict=v.verdict,
        problem=v.problem,
        runs_on=list(v.runs_on),
        stops_early=list(v.stops_early),
        templates=[template_to_dict(ta) for ta in c.terminators.templates],
        terminators=[terminator_to_dict(t) for t in rows.terminators],
        additional_stops=[terminator_to_dict(t) for t in rows.additional],
        acceptable=list(c.terminators.acceptable),
        unwritten_eog_tokens=[{"content": t, "id": i} for t, i in c.unwritten_eog_tokens],
        in_turn=list(rows.in_turn),
        in_call=list(c.terminators.in_call),
        stop_strings=list(c.stop_strings),
        stop_instead={"texts": list(texts), **c.instead} if texts and c.instead else None,
        tokenizer_eos=None
        if c.tokenizer_eos is None
        else {"content": c.tokenizer_eos.content, "id": c.tokenizer_eos.id},
        eos_token_id=rows.eos_now,
        eos_token_id_source=rows.eos_source,
        stop_keys=c.stop.detail or None,
        stop_ids=[
            {"id": s.id, "kind": s.kind, "token": s.token, "text": s.text, "reason": s.reason}
            for s in rows.stop_ids
            if s.listed
        ],
        proposed_eos_token_id=None if rows.proposed is None else list(rows.proposed),
        findings=_findings(rows.findings),
        changes=[dict(p.data) for p in rows.changes],
        written=list(rows.written),
        runtimes=runtime_rows_json(rows.runtimes),
    )
    if rows.blocked is not None:
        out["blocked"] = rows.blocked
    if rows.before is not None:
        b = rows.before
        out["before"] = {
            "status": b.status,
            "eos_token_id": b.eos_now,
            "eos_token_id_source": b.eos_source,
            "findings": _findings(b.findings),
        }
    out.update(origin_fields(r))
    return out


def origin_fields(r: RepoResult) -> dict[str, Any]:
    """The JSON keys of a result's origin, last in its entry: a Hub repo's ``repo_id``,
    ``revision``, ``sha``; a GGUF on the Hub's ``file``, ``quant``, ``alike``, ``files``,
    ``differs_from``/``differs_in`` (a group that differs), ``default_for`` and ``ollama``;
    what ``fix`` wrote of a GGUF (``write``) and a write's ``notes``."""
    out: dict[str, Any] = {}
    if r.hub is not None:
        out.update(repo_id=r.hub.repo_id, revision=r.hub.revision, sha=r.hub.sha)
    group = r.gguf
    if group is not None:
        out["file"] = group.file
        if group.read:
            out.update(quant=group.quant, alike=list(group.alike))
        out["files"] = [_remote_gguf(f) for f in group.files]
        if group.differs_from is not None:
            out.update(differs_from=group.differs_from, differs_in=list(group.differs_in))
        if group.read:
            out["default_for"] = list(group.default_for)
    if r.ollama_hub is not None:
        out["ollama"] = _ollama_hub(r.ollama_hub)
    if r.ollama is not None:  # a model of ollama's store: its eosfix ollama entry
        from eosfix.render.ollama import model_dict

        out["ollama_model"] = model_dict(r)
    if r.write is not None:
        w = r.write
        out["write"] = {
            "path": str(w.path), "paths": [str(p) for p in w.paths], "mode": w.mode,
            "bytes": w.bytes_written, "data_sha256": w.data_sha256,
        }  # fmt: skip
    if r.notes:
        out["notes"] = list(r.notes)
    return out


def _remote_gguf(f: RemoteGguf) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": f.path, "quant": f.quant, "size": f.size, "requests": f.requests,
        "bytes_read": f.bytes_read, "metadata_bytes": f.metadata_bytes,
    }  # fmt: skip
    if len(f.shards) > 1:
        out["shards"] = list(f.shards)
    if f.error is not None:
        out["error"] = f.error
    return out


def _ollama_hub(o: OllamaHub) -> dict[str, Any]:
    """What ``ollama run hf.co/...`` gets, and the params a pull request would write."""
    params, plan = o.params, o.plan
    planned = None
    if plan is not None:
        planned = {
            "stop": list(plan.after), "removed": list(plan.removed), "added": list(plan.added),
            "control": list(o.control), "removed_control": list(o.removed_control),
            "file": o.file, "old": plan.old, "new": plan.new,
        }  # fmt: skip
    return {
        "params_from": params.source,
        "conversion": params.conversion.path if params.conversion is not None else None,
        "stop": list(params.stop),
        "params_problem": params.problem,
        "planned": planned,
    }


def render_json(results: list[RepoResult], report: Report, **_: Any) -> str:
    repos = [result_to_dict(r) for r in results]
    payload = {"repos": repos, "exit_code": report.exit_code}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def render_text(
    results: list[RepoResult],
    report: Report,
    *,
    fixing: bool = False,
    dry_run: bool = False,
    fix_flags: Sequence[str] = (),
    quiet: bool = False,
) -> str:
    """Each repo's block (``quiet``: only those with something to say), then the summary.
    Results with an error are left out: the CLI prints them on stderr."""
    blocks, caveats = [], 0
    for r in results:
        if r.error is not None or (quiet and verdict(r) in QUIET):
            continue
        block = render_repo_text(r, fixing=fixing, fix_flags=fix_flags)
        caveats += verdict(r) == "ok" and "\n  caveat " in block
        blocks.append(block)
    return "\n\n".join([*blocks, report.summary(fixing=fixing, dry_run=dry_run, caveats=caveats)])


RENDERER_BY_NAME: dict[str, Callable[..., str]] = {
    "text": render_text,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
}
LOCATED = frozenset(("github", "sarif"))  # renderers that take ``locations`` (file and line)
