"""``eosfix render``, ``goldens`` and ``diagnose``: the kit for porting a model by hand.

One module: the three commands load a repo through one ``open_repo``, read messages and
tools with the same helpers and share their options; split, each would import the others.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from eosfix.cli.term import color_option
from eosfix.core.errors import EosfixError
from eosfix.decide.check import RepoCheck
from eosfix.render.report import EXIT_FINDINGS, EXIT_OK

if TYPE_CHECKING:  # imported when a command runs, so `eosfix check` never loads them
    from eosfix.ports import Conversation, Diagnosis, LoopStops, RenderedPrompt


@contextlib.contextmanager
def open_repo(spec: str) -> Iterator[RepoCheck]:
    """The one place these commands load a repo: whatever ``eosfix check`` takes of one
    (``eosfix.targets.parse``): a folder (or a file inside one), a GGUF file, a Hub repo in
    any spelling (its small files, or a GGUF file's header: of a GGUF repo, the group that
    stands for it, ``Checked.main``).
    Its error is the one ``eosfix check`` prints."""
    from eosfix.targets.check import check_text

    result = check_text(spec).main
    if result.error is not None:
        raise result.error
    assert result.check is not None
    yield result.check


def _write_stdout(text: str) -> None:
    """``text`` as UTF-8 bytes on stdout, exactly (whatever the locale)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (an IDE console): no bytes to write to
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _label(where: str) -> str:
    return "stdin" if where == "-" else where


def _read_text(where: str) -> str:
    """A UTF-8 file, or stdin for ``-``; one-line errors naming it."""
    from eosfix.ports import PortInputError

    try:
        return sys.stdin.read() if where == "-" else Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise PortInputError(f"cannot read: {reason}", path=_label(where)) from None


def _read_json(where: str) -> Any:
    """A JSON file, or stdin for ``-``; one-line errors naming it."""
    from eosfix.ports import PortInputError

    text = _read_text(where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PortInputError(
            f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}", path=_label(where)
        ) from None


def _conversation(
    messages: str | None, tools: str | None, add_generation_prompt: bool, template: str | None
) -> Conversation:
    from eosfix.ports import Conversation
    from eosfix.ports.goldens import GOLDEN_CASES
    from eosfix.ports.render import parse_messages, parse_tools

    if messages is None:
        msgs = GOLDEN_CASES[0].messages
    else:
        msgs = parse_messages(_read_json(messages), _label(messages))
    tool_list = None if tools is None else parse_tools(_read_json(tools), _label(tools))
    return Conversation(msgs, tool_list, add_generation_prompt, template)


def _taken(spec: str) -> str:
    """``spec`` as the target grammar takes it, for the output to name it so: whitespace
    around it dropped (unless a path has it); as typed when it names nothing."""
    from eosfix.core.errors import NotChecked
    from eosfix.targets.parse import HubTarget, parse

    try:
        target = parse(spec)
    except NotChecked:
        return spec
    return str(target) if isinstance(target, HubTarget) else target.given


@contextlib.contextmanager
def _named(spec: str) -> Iterator[None]:
    """Errors about the repo's templates name the repo they are about."""
    try:
        yield
    except EosfixError as exc:
        if exc.path is not None:
            raise
        raise exc.but(path=spec) from None


def _visible(text: str, specials: list[tuple[str, int]]) -> list[str]:
    """The prompt with control tokens highlighted and each line break shown as ``\\n``."""
    out, last = [], 0
    for tok, pos in specials:
        out.append(text[last:pos])
        out.append(click.style(tok, fg="cyan", bold=True))
        last = pos + len(tok)
    out.append(text[last:])
    return ["  | " + line for line in "".join(out).replace("\n", "\\n\n").splitlines()]


def fix_command_for(spec: str) -> str:
    """The command that writes the fix of what ``spec`` names, as these commands open it: a
    Hub repo id's pull request, a cache snapshot's ``eosfix cache --fix``, else ``eosfix fix``."""
    from eosfix.containers.paths import cache_snapshot
    from eosfix.targets.parse import HubTarget, parse

    try:
        target = parse(spec)  # what the command opened (it was checked: this cannot fail)
    except EosfixError:
        target = None
    if isinstance(target, HubTarget):
        return shlex.join(["eosfix", "hub", target.repo_id, "--pr"])
    path = Path(spec)
    folder = path if path.is_dir() else path.parent
    snapshot = cache_snapshot(folder) if folder.is_dir() and not path.is_file() else None
    return snapshot.fix_command if snapshot is not None else shlex.join(["eosfix", "fix", spec])


def _stops_line(stops: LoopStops) -> str:
    named = ", ".join(stops.name(i) for i in stops.ids) or "none"
    line = f"stop ids: {list(stops.ids)} = {named}  (from {stops.source})"
    if stops.needs_fix:
        missing = ", ".join(stops.name(i) for i in stops.ids if i not in stops.current)
        extra = ", ".join(stops.name(i) for i in stops.current if i not in stops.ids)
        why = [f"without {missing}"] if missing else []
        why += [f"with {extra}, which eosfix fix removes"] if extra else []
        line += (
            f"\n  this repo needs `{stops.fix}`: today it stops on {list(stops.current)} "
            f"({stops.current_source}), {' and '.join(why)}"
        )
    if stops.strings:
        line += f"\n  also stop on the text {list(stops.strings)}: no single id ends these turns"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _render_text(spec: str, rp: RenderedPrompt, check: RepoCheck) -> str:
    from eosfix.ports.turns import scanner_for

    conv = rp.conversation
    lines = [
        f"{spec}: template {rp.template!r} ({rp.template_file}), "
        f"{_count(len(conv.messages), 'message')}, "
        f"add_generation_prompt={conv.add_generation_prompt}"
        + (f", {_count(len(conv.tools), 'tool')}" if conv.tools is not None else ""),
        *_visible(rp.text, scanner_for(check).find(rp.text)),
    ]
    if rp.ids is not None:
        lines.append(
            f"prompt ids ({len(rp.ids)}; tokenizer.json, add_special_tokens=False): {list(rp.ids)}"
        )
    else:
        lines.append(f"prompt ids: unavailable ({rp.ids_note})")
    lines.append(_stops_line(replace(rp.stops, fix=fix_command_for(spec))))
    if rp.uses_clock:
        lines.append("note: the template calls strftime_now: the text holds today's date")
    return "\n".join(lines)


_gp_option = click.option(
    "--add-generation-prompt/--no-add-generation-prompt",
    default=True,
    show_default=True,
    help="End the prompt with the assistant turn's opener (what a generation loop needs).",
)
_messages_option = click.option(
    "--messages",
    metavar="FILE.json",
    help='A JSON list of {"role", "content"} messages ("-": stdin). '
    "Default: one user turn asking for the capital of France.",
)
_tools_option = click.option(
    "--tools", metavar="FILE.json", help="A JSON list of tool schemas passed as `tools`."
)
_template_option = click.option(
    "--template",
    metavar="NAME",
    help="A named template (tool_use, rag...). Default: the one apply_chat_template picks.",
)


@click.command()
@click.argument("path")
@_messages_option
@_tools_option
@_gp_option
@_template_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "raw"]),
    default="text",
    show_default=True,
    help="text: control tokens and line breaks visible; json: everything, the prompt raw; "
    "raw: the prompt string alone, byte for byte (to diff with a port's).",
)
@color_option
def render(
    path: str,
    messages: str | None,
    tools: str | None,
    add_generation_prompt: bool,
    template: str | None,
    fmt: str,
) -> None:
    """Render a conversation exactly as apply_chat_template does, with its ids and stop ids.

    The prompt string is byte-identical to apply_chat_template(tokenize=False); its ids come
    from tokenizer.json with add_special_tokens=False, as apply_chat_template(tokenize=True).
    The stop ids are the ones a generation loop must compare: eosfix's proposed list when the
    repo needs a fix (it says so). PATH is a model folder or a Hub repo id (small files only).

    Exit 0; 2 when the input is bad or the template refuses the conversation.

    \b
    Example:
        eosfix render ./my-model --messages chat.json
        eosfix render ./my-model --format raw > expected_prompt.txt
    """
    from eosfix.ports import render_conversation
    from eosfix.ports.render import rendered_dict

    conv = _conversation(messages, tools, add_generation_prompt, template)
    path = _taken(path)
    with open_repo(path) as check, _named(path):
        rp = render_conversation(check, conv)
        if fmt == "raw":  # bytes as they are: click.echo would drop ANSI codes off a tty
            _write_stdout(rp.text)
        elif fmt == "json":
            click.echo(
                json.dumps({"path": path, **rendered_dict(rp)}, ensure_ascii=False, indent=2)
            )
        else:
            click.echo(_render_text(path, rp, check))
    sys.exit(EXIT_OK)


@click.command()
@click.argument("path")
@click.option(
    "-o",
    "--output",
    metavar="FILE.jsonl",
    default="-",
    show_default=True,
    help="Where to write the goldens (-: stdout).",
)
@color_option
def goldens(path: str, output: str) -> None:
    """Write golden prompts for a port's tests: one JSON line per conversation and template.

    A fixed set of conversations (single turn, with system, three turns, with and without
    the generation prompt, a tool call and a tool result) on every named template: the
    messages and flags, the rendered text, the prompt ids, the stop ids and the position
    where a correct loop stops on a known reply. Cases a template refuses are recorded as
    refused. docs/ports.md ("eosfix goldens: test vectors for a port's test suite")
    documents every key.

    \b
    Example:
        eosfix goldens ./my-model -o goldens.jsonl
    """
    from eosfix.core.fileio import write_atomic
    from eosfix.ports import iter_goldens

    path = _taken(path)
    with open_repo(path) as check, _named(path):
        if not check.repo.templates:
            raise EosfixError("no chat template: there is no conversation to render", path=path)
        records = list(iter_goldens(check))
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if output == "-":
        _write_stdout(text)
    else:
        write_atomic(Path(output), text.encode("utf-8"))
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    where = "stdout" if output == "-" else output
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    templates = len({r["template"] for r in records})
    on = f"{templates} template{'s' * (templates != 1)}"
    click.echo(f"{len(records)} cases on {on} ({summary}) -> {where}", err=True)
    sys.exit(EXIT_OK)


def _diagnosis_dict(path: str, d: Diagnosis) -> dict[str, Any]:
    return {
        "path": path,
        "input": d.input_kind,
        "unit": "token" if d.input_kind == "ids" else "character",  # of length and positions
        "length": d.length,
        "stop_ids": list(d.stops.ids),
        "stop_ids_source": d.stops.source,
        "stop_ids_need_fix": d.stops.needs_fix,
        "ok": d.ok,
        "ending": d.ending,
        "problems": [
            {"kind": p.kind, "message": p.message, "position": p.position, "id": p.token_id}
            for p in d.problems
        ],
        "notes": list(d.notes),
        "exit_code": EXIT_OK if d.ok else EXIT_FINDINGS,
    }


def _diagnosis_text(path: str, d: Diagnosis) -> str:
    unit = "token" if d.input_kind == "ids" else "character"
    plural = "" if d.length == 1 else "s"
    head = (
        f"{path}: {d.length} generated {unit}{plural}, stop ids {list(d.stops.ids)} "
        f"({d.stops.source})"
    )
    lines = [head]
    lines += [f"{p.kind}: {p.message}" for p in d.problems]
    if d.ok and d.ending:
        lines.append(f"ok: the transcript ends with {d.ending}")
    elif d.ok:
        lines.append("ok: no problem found")
    lines += [f"note: {n}" for n in d.notes]
    return "\n".join(lines)


@click.command()
@click.argument("path")
@click.option("--ids", metavar="1,2,3", help="The generated token ids.")
@click.option("--text", metavar="TEXT", help="The generated text, as the loop decoded it.")
@click.option(
    "--from-file", metavar="FILE", help="A file holding the generated text (UTF-8; -: stdin)."
)
@click.option("--prompt-ids", metavar="1,2,3", help="The ids the loop fed the model as prompt.")
@_messages_option
@_tools_option
@_template_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: where the reply stopped and why, for a person; json: the same, for scripts.",
)
@color_option
def diagnose(
    path: str,
    ids: str | None,
    text: str | None,
    from_file: str | None,
    prompt_ids: str | None,
    messages: str | None,
    tools: str | None,
    template: str | None,
    fmt: str,
) -> None:
    """Say what went wrong in what a hand-written generation loop produced.

    One line per problem, with the id to compare and the evidence: the first token is a
    terminator (the prompt was not rendered with the chat template); tokens follow a
    terminator (the loop does not compare stop ids); a new turn was invented after the
    answer; special tokens skipped in decoding hide the terminator; the prompt ids differ
    from the template's (give --messages for the exact comparison).

    Exit 0 when the transcript ends correctly, 1 when a problem is found, 2 on bad input.

    \b
    Example:
        eosfix diagnose ./my-model --ids 504,3575,282,4649,314,7042,30,2
        eosfix diagnose ./my-model --from-file out.txt
    """
    from eosfix.ports import diagnose as run
    from eosfix.ports.render import PortInputError, parse_ids

    given = [x for x in (ids, text, from_file) if x is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --ids, --text and --from-file")
    if messages is None and (tools is not None or template is not None):
        raise click.UsageError("--tools and --template need --messages")
    if messages is not None and prompt_ids is None:
        raise click.UsageError("--messages describes the prompt: give --prompt-ids too")
    out_ids = None if ids is None else parse_ids(ids, "--ids")
    if from_file is not None:
        text = _read_text(from_file)
    if text == "":
        where = "--text" if from_file is None else _label(from_file)
        raise PortInputError("empty: no generated text to diagnose", path=where)
    prompt = None if prompt_ids is None else parse_ids(prompt_ids, "--prompt-ids")
    conv = None if messages is None else _conversation(messages, tools, True, template)
    path = _taken(path)
    with open_repo(path) as check, _named(path):
        d = run(check, ids=out_ids, text=text if out_ids is None else None, prompt_ids=prompt,
                conversation=conv, fix=fix_command_for(path))  # fmt: skip
    if fmt == "json":
        click.echo(json.dumps(_diagnosis_dict(path, d), ensure_ascii=False, indent=2))
    else:
        click.echo(_diagnosis_text(path, d))
    sys.exit(EXIT_OK if d.ok else EXIT_FINDINGS)
