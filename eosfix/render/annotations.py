"""Findings for CI: GitHub workflow annotations (``--format github``) and SARIF 2.1.0 for code
scanning (``--format sarif``).

Both format what the check found, where the CLI located it: each finding's file relative to
the current folder (the repository root in CI) and, for a JSON file, the line of the key it
is about (``Location``, computed before rendering). A path that was not checked is an error
annotation (GitHub) or a tool execution notification (SARIF), never left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from eosfix import __version__
from eosfix.core.codes import CODES, Finding, Severity
from eosfix.result import RepoResult

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


class Location(NamedTuple):
    """Where a finding is: a file as CI names it (relative to the current folder, else
    absolute), the line of the key it is about when known, and for a GGUF the metadata key
    (the file is binary: no line); ``note`` what the message adds (a finding about a file
    that does not exist yet points at another and says where ``fix`` creates it)."""

    file: str
    line: int | None = None
    key: str | None = None
    note: str = ""


# Per result (in order): (finding code, finding file) -> where; ("", "") is the unit itself.
Locations = Sequence[Mapping[tuple[str, str], Location]]


def _message(f: Finding, where: Location) -> str:
    text = f"{where.key}: {f.message}" if where.key else f.message
    return f"{text} ({where.note})" if where.note else text


# --- GitHub workflow commands --------------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(level: str, where: Location | None, title: str, message: str) -> str:
    props = []
    if where is not None:
        props.append(f"file={_escape_property(where.file)}")
        if where.line is not None:
            props.append(f"line={where.line}")
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def render_github(
    results: Sequence[RepoResult], report: Any, *, locations: Locations, **_: Any
) -> str:
    """One ``::error``/``::warning`` line per finding (and per path not checked), as GitHub
    Actions reads them from a step's output; nothing for a repo without findings."""
    lines = []
    for r, where in zip(results, locations, strict=True):
        if r.error is not None:
            lines.append(
                _annotation(
                    "error", where.get(("", "")), "eosfix", f"not checked: {r.error.message}"
                )
            )
            continue
        for f in r.check.findings if r.check is not None else ():
            level = "error" if f.severity is Severity.ERROR else "warning"
            at = where.get((f.code, f.file))
            lines.append(
                _annotation(level, at, f"eosfix {f.code}", _message(f, at or Location("")))
            )
    return "\n".join(lines)


# --- SARIF 2.1.0 ---------------------------------------------------------------------------


def _level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


def _physical(where: Location) -> dict[str, Any]:
    path = Path(where.file)
    artifact: dict[str, Any] = (
        {"uri": path.as_uri()}
        if path.is_absolute()  # a URI reference: a space or "#" percent-encoded, as as_uri does
        else {"uri": quote(path.as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}
    )
    out: dict[str, Any] = {"artifactLocation": artifact}
    if where.line is not None:
        out["region"] = {"startLine": where.line}
    return {"physicalLocation": out}


def _rules() -> list[dict[str, Any]]:
    """Every code of the registry (``eosfix.core.codes``), so a result's ruleIndex is stable."""
    return [
        {
            "id": c.code,
            "shortDescription": {"text": c.title},
            "defaultConfiguration": {"level": _level(c.severity)},
            "properties": {"fixable": c.fixable},
        }
        for c in CODES.values()
    ]


def sarif_log(
    results: Sequence[RepoResult], exit_code: int, locations: Locations
) -> dict[str, Any]:
    """The SARIF log object: one run, every registry code as a rule, one result per finding,
    each path not checked as a tool execution notification."""
    index = {code: i for i, code in enumerate(CODES)}
    out: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for r, where in zip(results, locations, strict=True):
        if r.error is not None:
            note: dict[str, Any] = {
                "level": "error",
                "message": {"text": f"not checked: {r.error.message}"},
            }
            unit = where.get(("", ""))
            if unit is not None:
                note["locations"] = [_physical(unit)]
            notes.append(note)
            continue
        for f in r.check.findings if r.check is not None else ():
            at = where.get((f.code, f.file)) or where[("", "")]
            result: dict[str, Any] = {
                "ruleId": f.code,
                "level": _level(f.severity),
                "message": {"text": _message(f, at)},
                "locations": [_physical(at)],
                "properties": {"fixable": f.fixable},
            }
            if f.code in index:
                result["ruleIndex"] = index[f.code]
            out.append(result)
    invocation = {
        "executionSuccessful": not notes,
        "exitCode": exit_code,
        "toolExecutionNotifications": notes,
    }
    driver = {"name": "eosfix", "version": __version__, "rules": _rules()}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "invocations": [invocation], "results": out}],
    }


def render_sarif(
    results: Sequence[RepoResult], report: Any, *, locations: Locations, **_: Any
) -> str:
    return json.dumps(sarif_log(results, report.exit_code, locations), indent=2, ensure_ascii=False)
