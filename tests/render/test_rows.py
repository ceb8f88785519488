"""One checked repo as typed rows (``eosfix.render.rows``), read once from the result: the text
block, the JSON entry, explain's runtime table, the batch's CSV and Markdown and the page are
all made from them, so they say the same thing, and the page never reads another output's
text."""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosfix import pipeline
from eosfix.cli import cli
from eosfix.render.report import render_repo_text, result_to_dict
from eosfix.render.rows import repo_rows
from tests.conftest import ROOT, SAMPLES

SERVE = ROOT / "eosfix" / "serve"


def _rows(sample: str):
    result = pipeline.check(SAMPLES / sample)
    return result, repo_rows(result)


def test_the_json_entry_and_the_text_block_are_made_from_the_rows():
    result, rows = _rows("chatml-missing-im-end")
    entry = result_to_dict(result, rows)
    assert [t["content"] for t in entry["terminators"]] == [t.content for t in rows.terminators]
    assert entry["verdict"] == rows.verdict.verdict == "fixable"
    assert entry["problem"] == rows.verdict.problem == "runs_on"
    assert entry["runs_on"] == list(rows.verdict.runs_on)
    assert [r["runtime"] for r in entry["runtimes"]] == [r.runtime for r in rows.runtimes]
    text = render_repo_text(result)
    (terminator,) = rows.terminators
    assert f"ends a turn   <|im_end|>  id 248046, {terminator.placement}" in text
    assert f"stops on      248044  ({rows.stop_source})" in text


def test_stop_ids_say_what_it_stops_on_now_and_after_the_fix():
    """config.json lists 248046; transformers stops on generation_config.json's 248044 only:
    248046 is a stop id after the fix, not now."""
    _, rows = _rows("chatml-missing-im-end")
    assert [s.id for s in rows.stops_now] == [248044]
    assert [s.id for s in rows.stops_after] == [248044, 248046]
    _, rows = _rows("foreign-stop-ids")
    assert [s.id for s in rows.stops_now] == [151645, 151643, 151700, 200002]
    assert [s.id for s in rows.stops_after] == [151645, 151643]


def test_a_plain_text_turn_end_needs_a_stop_string_in_every_runtime():
    """No stop id can end a turn that ends with plain text: no runtime row reads "stops" or
    "-" for it, and the verdict says what is wrong."""
    _, rows = _rows("plain-text-turns")
    assert rows.runtimes
    for line in rows.runtimes:
        for state in (line.now, line.after):
            assert state.state == "text"
            assert state.words == "needs a stop string"
    assert rows.verdict.verdict == "warned"
    assert rows.verdict.problem == "needs_stop_string"
    assert rows.verdict.words == "needs a stop string"
    assert rows.modelfile == ('PARAMETER stop "### Instruction:"',)  # each text once


def test_every_surface_says_a_plain_text_turn_end_needs_a_stop_string(tmp_path):
    """check's JSON, explain's runtime table, and hub's CSV and Markdown rows of the same
    repo (through a cache snapshot, the same rows)."""
    from tests.support.cachebuilder import CacheBuilder
    from tests.support.hubrepos import repo_files

    runner = CliRunner()
    repo = str(SAMPLES / "plain-text-turns")
    entry = json.loads(runner.invoke(cli, ["check", "--format", "json", repo]).output)
    assert entry["repos"][0]["problem"] == "needs_stop_string"
    explain = runner.invoke(cli, ["explain", repo]).output
    table = explain.split("Runtimes: ")[1].splitlines()[3]  # transformers' row
    assert table.split()[1:4] == ["needs", "a", "stop"]
    CacheBuilder(tmp_path).add_revision("acme/plain", repo_files("plain-text-turns"))
    base = ["cache", "--cache-dir", str(tmp_path), "--format"]
    rows = list(csv.DictReader(io.StringIO(runner.invoke(cli, [*base, "csv"]).stdout)))
    assert [(r["verdict"], r["problem"]) for r in rows] == [("warned", "needs_stop_string")]
    markdown = runner.invoke(cli, [*base, "markdown"]).stdout
    assert "| needs a stop string |" in markdown
    assert "ok, with warnings" not in markdown


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in SERVE.glob("*.py")))
def test_the_page_reads_rows_never_another_outputs_text(module):
    """The page's modules take no output already formatted (the text block, the JSON entry,
    the lines of a GGUF's block) to take apart again."""
    formatted = {
        "eosfix.render.report.result_to_dict",
        "eosfix.render.report.render_repo_text",
        "eosfix.render.text.render_repo_text",
        "eosfix.render.explain.verdict_cell",
        "eosfix.render.gguf_hub.header_lines",
        "eosfix.render.gguf_hub.ollama_lines",
        "eosfix.render.gguf_hub.title_suffix",
    }
    assert not _imports(SERVE / module) & formatted


def test_the_page_templates_branch_on_typed_fields_never_on_a_command():
    for template in (SERVE / "templates").glob("*.html"):
        text = template.read_text(encoding="utf-8")
        assert ".startswith(" not in text, template.name
        assert "command ==" not in text, template.name
