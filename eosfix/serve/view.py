"""What the page shows of one check, as plain data for its templates (``eosfix.serve.page``).

Built from the check's JSON form (``eosfix.render.report.result_to_dict``, the schema of
``check --format json``) so the page says what the CLI says: what ends a turn and the template
text that proves it (special tokens marked), what the repo stops on now, each finding with
its code, the runtime grid (now / after fix), the diff ``fix`` writes, the ollama ``PARAMETER
stop`` lines and the command that does it locally. Every string here is untrusted text from
a repo: the templates escape it (Jinja2 autoescape); nothing here is markup.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from eosfix.core.codes import CODES
from eosfix.render.explain import verdict_cell
from eosfix.render.gguf_hub import header_lines, is_hub_gguf, ollama_lines, title_suffix
from eosfix.render.report import result_to_dict
from eosfix.result import RepoResult
from eosfix.runtimes.ollama.modelfile import stop_line


@dataclass(frozen=True)
class Piece:
    """A run of template text: ``special`` when it is a special token, ``newline`` after it
    when the text broke the line there."""

    text: str
    special: bool = False
    newline: bool = False


@dataclass(frozen=True)
class Cell:
    words: str
    ok: bool | None  # None: not applicable


@dataclass(frozen=True)
class RuntimeLine:
    runtime: str
    now: Cell
    after: Cell
    basis: str
    reads: str


@dataclass
class View:
    repo: str
    verdict: str
    status: str
    error: str | None = None
    terminators: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[list[list[Piece]]] = field(default_factory=list)
    stops_now: list[dict[str, Any]] = field(default_factory=list)
    eos_now: Any = None
    eos_source: str | None = None
    proposed: list[int] | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    runtimes: list[RuntimeLine] = field(default_factory=list)
    diffs: list[dict[str, Any]] = field(default_factory=list)
    ollama: list[str] = field(default_factory=list)
    command: str = ""
    pr: dict[str, Any] | None = None  # the open eosfix PR: url, num, words
    # a GGUF file read on the Hub: the files it stands for, what llama.cpp and ``ollama run
    # hf.co`` do with it (label, words), and why the page opens no pull request for it
    gguf: bool = False
    group: str = ""
    gguf_lines: list[tuple[str, str]] = field(default_factory=list)


def pieces(text: str, specials: Iterable[str]) -> list[list[Piece]]:
    """``text`` as lines of pieces, each special token of ``specials`` its own piece; a line
    break is kept as a visible ``\\n`` at the end of its line."""
    names = sorted({s for s in specials if s}, key=len, reverse=True)
    split = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None
    lines: list[list[Piece]] = []
    for raw in text.split("\n"):
        parts = split.split(raw) if split else [raw]
        lines.append([Piece(p, special=p in names) for p in parts if p])
    for line in lines[:-1]:
        line.append(Piece("\\n", newline=True))
    return [line for line in lines if line]


def _cell(stops: dict[str, Any], early: dict[str, Any], ok: bool, applicable: bool) -> Cell:
    if not applicable:
        return Cell("n/a (no config.json)", None)
    return Cell(verdict_cell(stops, early), ok)


def command_for(repo: str, hub: bool) -> str:
    """The one command that does the fix locally: a Hub repo's PR, or a folder's files."""
    if hub:
        return f"eosfix hub {shlex.quote(repo)} --pr"
    return "eosfix fix ."


# ``  label         words`` (a block line of ``eosfix.render.gguf_hub``) or ``      words``
_BLOCK_LINE = re.compile(r" {2}(\S.*?) {2,}(\S.*)| {3,}(\S.*)")


def _block_lines(lines: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        m = _BLOCK_LINE.fullmatch(line)
        if m is None:
            out.append(("", line.strip()))
        elif m.group(3) is not None:
            out.append(("", m.group(3)))
        else:
            out.append((m.group(1), m.group(2)))
    return out


def build(result: RepoResult, *, hub: bool = True) -> View:
    """The page's view of one check's result."""
    d = result_to_dict(result)
    origin, group = result.hub, result.gguf
    name = origin.repo_id if origin is not None else str(d.get("name") or result.name)
    gguf = is_hub_gguf(result)
    if origin is not None and group is not None:
        name = f"{origin.repo_id}/{group.file}"
    view = View(repo=name, verdict=str(d.get("verdict", "")), status=str(d.get("status", "")))
    if gguf:
        view.gguf = True
        view.group = title_suffix(result).strip().removeprefix("(").removesuffix(")")
    if result.error is not None:
        view.error = str(result.error)
        return view
    specials = {t["content"] for t in d.get("terminators", [])}
    specials |= {s.get("token") or "" for s in d.get("stop_ids", [])}
    tokenizer_eos = d.get("tokenizer_eos") or {}
    specials.add(tokenizer_eos.get("content") or "")
    for ta in d.get("templates", []):
        specials |= set(ta.get("positions", {}))
    view.terminators = list(d.get("terminators", []))
    view.evidence = [pieces(t.get("evidence") or "", specials) for t in view.terminators]
    view.stops_now = list(d.get("stop_ids", []))
    view.eos_now = d.get("eos_token_id")
    view.eos_source = d.get("eos_token_id_source")
    view.proposed = d.get("proposed_eos_token_id")
    view.findings = [
        {
            **f,
            "title": CODES[f["code"]].title if f["code"] in CODES else "",
            "anchor": f["code"].lower(),
        }
        for f in d.get("findings", [])
    ]
    for row in d.get("runtimes", []):
        applicable = bool(row.get("applicable", True))
        view.runtimes.append(
            RuntimeLine(
                runtime=row["runtime"],
                now=_cell(
                    row["stops_before"], row["stops_early_before"], row["ok_before"], applicable
                ),
                after=_cell(
                    row["stops_after"], row["stops_early_after"], row["ok_after"], applicable
                ),
                basis=str(row.get("basis") or ""),
                reads=str(row.get("reads") or ""),
            )
        )
    changes = d.get("changes", [])
    view.diffs = [
        {"file": c["file"], "lines": _diff_lines(c.get("diff") or "")}
        for c in changes
        if "file" in c
    ]
    view.ollama = [stop_line(t["content"]) for t in view.terminators if t.get("content")]
    view.ollama += [stop_line(s) for s in d.get("stop_strings", []) if isinstance(s, str)]
    view.command = command_for(name, hub)
    if origin is not None and group is not None:
        tag = group.quant or group.file.rpartition("/")[2]
        repo = origin.repo_id
        view.command = f"eosfix check {shlex.quote(f'hf.co/{repo}:{tag}')}"
        keys = [
            ("header key", f"{c['key']}: {_absent(c.get('old'))} → {c.get('new')}")
            for c in changes
            if "key" in c
        ]
        view.gguf_lines = keys + _block_lines([*header_lines(result), *ollama_lines(result)])
    return view


def _absent(value: Any) -> str:
    return "(absent)" if value is None else str(value)


def _diff_lines(diff: str) -> list[tuple[str, str]]:
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
