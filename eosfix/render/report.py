"""Render results as text or JSON, and own the exit code (``Report``).

The exit code is one rule for every command (README "Exit codes"): 2 when a path was not
checked or could not be read (and when nothing was checked at all); 1 when files were changed,
a fix is pending or a problem cannot be fixed, and, with ``strict``, when a repo has warnings;
else 0. Warnings alone (a stop string needed, an id that cannot be checked) exit 0.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eosfix.analysis.terminators import Terminator
from eosfix.core.errors import VerificationError, WriteError
from eosfix.decide.check import Finding, RepoCheck, Status
from eosfix.decide.verdicts import runtime_rows_json, runtime_table
from eosfix.pipeline import RepoResult
from eosfix.render.runtimes import not_applicable, runtimes_line
from eosfix.render.text import (
    KIND_TEXT,
    fix_command,
    placement_text,
    render_repo_text,
    stop_source_text,
)
from eosfix.runtimes import Pins
from eosfix.sources.target import NotChecked, is_gguf

__all__ = [
    "EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "KIND_TEXT", "RENDERER_BY_NAME",
    "VERDICTS", "Report", "fix_command", "placement_text", "render_repo_text", "render_text",
    "result_to_dict", "runtimes_line", "stop_source_text", "summary_parts", "verdict_of",
]  # fmt: skip

EXIT_OK = 0  # nothing to fix / nothing changed
EXIT_FINDINGS = 1  # findings (check) or files changed (fix); warnings too with --strict
EXIT_INPUT = 2  # usage error, a path not checked, or an input that cannot be read
EXIT_INTERNAL = 3  # a bug: rerun with EOSFIX_DEBUG=1 for the traceback

# What one repo (or cache snapshot) comes to, in the order summaries list them.
VERDICTS = ("fixed", "fixable", "problems", "warned", "ok", "no_template", "error")


def verdict_of(status: str, *, written: bool, has_findings: bool, has_patches: bool = False) -> str:
    """One of VERDICTS: ``error`` (not checked), ``fixed`` (files written), ``fixable`` (a fix
    is planned, e.g. config.json's with --config-json), ``warned`` (stops on every id but has
    warnings), else the check status."""
    if status == "error":
        return "error"
    if written:
        return "fixed"
    if has_patches and status == Status.OK.value:
        return "fixable"
    if status == Status.OK.value and has_findings:
        return "warned"
    return status


def verdict(r: RepoResult) -> str:
    c = r.check
    return verdict_of(
        r.status.value,
        written=bool(r.written),
        has_findings=c is not None and bool(c.findings),
        has_patches=bool(r.patches),
    )


_PHRASES: dict[str, tuple[str, str]] = {  # verdict -> (singular, plural)
    "fixed": ("fixed", "fixed"),
    "problems": ("with problems eosfix cannot fix", "with problems eosfix cannot fix"),
    "warned": ("with warnings only", "with warnings only"),
    "no_template": ("without a chat template", "without a chat template"),
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
    return "GGUF file" if is_gguf(r.path) else "repo"


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


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
        if not self.results or any(r.error is not None for r in self.results):
            return EXIT_INPUT
        fail = {"fixed", "fixable", "problems", *(("warned",) if self.strict else ())}
        return EXIT_FINDINGS if any(verdict(r) in fail for r in self.results) else EXIT_OK

    def summary(self, *, fixing: bool, dry_run: bool, caveats: int = 0) -> str:
        """One line: how many repos (GGUF files) came to what, then the paths not checked;
        ``caveats``: how many healthy repos printed runtime caveats."""
        checked = [r for r in self.results if not isinstance(r.error, NotChecked)]
        counts = Counter((_summary_verdict(r), _noun(r)) for r in checked)
        phrases = _summary_phrases(already=fixing and not dry_run)
        parts = [
            f"{_counted(n, noun)} {phrases[v][n != 1]}"
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


def _findings(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [
        {"code": f.code, "severity": f.severity.value, "file": f.file, "message": f.message,
         "fixable": f.fixable}
        for f in findings
    ]  # fmt: skip


def _runtimes_json(r: RepoResult, c: RepoCheck, pins: Pins | None) -> list[dict[str, Any]]:
    """The ``runtimes`` rows: before and after the planned fix (after writing: as it is now),
    each with ``applicable`` (False: the runtime cannot load a folder without config.json)."""
    patches = () if r.written else r.patches
    na = not_applicable(c, patches, pins)
    rows = runtime_rows_json(runtime_table(c, patches, pins))
    return [{**row, "applicable": row["runtime"] not in na} for row in rows]


def result_to_dict(r: RepoResult, pins: Pins | None = None) -> dict[str, Any]:
    """The JSON shape of one repo (stable keys, documented in the README); ``pins`` picks the
    rule of a runtime version for the ``runtimes`` verdicts. After ``fix`` wrote files, the keys
    describe the repo as written and ``before`` what it was."""
    out: dict[str, Any] = {"path": str(r.path), "name": r.name}
    if r.error is not None:
        out.update(status="error", error=str(r.error), written=list(r.written))
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
                "probes": len(ta.probes),
                "probes_rendered": len(ta.rendered),
                "refusals": [f"{p.spec.name}: {p.refusal}" for p in ta.refusals],
                "possible": [{"content": tok, "line": line} for tok, line in ta.unreached_literals],
                "positions": {tok: list(wheres) for tok, wheres in ta.positions},
                "placeholders": ta.placeholders,
            }
            for ta in c.terminators.templates
        ],
        terminators=[terminator_to_dict(t) for t in c.terminators.terminators],
        additional_stops=[terminator_to_dict(t) for t in c.terminators.additional],
        acceptable=list(c.terminators.acceptable),
        unwritten_eog_tokens=[{"content": t, "id": i} for t, i in c.unwritten_eog_tokens],
        in_turn=list(c.terminators.in_turn),
        in_call=list(c.terminators.in_call),
        stop_strings=list(c.stop_strings),
        tokenizer_eos=None
        if c.tokenizer_eos is None
        else {"content": c.tokenizer_eos.content, "id": c.tokenizer_eos.id},
        eos_token_id=c.stop.raw,
        eos_token_id_source=c.stop.source,
        stop_ids=[
            {"id": s.id, "kind": s.kind, "token": s.token, "text": s.text, "reason": s.reason}
            for s in (c.review.stop_ids if c.review is not None else ())
        ],
        proposed_eos_token_id=None if c.proposed is None else list(c.proposed),
        findings=_findings(c.findings),
        changes=[{"file": p.file, "created": p.created, "diff": p.diff()} for p in r.patches],
        written=list(r.written),
        runtimes=_runtimes_json(r, c, pins) if c.repo.templates and not gguf else [],
    )
    if r.before is not None:
        b = r.before
        out["before"] = {
            "status": b.status.value,
            "eos_token_id": None if gguf else b.stop.raw,
            "eos_token_id_source": None if gguf else b.stop.source,
            "findings": _findings(b.findings),
        }
    out.update(r.extra)
    if gguf:
        from eosfix.render.gguf import gguf_result_dict

        return gguf_result_dict(r, out)
    return out


def render_json(
    results: list[RepoResult], report: Report, *, pins: Pins | None = None, **_: Any
) -> str:
    repos = [result_to_dict(r, pins) for r in results]
    payload = {"repos": repos, "exit_code": report.exit_code}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def render_text(
    results: list[RepoResult],
    report: Report,
    *,
    fixing: bool = False,
    show_diff: bool = False,
    dry_run: bool = False,
    pins: Pins | None = None,
    fix_flags: Sequence[str] = (),
    quiet: bool = False,
) -> str:
    """Each repo's block (``quiet``: only those with something to say), then the summary.
    Results with an error are left out: the CLI prints them on stderr."""
    blocks, caveats = [], 0
    for r in results:
        if r.error is not None or (quiet and verdict(r) in ("ok", "no_template")):
            continue
        block = render_repo_text(
            r, fixing=fixing, show_diff=show_diff, pins=pins, fix_flags=fix_flags
        )
        caveats += verdict(r) == "ok" and "\n  caveat " in block
        blocks.append(block)
    return "\n\n".join([*blocks, report.summary(fixing=fixing, dry_run=dry_run, caveats=caveats)])


RENDERER_BY_NAME: dict[str, Callable[..., str]] = {"text": render_text, "json": render_json}
