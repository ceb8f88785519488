"""One repo (a folder or a GGUF file: the same block) as text, read in a glance: what ends a
turn, what the container's reader stops on, what changes.

After ``fix`` wrote files the block tells the story in order: what it stopped on, what was
fixed, what was written, what it stops on now (``RepoResult.before`` and ``check``). Runtime
verdicts come last: one line while a fix is pending, caveats once none is
(``eosfix.render.runtimes``). Everything shown is computed before: this module formats.
"""

from __future__ import annotations

import itertools
import json
import shlex
from collections.abc import Callable, Iterable, Sequence

import click

from eosfix.analysis.positions import (
    CONVERSATION_END,
    EARLIER_REPLIES,
    EMPTY_TEMPLATE,
    EVERY_REPLY,
    FINAL_REPLY,
    HISTORY_REPLY,
    LAST_REPLY,
    NEXT_TURN,
    PLAIN_TEXT,
    TOOL_CALL,
    VERDICT,
)
from eosfix.analysis.terminators import Placement, Terminator
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck, Status
from eosfix.render.finding import finding_line
from eosfix.render.gguf_hub import (
    header_lines,
    is_hub_gguf,
    ollama_lines,
    override_kv,
    title_suffix,
)
from eosfix.render.runtimes import runtimes_line, settled_lines
from eosfix.result import Change, RepoResult

NO_TEMPLATE_TEXT = (
    "no chat template: nothing to check (fine for a base model; a chat model without one has "
    "lost its template)"
)
NOT_A_MODEL_TEXT = (
    "not a model repo: no config.json, generation_config.json or weights, so no runtime loads "
    "a model from it (tokenizer files only); nothing to fix"
)

# What each kind of terminator is, in a few words (the PR description uses it too).
KIND_TEXT = {
    "turn_end": "closes a reply",
    "tool_call": "written after a tool call",
    "next_turn_opener": "opens the next turn (replies have no closing token)",
    "stop_string": "plain text: needs a stop string",
    "conversation_end": "written only when the whole conversation ends (an optional stop)",
}


def _where_text(p: Placement, token: Callable[[str], str] = str) -> str:
    """Where the template writes a token, as a clause (``eosfix.analysis.positions.WHERE``);
    ``token`` shows each token it names (a Markdown code span in a PR)."""
    rel = ", ".join(token(r) for r in p.related)
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
    VERDICT: (
        "written where the prompt's turn ends, before the reply: the verdict's turn ends the "
        "same way (the template quotes the conversation as text, it renders no reply)"
    ),
    EMPTY_TEMPLATE: "the tokenizer's eos: the template writes nothing, so nothing else ends a reply",
}


def placement_text(t: Terminator, token: Callable[[str], str] = str) -> str:
    """Where the template writes ``t``: every placement, first evidence first (``token``: as
    in ``_where_text``)."""
    clauses = list(dict.fromkeys(_where_text(p, token) for p in t.placements))
    if not clauses:
        return KIND_TEXT.get(t.kind, t.kind)
    text = clauses[0]
    for clause in clauses[1:]:  # "written after every reply and after a tool call"
        same_verb = clause.startswith("written ") and text.startswith("written ")
        text += f" and {clause.removeprefix('written ')}" if same_verb else f"; {clause}"
    return text


def stop_source_text(c: RepoCheck) -> str:
    """Where the current stop ids come from, as a phrase."""
    if c.stop.detail:  # the reader builds its set from the container's keys (a GGUF)
        return c.stop.detail
    if c.stop.source == GENERATION_CONFIG and c.stop.raw is None:
        return "generation_config.json sets no eos_token_id"  # not "(not set) (from ...)"
    if c.stop.source != "none":
        return f"from {c.stop.source}"
    if c.repo.config is None:
        return "generation_config.json and config.json are missing"
    return "generation_config.json is missing; config.json sets no eos_token_id"


def ids_text(ids: Iterable[int] | int | None) -> str:
    """``7``, ``[7, 9]``; a value that is not ids (EOS018) as the file writes it."""
    if ids is None:
        return "(not set)"
    if type(ids) is int:
        return str(ids)
    if isinstance(ids, (list, tuple)) and all(type(i) is int for i in ids):
        return "[" + ", ".join(str(i) for i in ids) + "]"
    return json.dumps(ids, ensure_ascii=False)


def fix_command(r: RepoResult, flags: Sequence[str] = ()) -> str:
    """The command that writes the planned fix, shell-quoted, with the flags that were given;
    for a Hugging Face cache snapshot, ``eosfix cache --fix`` (it replaces links safely); for
    a Hub repo checked by id, ``eosfix hub ID --pr`` (with its --keep-id flags)."""
    if r.hub is not None:  # a Hub repo checked by id: a pull request
        pairs = itertools.pairwise(flags)
        keep = [word for flag, value in pairs if flag == "--keep-id" for word in (flag, value)]
        return shlex.join(["eosfix", "hub", r.hub.repo_id, "--pr", *keep])
    folder = r.container == "folder"  # a folder's options; a single file (GGUF) takes none
    if r.cache is not None and folder:
        note = "; it writes generation_config.json only" if "--config-json" in flags else ""
        return r.cache.fix_command + note
    return shlex.join(["eosfix", "fix", str(r.path), *(flags if folder else ())])


def changes_text(patches: Sequence[Change]) -> str:
    """What the patches set (generation_config.json's list first), and how they are written."""
    ordered = sorted(patches, key=lambda p: p.file != GENERATION_CONFIG)
    text = "; ".join(p.summary for p in ordered)
    how = "; ".join(dict.fromkeys(p.how for p in patches if p.how))
    return f"{text}  ({how})" if how else text


def _terminator_line(t: Terminator, note: str = "") -> str:
    templates = ", ".join(t.templates)
    return f"{t.content}  {t.id_str}, {placement_text(t)}{note} (template {templates})"


def _terminator_lines(c: RepoCheck) -> list[str]:
    lines = [f"  ends a turn   {_terminator_line(t)}" for t in c.terminators.terminators]
    if not c.terminators.terminators:
        lines.append("  ends a turn   (nothing found)")
    for t in c.terminators.additional:
        lines.append(f"  ends the chat {_terminator_line(t, '; an optional stop')}")
    if c.terminators.in_turn:
        lines.append(f"  inside a turn {' '.join(c.terminators.in_turn)}  (never a stop id)")
    return lines


def _after_lines(c: RepoCheck) -> list[str]:
    """When the reader builds its set from keys (a GGUF), the set once the plan is written."""
    if not c.stop.detail or c.proposed is None:
        return []
    return [f"  after fix     stops on {ids_text(c.proposed)}"]


def _pending_lines(r: RepoResult, c: RepoCheck, run: str | None) -> list[str]:
    """Nothing written: what it stops on, the findings, the fix (and how to run it)."""
    lines = [f"  stops on      {ids_text(c.stop.raw)}  ({stop_source_text(c)})"]
    lines += _unchecked_lines(c)
    lines += ["  " + finding_line(r.name, f) for f in c.findings]
    lines += keep_lines(c)
    if r.patches and is_hub_gguf(r):  # a file on the Hub: what a new file's header needs
        lines.append(f"  fix           {'; '.join(p.summary for p in r.patches)}  (its header)")
        lines += _after_lines(c)
    elif r.patches:
        hint = f"  (run: {run})" if run and r.blocked is None else ""
        lines.append(f"  fix           {changes_text(r.patches)}{hint}")
        lines += _after_lines(c)
        if r.blocked is not None:  # what stops the writer, and what to do first
            # a blocker that names the command that writes elsewhere has said it all
            instead = getattr(r.blocked, "instead", None)
            then = f"; then run: {run}" if run and instead is None else ""
            lines.append(f"  cannot write  {r.blocked}{then}")
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


def _written_lines(r: RepoResult, before: RepoCheck, now: RepoCheck) -> list[str]:
    """Files written: what it stopped on, what was fixed and written, what it stops on now."""
    remaining = {(f.code, f.file) for f in now.findings}
    lines = [
        f"  stopped on    {ids_text(before.stop.raw)}  ({stop_source_text(before)}, before the fix)"
    ]
    lines += [
        f"  fixed         {finding_line(r.name, f)}"
        for f in before.findings
        if (f.code, f.file) not in remaining
    ]
    into = f" into {shlex.quote(str(r.output))}" if r.output is not None else ""
    kept = f"; {r.name} is unchanged" if r.output is not None else ""
    lines.append(f"  wrote         {changes_text(r.patches)}{into}{kept}")
    new = "the new file " if r.output is not None else ""
    lines.append(f"  stops on      {new}{ids_text(now.stop.raw)}  ({stop_source_text(now)})")
    lines += _unchecked_lines(now)
    return [*lines, *("  " + finding_line(r.name, f) for f in now.findings), *keep_lines(now)]


def keep_lines(c: RepoCheck) -> list[str]:
    """``--keep-id`` ids that no stop key of the repo lists: they keep nothing, say so."""
    absent = [i for i in c.keep_ids if c.review.by_id(i) is None]
    return [
        f"  keep          --keep-id {i}: {i} is not a stop id of this repo, so it keeps nothing"
        for i in absent
    ]


def _unchecked_lines(c: RepoCheck) -> list[str]:
    """Stop ids whose token eosfix cannot see (no tokenizer.json): said, never a finding."""
    return [
        f"  unchecked     stop id {s.id}: {s.reason}: whether it cuts a reply is unknown"
        for s in c.review.unchecked
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
    hub = is_hub_gguf(r)
    title = click.style(r.name, bold=True) + (title_suffix(r) if hub else "")
    lines = [title, *_terminator_lines(c)]
    if r.written and r.before is not None:
        lines += _written_lines(r, r.before, c)
    else:
        lines += _pending_lines(r, c, None if fixing else fix_command(r, fix_flags))
    if hub:
        lines += header_lines(r) + ollama_lines(r)
    if r.output is not None and not r.written:  # fix --output with nothing to change
        lines.append(
            f"  copied        nothing to fix: copied unchanged to {shlex.quote(str(r.output))}"
        )
    lines += instead_lines(c)
    lines += runtime_lines(r)
    return "\n".join(lines)
