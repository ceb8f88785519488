"""The body of a fix pull request, in Markdown, for the repo's owner: what was wrong in one
sentence, the diff, the evidence from their own chat template, how to check it with
transformers in three lines, and (folded) the runtimes before and after.

Nothing in it speaks of eosfix's command line or its finding codes, and no probe sentinel
shows: the template's own text is quoted, with ``…`` where a probe message stood.
``eosfix.sources.hub.write`` sends it as it is given. Every text from the repo (tokens, template
output, file names, reasons) goes through ``eosfix.render.markdown``: it shows as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from eosfix.analysis.shapes import CALL_ID, CALL_ID2
from eosfix.analysis.terminators import Terminator
from eosfix.containers.folder.plan import FilePatch
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import RuntimeTable
from eosfix.decide.stopids import CUTTING, IN_TURN_KIND, ORDINARY, StopId
from eosfix.render.gguf_hub import is_hub_gguf, params_pr_description
from eosfix.render.markdown import code, escape, fenced
from eosfix.render.words import placement_text
from eosfix.result import RepoResult

# What the probes put into messages (eosfix.analysis.shapes: "Eosfixassistant1", the tool
# "eosfix_probe", call ids): never shown to the repo's owner.
_SENTINEL = re.compile(rf"(?i)eosfix\w*|{CALL_ID}|{CALL_ID2}")


def neutral(text: str) -> str:
    """Rendered text with every probe sentinel replaced by ``…`` (runs of them by one)."""
    return re.sub(r"…(\s*…)+", "…", _SENTINEL.sub("…", text))


def _names(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _removed(check: RepoCheck) -> list[StopId]:
    """The stop ids this PR takes out of the list, classified."""
    kept = set(check.proposed or ())
    ids = [i for i in dict.fromkeys(check.stop.ids or ()) if check.proposed and i not in kept]
    return [s for i in ids if (s := check.review.by_id(i)) is not None]


def _added(check: RepoCheck) -> list[Terminator]:
    have, proposed = set(check.stop.ids or ()), set(check.proposed or ())
    return [t for t in check.id_terminators if t.id not in have and t.id in proposed]


def what_was_wrong(result: RepoResult) -> str:
    """One sentence: where generation runs on past a turn's end (which runtimes, on which
    tokens), which ids cut replies, which never fire."""
    check, table = result.check, result.runtimes
    assert check is not None
    parts = []
    if table is not None:
        fixed = [r for r in table.applicable if r.misses_before and not r.misses_after]
        missed = list(
            dict.fromkeys(c for r in fixed for c, ok in r.stops_before.items() if ok is False)
        )
        if fixed and missed:
            tokens = _names([f"{code(c)} ({table.terminators[c]})" for c in missed])
            who, verb = ("it", "does") if len(fixed) == 1 else ("they", "do")
            parts.append(
                f"generation runs on past the end of a reply in {_names([r.label for r in fixed])}"
                f": {who} {verb} not stop on {tokens}, which the chat template writes where an "
                "assistant turn ends"
            )
    removed = _removed(check)
    cutting = [s for s in removed if s.kind in CUTTING]
    if cutting:
        labels = _names([code(s.token or s.text or str(s.id)) + f" ({s.id})" for s in cutting])
        parts.append(
            f"generation stops in the middle of a reply: `eos_token_id` holds {labels}, which "
            "the model writes before a reply is complete"
        )
    never = [s for s in removed if s.kind not in CUTTING]
    if never:
        ids = _names([str(s.id) for s in never])
        what = "it never fires" if len(never) == 1 else "they never fire"
        parts.append(f"`eos_token_id` holds {ids}, which no token of this model has: {what}")
    gen = check.repo.generation_config
    if gen is not None and gen.eos_malformed:
        raw = code(json.dumps(gen.eos_token_id))
        parts.append(f"`eos_token_id` is {raw}, not a token id or a list of ids")
    broken = check.repo.unreadable.get(GENERATION_CONFIG)
    if broken is not None:
        why = escape(broken.why.split(" (")[0])
        parts.append(
            f"`generation_config.json` {why}: transformers and others ignore it (and stop on "
            "`config.json`'s ids), and some runtimes cannot load the model with it"
        )
    if _removes_bom(result):
        parts.append(
            "`generation_config.json` starts with a byte-order mark, which the runtimes' JSON "
            "readers refuse (transformers and others then ignore the file)"
        )
    if not parts:  # a finding's own words: they may quote the repo
        text = check.findings[0].message
        return escape(text[0].upper() + text[1:] + ".")
    text = "; and ".join(parts)
    return text[0].upper() + text[1:] + "."


def _fenced(text: str) -> list[str]:
    return ["", *fenced(neutral(text), "text"), ""] if text else [""]


def _placement(t: Terminator) -> str:
    """Where the template writes ``t`` (eosfix's words), the tokens it names as code."""
    return placement_text(t, code).removeprefix("written ")


def _template_files(check: RepoCheck, names: Iterable[str]) -> str:
    files = {ta.name: ta.file for ta in check.terminators.templates}
    return _names([code(files.get(n, n)) for n in dict.fromkeys(names)])


def _evidence(check: RepoCheck) -> list[str]:
    """What the repo's own template writes: each terminator added, each id removed, and the
    terminators already listed (in one line)."""
    lines: list[str] = []
    added = _added(check)
    kept = [t for t in check.id_terminators if t not in added]
    if kept:
        listed = "; ".join(f"{code(t.content)} ({t.id}, {_placement(t)})" for t in kept)
        lines += [f"Already stop ids, where the template ends a turn: {listed}.", ""]
    for t in added:
        lines.append(
            f"{_template_files(check, t.templates)} writes {code(t.content)} (id {t.id}) "
            f"{_placement(t)}:"
        )
        lines += _fenced(t.evidence)
    for s in _removed(check):
        name = code(s.token or s.text or str(s.id))
        if s.kind == IN_TURN_KIND:
            where = escape(neutral(s.reason))
            lines.append(f"{name} (id {s.id}) is written inside an assistant turn ({where}):")
            lines += _fenced(s.evidence)
        elif s.kind == ORDINARY:
            reason = escape(neutral(s.reason))
            lines += [f"{name} (id {s.id}) is an ordinary text token: {reason}.", ""]
        else:
            lines += [f"{s.id} is no token of this model ({escape(neutral(s.reason))}).", ""]
    return lines


def _verify(repo_id: str, check: RepoCheck) -> list[str]:
    """Three lines of transformers that show the stop tokens, now and with this PR."""
    known: dict[int, str | None] = {s.id: s.token for s in check.review.stop_ids}
    known |= {t.id: t.content for t in check.terminators.terminators if t.id is not None}

    def printed(ids: int | Sequence[int]) -> str:
        """What ``print(tok.convert_ids_to_tokens(ids))`` shows: a token as its text (print
        writes a str without quotes), a list as its repr."""
        if isinstance(ids, int):
            return str(known.get(ids))
        return "[" + ", ".join(repr(known.get(i)) for i in ids) + "]"

    now = check.stop.raw if isinstance(check.stop.raw, int) else check.stop.ids
    broken = check.repo.unreadable.get(GENERATION_CONFIG)
    if broken is not None:  # GenerationConfig.from_pretrained raises on what is not JSON
        today = f"Today this raises `OSError` (`generation_config.json` {escape(broken.why.split(' (')[0])})"
    elif GENERATION_CONFIG not in check.repo.files:  # ... and on a missing file
        today = "Today this raises `OSError` (the repo has no `generation_config.json`)"
    elif now is None:  # convert_ids_to_tokens(None) iterates None
        today = "Today this raises `TypeError` (`generation_config.json` sets no `eos_token_id`)"
    else:
        today = f"Today this prints {code(printed(now))}"
    after = check.proposed if check.proposed is not None else now  # a mark removed: the same
    merged = printed(after) if after is not None else "None"
    program = "\n".join(
        [
            "from transformers import AutoTokenizer, GenerationConfig",
            (
                f'tok, gen = AutoTokenizer.from_pretrained("{repo_id}"), '
                f'GenerationConfig.from_pretrained("{repo_id}")'
            ),
            "print(tok.convert_ids_to_tokens(gen.eos_token_id))",
        ]
    )
    return [
        *fenced(program, "python"),
        "",
        (
            f"{today}; with this pull request merged, "
            f"{code(merged)}. To try this pull request before merging it, pass its "
            'branch to `GenerationConfig.from_pretrained` as `revision="refs/pr/…"` (the '
            "number in its address)."
        ),
    ]


def _removes_bom(result: RepoResult) -> bool:
    return any(p.file == GENERATION_CONFIG and getattr(p, "bom_removed", False)
               for p in result.patches)  # fmt: skip


def _changes(result: RepoResult) -> str:
    """What the pull request changes, in one line."""
    gen = next((p for p in result.patches if p.file == GENERATION_CONFIG), None)
    if isinstance(gen, FilePatch) and gen.replaces:
        return (
            "This pull request writes `generation_config.json` anew, from `config.json`'s "
            "generation settings as transformers reads them without the file, with the stop "
            "ids (the file in the repo is not JSON, so nothing else of it can be kept):"
        )
    ids = gen is None or "eos_token_id" in gen.summary
    if not _removes_bom(result):
        return "This pull request changes only `eos_token_id` in `generation_config.json`:"
    if not ids:
        return (
            "This pull request removes only the byte-order mark at the start of "
            "`generation_config.json`:"
        )
    return (
        "This pull request changes only `eos_token_id` in `generation_config.json`, and "
        "removes the byte-order mark at its start:"
    )


def pr_description(result: RepoResult) -> str:
    """The PR body (see the module); for a GGUF on the Hub, the body of its ``params``
    pull request (``eosfix.render.gguf_hub.params_pr_description``)."""
    if is_hub_gguf(result):
        return params_pr_description(result)
    check = result.check
    assert check is not None
    lines = [
        what_was_wrong(result),
        "",
        _changes(result),
        "",
        *fenced(
            "\n".join(p.diff().rstrip("\n") for p in result.patches if p.file == GENERATION_CONFIG),
            "diff",
        ),
        "",
        "### What your chat template writes",
        "",
        *_evidence(check),
        "### Check it with transformers",
        "",
        *_verify(result.name, check),
        "",
    ]
    if result.runtimes is not None:
        lines += _runtime_lines(result.runtimes)
    lines.append("<sub>Prepared with eosfix, which reads a repo's chat template and tokenizer "
                 "files and changes nothing but the stop ids.</sub>")  # fmt: skip
    return "\n".join(lines)


def _runtime_lines(table: RuntimeTable) -> list[str]:
    """The runtimes before and after, folded: for the curious, not needed to review."""
    lines = [
        "<details><summary>Which runtimes stop where, before and after</summary>",
        "",
        (
            "| runtime | reads | stops at every turn end now | stops inside a reply now "
            "| after this pull request: stops at every turn end and never inside a reply |"
        ),
        "| --- | --- | --- | --- | --- |",
    ]
    for row in table.rows:
        reads = escape(row.reads, in_table=True)
        if row.runtime in table.not_applicable:
            lines.append(f"| {row.runtime} | {reads} | not applicable (no config.json) | | |")
            continue
        early = ", ".join(code(text, in_table=True) for text in row.early_before) or "no"
        stops = _yes(not row.misses_before)
        lines.append(f"| {row.runtime} | {reads} | {stops} | {early} | {_yes(row.ok_after)} |")
    return [*lines, "", "</details>", ""]


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"
