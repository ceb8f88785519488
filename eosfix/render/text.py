"""One repo (a folder or a GGUF file: the same block) as text, read in a glance: what ends a
turn, what the container's reader stops on, what changes.

After ``fix`` wrote files the block tells the story in order: what it stopped on, what was
fixed, what was written, what it stops on now (``RepoResult.before`` and ``check``). Runtime
verdicts come last: one line while a fix is pending, caveats once none is
(``eosfix.render.runtimes``). Everything shown is computed before: this module formats.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import click

from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck, Status
from eosfix.render.finding import finding_line
from eosfix.render.gguf_hub import header_lines, ollama_lines, title_suffix
from eosfix.render.hubrows import override_kv
from eosfix.render.rows import ChangeRow, RepoRows, TerminatorRow, fix_command, repo_rows
from eosfix.render.runtimes import runtimes_line, settled_lines
from eosfix.render.words import (
    KIND_TEXT,
    NO_TEMPLATE_TEXT,
    NOT_A_MODEL_TEXT,
    ids_text,
    placement_text,
    stop_source_text,
)
from eosfix.result import RepoResult

__all__ = [
    "KIND_TEXT", "NOT_A_MODEL_TEXT", "NO_TEMPLATE_TEXT", "changes_text", "fix_command",
    "ids_text", "instead_lines", "keep_lines", "placement_text", "render_repo_text",
    "runtime_lines", "stop_source_text",
]  # fmt: skip


def changes_text(patches: Sequence[ChangeRow]) -> str:
    """What the patches set (generation_config.json's list first), and how they are written."""
    ordered = sorted(patches, key=lambda p: p.file != GENERATION_CONFIG)
    text = "; ".join(p.summary for p in ordered)
    how = "; ".join(dict.fromkeys(p.how for p in patches if p.how))
    return f"{text}  ({how})" if how else text


def _terminator_line(t: TerminatorRow, note: str = "") -> str:
    templates = ", ".join(t.templates)
    return f"{t.content}  {t.id_str}, {t.placement}{note} (template {templates})"


def _terminator_lines(rows: RepoRows) -> list[str]:
    lines = [f"  ends a turn   {_terminator_line(t)}" for t in rows.terminators]
    if not rows.terminators:
        lines.append("  ends a turn   (nothing found)")
    for t in rows.additional:
        lines.append(f"  ends the chat {_terminator_line(t, '; an optional stop')}")
    if rows.in_turn:
        lines.append(f"  inside a turn {' '.join(rows.in_turn)}  (never a stop id)")
    return lines


def _after_lines(c: RepoCheck) -> list[str]:
    """When the reader builds its set from keys (a GGUF), the set once the plan is written."""
    if not c.stop.detail or c.proposed is None:
        return []
    return [f"  after fix     stops on {ids_text(c.proposed)}"]


def _findings(r: RepoResult, rows: RepoRows) -> list[str]:
    return ["  " + finding_line(r.name, f) for f in rows.findings]


def _pending_lines(r: RepoResult, rows: RepoRows, c: RepoCheck, run: str | None) -> list[str]:
    """Nothing written: what it stops on, the findings, the fix (and how to run it)."""
    lines = [f"  stops on      {ids_text(rows.eos_now)}  ({rows.stop_source})"]
    lines += _unchecked_lines(rows)
    lines += _findings(r, rows)
    lines += keep_lines(c)
    if rows.changes and rows.gguf is not None:  # a file on the Hub: what a new header needs
        lines.append(f"  fix           {'; '.join(p.summary for p in rows.changes)}  (its header)")
        lines += _after_lines(c)
    elif rows.changes:
        hint = f"  (run: {run})" if run and r.blocked is None else ""
        lines.append(f"  fix           {changes_text(rows.changes)}{hint}")
        lines += _after_lines(c)
        if r.blocked is not None:  # what stops the writer, and what to do first
            # a blocker that names the command that writes elsewhere has said it all
            instead = getattr(r.blocked, "instead", None)
            then = f"; then run: {run}" if run and instead is None else ""
            lines.append(f"  cannot write  {rows.blocked}{then}")
        if r.cache is not None and r.container == "gguf":
            lines += _shared_blob_lines(r)
    return lines


def _shared_blob_lines(r: RepoResult) -> list[str]:
    """A GGUF in the Hugging Face cache (its fix is a new file: the blocker names it): how
    llama.cpp stops where it should until then."""
    flags = override_kv(r)
    if not flags:
        return []
    return [f"  until then    llama-server -m {shlex.quote(str(r.path))} {' '.join(flags)}"]


def _written_lines(r: RepoResult, rows: RepoRows, now: RepoCheck) -> list[str]:
    """Files written: what it stopped on, what was fixed and written, what it stops on now."""
    before = rows.before
    assert before is not None
    remaining = {(f.code, f.file) for f in rows.findings}
    lines = [f"  stopped on    {ids_text(before.eos_now)}  ({before.stop_source}, before the fix)"]
    lines += [
        f"  fixed         {finding_line(r.name, f)}"
        for f in before.findings
        if (f.code, f.file) not in remaining
    ]
    into = f" into {shlex.quote(str(r.output))}" if r.output is not None else ""
    kept = f"; {r.name} is unchanged" if r.output is not None else ""
    lines.append(f"  wrote         {changes_text(rows.changes)}{into}{kept}")
    new = "the new file " if r.output is not None else ""
    lines.append(f"  stops on      {new}{ids_text(rows.eos_now)}  ({rows.stop_source})")
    lines += _unchecked_lines(rows)
    return [*lines, *_findings(r, rows), *keep_lines(now)]


def keep_lines(c: RepoCheck) -> list[str]:
    """``--keep-id`` ids that no stop key of the repo lists: they keep nothing, say so."""
    absent = [i for i in c.keep_ids if c.review.by_id(i) is None]
    return [
        f"  keep          --keep-id {i}: {i} is not a stop id of this repo, so it keeps nothing"
        for i in absent
    ]


def _unchecked_lines(rows: RepoRows) -> list[str]:
    """Stop ids whose token eosfix cannot see (no tokenizer.json): said, never a finding."""
    return [
        f"  unchecked     stop id {s.id}: {s.reason}: whether it cuts a reply is unknown"
        for s in rows.unchecked
    ]


def instead_lines(c: RepoCheck) -> list[str]:
    """Texts to stop on as strings, and how, per program (``RepoCheck.instead``)."""
    texts = c.stop_strings_needed
    if not texts or not c.instead:
        return []
    return [
        f"  instead       stop on {' '.join(repr(t) for t in texts)} as text:",
        *(
            f"                {prog}: {line}"
            for prog, text in c.instead.items()
            for line in text.splitlines()
        ),
    ]


def runtime_lines(r: RepoResult) -> list[str]:
    """The runtimes line while a fix is pending; once none is, the runtimes that stop and a
    caveat per runtime that does not."""
    c = r.check
    assert c is not None
    table = r.runtimes
    if table is None:
        return []
    if (r.patches and not r.written) or c.status is Status.PROBLEMS:
        return [f"  runtimes      {runtimes_line(table)}"]
    return ["  " + line for line in settled_lines(table, config_json_command(r))]


def config_json_command(r: RepoResult) -> str | None:
    """The command that also writes config.json, for the runtimes that read only it: a
    folder's own (a cache snapshot's links, a Hub repo or a GGUF have none)."""
    if r.hub is not None or r.container != "folder" or r.cache is not None:
        return None
    return shlex.join(["eosfix", "fix", str(r.path), "--config-json"])


def render_repo_text(
    r: RepoResult,
    *,
    fixing: bool = False,
    fix_flags: Sequence[str] = (),
) -> str:
    """One repo: what ends a turn, what the reader stops on, what changes, which runtimes
    stop.

    ``fixing``: shown by ``fix`` (no "run:" hint); ``fix_flags``: the options given, kept in
    the suggested command.
    """
    if r.error is not None:
        return f"{click.style('error', fg='red', bold=True)}: {r.error}"
    if r.ollama is not None:  # a model of ollama's store: what ollama makes of it
        from eosfix.render.ollama import model_lines

        return "\n".join(model_lines(r))
    c = r.check
    assert c is not None
    if c.status is Status.NO_TEMPLATE:
        return f"{r.name}: {NO_TEMPLATE_TEXT}"
    if c.status is Status.NOT_A_MODEL:
        return f"{r.name}: {NOT_A_MODEL_TEXT}"
    rows = repo_rows(r, tuple(fix_flags))
    gguf = rows.gguf
    title = click.style(r.name, bold=True) + (title_suffix(gguf) if gguf is not None else "")
    lines = [title, *_terminator_lines(rows)]
    if r.written and rows.before is not None:
        lines += _written_lines(r, rows, c)
    else:
        lines += _pending_lines(r, rows, c, None if fixing else rows.action.command)
    if gguf is not None:
        lines += header_lines(rows) + ollama_lines(rows.ollama_hub)
    if r.output is not None and not r.written:  # fix --output with nothing to change
        lines.append(
            f"  copied        nothing to fix: copied unchanged to {shlex.quote(str(r.output))}"
        )
    lines += instead_lines(c)
    lines += runtime_lines(r)
    return "\n".join(lines)
