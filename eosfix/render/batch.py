"""A batch's results as a stream: JSON, CSV and a Markdown table, each written as it is made.

Nothing is kept per result, so memory does not grow with the batch. The JSON is the same
text as ``json.dumps(document, indent=2)`` of the whole document; the Markdown table is
what an organisation owner pastes into an issue. ``JSON_DETAIL`` and ``TEXT_DETAIL`` are the
renderers the batch's workers run on each result (passed in by the CLI).
"""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Callable
from typing import Any, TextIO

from eosfix.batch.run import Result, Run
from eosfix.batch.verdict import Detail, ids_text
from eosfix.render.report import render_repo_text, result_to_dict

# Each repo's JSON entry (as `eosfix check --format json` gives it), and its text block.
JSON_DETAIL = Detail("json", result_to_dict)
TEXT_DETAIL = Detail("text", functools.partial(render_repo_text, fixing=True))

VERDICT_TEXT = {
    "fixed": "fixed",
    "fixable": "won't stop",
    "problems": "problems (not fixable)",
    "warned": "ok, with warnings",
    "ok": "ok",
    "no_template": "no chat template",
    "not_a_model": "not a model repo",
    "error": "error",
}


def _dumps(value: Any, indent: str) -> str:
    """json.dumps(indent=2) of a value nested at ``indent``, as in the whole document."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def write_json(run: Run, out: TextIO) -> None:
    """Stream the run as JSON, each entry written as soon as it is made: the same text as
    json.dumps(document, indent=2), where the document is {**head, "repos": [Result.to_dict()
    ...], **footer, "summary", "exit_code"} (head and footer come from the source)."""
    head = run.source.head()
    out.write("{")
    out.writelines(f"\n  {json.dumps(key)}: {_dumps(value, '  ')}," for key, value in head.items())
    out.write('\n  "repos": [')
    sep = "\n    "
    for result in run:
        out.write(sep + _dumps(result.to_dict(), "    "))
        out.flush()
        sep = ",\n    "
    out.write("]" if sep == "\n    " else "\n  ]")
    footer = {**run.source.footer(), "summary": run.summary(), "exit_code": run.exit_code}
    out.writelines(
        f",\n  {json.dumps(key)}: " + _dumps(value, "  ") for key, value in footer.items()
    )
    out.write("\n}\n")


CSV_COLUMNS = (
    "repo_id",
    "revision",
    "commit",
    "verdict",
    "ends_a_turn",
    "eos_token_id",
    "proposed_eos_token_id",
    "error",
    "pull_request",
)


def _csv_row(result: Result) -> list[str]:
    v, row = result.verdict, result.row()
    terms = "; ".join(f"{c} {i}" if i is not None else c for c, i in v.terminators)
    pr = str(result.unit.extra.get("pr_url") or result.unit.extra.get("pr", ""))
    eos = "" if v.status == "error" else ids_text(v.eos)
    proposed = ids_text(v.proposed) if v.proposed is not None else ""
    fields = result.item.fields()
    if "sha" in fields:  # a Hub repo: the revision asked, then its commit
        revision, commit = fields["revision"], fields["sha"] or ""
    else:  # a cache snapshot: its refs, then its commit
        revision, commit = " ".join(fields.get("refs", ())), fields["revision"]
    cells = [row.repo_id, revision, commit, row.verdict, terms, eos, proposed]
    return [*cells, v.error or "", pr]


def write_csv(run: Run, out: TextIO) -> None:
    """One CSV line per result (RFC 4180 quoting), with a header line."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for result in run:
        writer.writerow(_csv_row(result))
        out.flush()


def _cell(text: str) -> str:
    """A Markdown table cell: pipes escaped (also inside code spans, as GFM requires)."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def _markdown_row(result: Result) -> str:
    v, row = result.verdict, result.row()
    terms = "<br>".join(
        f"`{_cell(c)}` {i}" if i is not None else f"`{_cell(c)}`" for c, i in v.terminators
    )
    url, words = result.unit.extra.get("pr_url"), str(result.unit.extra.get("pr", ""))
    pr = f"[{words or 'pull request'}]({url})" if url else words
    verdict = VERDICT_TEXT[row.verdict] + row.note
    cells = (f"`{row.repo_id}`", terms or "-", row.eos or "-", verdict, pr or "")
    return "| " + " | ".join(_cell(c) if i != 1 else c for i, c in enumerate(cells)) + " |"


def write_markdown(run: Run, out: TextIO, summary: Callable[[], str]) -> None:
    """A GitHub-flavoured Markdown table (repo, what ends a turn, eos now, verdict, pull
    request), then the summary line as a paragraph."""
    out.write("| repo | ends a turn | eos now | verdict | pull request |\n")
    out.write("| --- | --- | --- | --- | --- |\n")
    for result in run:
        out.write(_markdown_row(result) + "\n")
        out.flush()
    out.write(f"\n{summary()}\n")
