"""A batch's results as a stream: JSON, CSV and a Markdown table, each written as it is made.

Nothing is kept per result, so memory does not grow with the batch. The JSON is the same
text as ``json.dumps(document, indent=2)`` of the whole document; the Markdown table is
what an organisation owner pastes into an issue. ``JSON_DETAIL`` and ``TEXT_DETAIL`` are the
renderers the batch's workers run on each result (passed in by the CLI).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any, TextIO

from eosfix.batch.run import Failure, Result, Run
from eosfix.batch.verdict import Detail, Members
from eosfix.render.auditrows import AuditRow, audit_row
from eosfix.render.csvrows import CsvWriter
from eosfix.render.markdown import code, escape
from eosfix.render.report import render_repo_text, result_to_dict
from eosfix.render.words import PROBLEM_TEXT, VERDICT_TEXT, verdict_words
from eosfix.result import RepoResult

__all__ = [
    "CSV_COLUMNS", "JSON_DETAIL", "MARKDOWN_COLUMNS", "PROBLEM_TEXT", "TEXT_DETAIL",
    "VERDICT_TEXT", "Digest", "json_members", "verdict_words", "write_csv", "write_json",
    "write_markdown",
]  # fmt: skip

_ENTRY = "    "  # where an entry of the "repos" list is nested in the report
_MEMBER = _ENTRY + "  "


def json_members(result: RepoResult) -> Members:
    """The repo's JSON entry (``result_to_dict``) as Members: each value written as the
    report writes it, once, in the worker that analysed it."""
    return tuple((key, _dumps(value, _MEMBER)) for key, value in result_to_dict(result).items())


# Each repo's JSON entry (as `eosfix check --format json` gives it), and its text block.
JSON_DETAIL = Detail("json", json_members)
TEXT_DETAIL = Detail("text", functools.partial(render_repo_text, fixing=True))


def _dumps(value: Any, indent: str) -> str:
    """json.dumps(indent=2, ensure_ascii=False) of a value nested at ``indent``, as in the
    whole document: the same text, made by direct recursion. With ``indent`` set, json uses
    its pure-Python generators (the C encoder only writes compact JSON), the largest cost of
    a 10,000-entry report; strings are still escaped by json's own C function. A type this
    does not know goes to json.dumps itself (which raises, as it would have)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)  # as json: an IntEnum is its number
    if isinstance(value, float):
        return _float(value)
    inner = indent + "  "
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [_dumps(v, inner) for v in value]
    elif isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{_key(k)}: {_dumps(v, inner)}" for k, v in value.items()]
    else:
        return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)
    opener, closer = ("[", "]") if isinstance(value, (list, tuple)) else ("{", "}")
    return f"{opener}\n{inner}" + f",\n{inner}".join(items) + f"\n{indent}{closer}"


def _float(value: float) -> str:
    """json's float text (allow_nan: NaN, Infinity, -Infinity)."""
    if math.isnan(value):
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key(key: object) -> str:
    """A dict key as json writes it (a str, or a float, bool, None or int made one)."""
    if isinstance(key, str):
        return encode_basestring(key)
    if isinstance(key, float):
        return encode_basestring(_float(key))
    if key is True or key is False or key is None:
        return f'"{json.dumps(key)}"'
    if isinstance(key, int):
        return f'"{int.__repr__(key)}"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def write_json(run: Run, out: TextIO) -> None:
    """Stream the run as JSON, each entry written as soon as it is made: the same text as
    json.dumps(document, indent=2), where the document is {**head, "repos": [each result's
    entry (``Result.entry()``) ...], **footer, "summary", "exit_code"} (head and footer come from the source). An
    interrupted run (Ctrl-C) still ends in a whole document, with ``"interrupted": true``
    before ``exit_code`` (130); a second Ctrl-C closes it with the entries written so far."""
    head = run.source.head()
    out.write("{")
    out.writelines(f"\n  {json.dumps(key)}: {_dumps(value, '  ')}," for key, value in head.items())
    out.write('\n  "repos": [')
    sep = "\n    "
    hard_stop = False
    try:
        for result in run:
            text = sep + _entry_text(result)  # made whole before it is written
            out.write(text)
            out.flush()
            sep = ",\n    "
    except KeyboardInterrupt:
        run.interrupted = hard_stop = True
    out.write("]" if sep == "\n    " else "\n  ]")
    footer = {**run.source.footer(), "summary": run.summary()}
    if run.interrupted:
        footer["interrupted"] = True
    footer["exit_code"] = run.exit_code
    out.writelines(
        f",\n  {json.dumps(key)}: " + _dumps(value, "  ") for key, value in footer.items()
    )
    out.write("\n}\n")
    out.flush()
    if hard_stop:
        raise KeyboardInterrupt


def _entry_text(result: Result) -> str:
    """The entry as ``_dumps`` writes a dict of ``Result.entry()``'s parts merged in order
    (a later part replaces a key's value in its place), from the detail the worker already
    encoded."""
    head, detail, extra = result.entry()
    members = {key: _dumps(value, _MEMBER) for key, value in head.items()}
    members.update(detail or ())
    members.update((key, _dumps(value, _MEMBER)) for key, value in extra.items())
    body = f",\n{_MEMBER}".join(f"{_key(key)}: {text}" for key, text in members.items())
    return f"{{\n{_MEMBER}{body}\n{_ENTRY}}}"


CSV_COLUMNS = (
    "repo_id",
    "revision",
    "commit",
    "verdict",
    "problem",
    "runs_on",
    "stops_early",
    "ends_a_turn",
    "eos_token_id",
    "proposed_eos_token_id",
    "error",
    "pull_request",
)


def _csv_row(row: AuditRow) -> list[str]:
    terms = "; ".join(f"{c} {i}" if i is not None else c for c, i in row.terminators)
    cells = [row.repo_id, row.revision, row.commit, row.verdict, row.problem or ""]
    cells += ["; ".join(row.runs_on), "; ".join(row.stops_early), terms, row.eos, row.proposed]
    return [*cells, row.error, row.pull_request]


def _csv_failure(f: Failure) -> list[str]:
    cells = dict.fromkeys(CSV_COLUMNS, "")
    cells.update(repo_id=f.name, verdict="error", error=f.error)
    return list(cells.values())


def write_csv(run: Run, out: TextIO) -> None:
    """One CSV line per result (RFC 4180 quoting; a cell that would start a formula is made
    text: ``eosfix.render.csvrows``), with a header line; then one line per failure of the
    source (a corrupted cache entry, a listing), verdict ``error``."""
    writer = CsvWriter(out)
    writer.writerow(CSV_COLUMNS)
    try:
        for result in run:
            writer.writerow(_csv_row(audit_row(result)))
            out.flush()
    finally:  # interrupted too: every line written is whole
        for failure in run.source.failures():
            writer.writerow(_csv_failure(failure))
        out.flush()


def _text(text: str) -> str:
    """Plain text in a Markdown cell (``eosfix.render.markdown``: repo text stays text)."""
    return escape(text, in_table=True)


MARKDOWN_COLUMNS = ("repo", "revision", "ends a turn", "eos now", "verdict", "pull request")
# A pull request's address as the Hub gives it: nothing that could end the link early.
_URL = re.compile(r"https?://[^\s()<>\[\]`|\\]+")


def _markdown_row(row: AuditRow) -> str:
    terms = "<br>".join(
        f"{code(c, in_table=True)} {i}" if i is not None else code(c, in_table=True)
        for c, i in row.terminators
    )
    url = row.pr_url
    if url is not None and _URL.fullmatch(url):
        pr = f"[{_text(row.pr_words or 'pull request')}]({url})"
    else:
        pr = _text(row.pr_words)
    repo = code(row.repo_id, in_table=True)
    cells = (repo, _text(row.revision_cell), terms or "-", row.eos_cell or "-")  # eosfix's ids
    return "| " + " | ".join((*cells, _verdict_cell(row), pr)) + " |"


def _verdict_cell(row: AuditRow) -> str:
    note = row.note  # " -> [ids]" (eosfix's), then ": the error" (may quote the repo)
    files = f" ({row.gguf})" if row.gguf else ""  # a GGUF repo's files (names from the repo)
    note = note.removesuffix(files)
    if row.error and note.endswith(row.error):
        note = note[: -len(row.error)] + _text(row.error)
    return row.words + note + _text(files)


def _markdown_failure(f: Failure) -> str:
    return f"| {code(f.name, in_table=True)} | - | - | - | {_text('error: ' + f.error)} |  |"


def write_markdown(
    run: Run, out: TextIO, summary: Callable[[], str], digest: Digest | None = None
) -> None:
    """A GitHub-flavoured Markdown table (MARKDOWN_COLUMNS), a row per result and per failure
    of the source, then the summary line as a paragraph; with ``digest``, its sections after
    (``Digest.write``)."""
    out.write("| " + " | ".join(MARKDOWN_COLUMNS) + " |\n")
    out.write("|" + " --- |" * len(MARKDOWN_COLUMNS) + "\n")
    try:
        for result in run:
            row = audit_row(result)
            out.write(_markdown_row(row) + "\n")
            out.flush()
            if digest is not None:
                digest.add(row)
    finally:  # interrupted too: the table stays whole
        out.writelines(_markdown_failure(failure) + "\n" for failure in run.source.failures())
    out.write(f"\n{summary()}\n")
    if digest is not None:
        digest.write(out)


BROKEN = ("fixable", "fixed", "problems")  # the verdicts of a repo that does not stop right
FIRST = 20  # repos listed under "what to fix first"
FAMILIES_SHOWN = 10


class Digest:
    """What an audit's published report says after its table (a Hub listing's Markdown):
    repos by verdict; by runtime, how many run on and how many stop early; the template
    families most common among the repos that do not stop right (a family: the tokens its
    template ends a turn with, as the table's "ends a turn" column shows them); and those
    repos by downloads, the most first (what to fix first). Memory stays flat: counts, and
    the FIRST most downloaded repos."""

    def __init__(self) -> None:
        self.verdicts: dict[str, int] = {}
        self.runtimes: dict[str, list[int]] = {}  # runtime -> [runs on, stops early]
        self.families: dict[tuple[str, ...], list[int]] = {}  # ends a turn -> [repos, dls]
        self.first: list[tuple[int, int, str, str]] = []  # (-downloads, order, repo, words)
        self.seen = 0

    def add(self, row: AuditRow) -> None:
        words = row.words
        self.verdicts[words] = self.verdicts.get(words, 0) + 1
        for name in row.runs_on:
            self.runtimes.setdefault(name, [0, 0])[0] += 1
        for name in row.stops_early:
            self.runtimes.setdefault(name, [0, 0])[1] += 1
        if row.verdict not in BROKEN:
            return
        family = tuple(c for c, _ in row.terminators) or ("(none found)",)
        counts = self.families.setdefault(family, [0, 0])
        counts[0] += 1
        counts[1] += row.downloads
        self.seen += 1
        self.first.append((-row.downloads, self.seen, row.repo_id, _verdict_cell(row)))
        if len(self.first) > 2 * FIRST:
            self.first = sorted(self.first)[:FIRST]

    def write(self, out: TextIO) -> None:
        out.write("\n## Verdicts\n\n| verdict | repos |\n| --- | --- |\n")
        out.writelines(
            f"| {_text(words)} | {n} |\n"
            for words, n in sorted(self.verdicts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        if self.runtimes:
            out.write("\n## Runtimes\n\n| runtime | runs on | stops early |\n")
            out.write("| --- | --- | --- |\n")
            out.writelines(
                f"| {_text(name)} | {runs_on} | {early} |\n"
                for name, (runs_on, early) in sorted(
                    self.runtimes.items(), key=lambda kv: (-sum(kv[1]), kv[0])
                )
            )
        if not self.families:
            return
        out.write("\n## Template families among the repos to fix\n\n")
        out.write("| ends a turn | repos | downloads |\n| --- | --- | --- |\n")
        families = sorted(self.families.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
        for family, (n, downloads) in families[:FAMILIES_SHOWN]:
            tokens = "<br>".join(code(t, in_table=True) for t in family)
            out.write(f"| {tokens} | {n} | {downloads:,} |\n")
        if len(families) > FAMILIES_SHOWN:
            out.write(f"\n{len(families) - FAMILIES_SHOWN} more families.\n")
        out.write("\n## What to fix first (by downloads)\n\n")
        out.write("| repo | downloads | verdict |\n| --- | --- | --- |\n")
        out.writelines(
            f"| {code(repo, in_table=True)} | {-minus:,} | {words} |\n"
            for minus, _, repo, words in sorted(self.first)[:FIRST]
        )
        if self.seen > FIRST:
            out.write(f"\n{self.seen - FIRST} more repos to fix.\n")
