"""docs/schema/'s two schemas, and the checks that an output is what they say: a JSON
document, a CSV report, a markdown table."""

from __future__ import annotations

import csv
import io
import json
import re

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.conftest import ROOT

SCHEMAS = ROOT / "docs" / "schema"
CHECK = json.loads((SCHEMAS / "check.schema.json").read_text())
BATCH = json.loads((SCHEMAS / "batch.schema.json").read_text())
REGISTRY = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in (CHECK, BATCH)
)


def validator(schema: dict, ref: str | None = None) -> Draft202012Validator:
    target = schema if ref is None else {"$ref": f"{schema['$id']}#/$defs/{ref}"}
    return Draft202012Validator(target, registry=REGISTRY, format_checker=None)


def valid(schema: dict, instance: object, ref: str | None = None) -> None:
    errors = sorted(validator(schema, ref).iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors)


def markdown_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The first table's header and rows (a Hub listing's report has more tables after)."""
    table = text.split("\n\n", 1)[0]
    lines = [ln for ln in table.splitlines() if ln.startswith("| ")]
    split = [re.split(r"(?<!\\)\|", ln.strip())[1:-1] for ln in lines]
    head, rule, *rows = ([c.strip() for c in cells] for cells in split)
    assert rule == ["---"] * len(head)
    return head, rows


def check_markdown(text: str, units: int) -> None:
    head, rows = markdown_rows(text)
    assert head == BATCH["x-markdown-columns"]
    assert len(rows) == units
    verdict = validator(BATCH, "markdown_verdict")
    for row in rows:
        assert len(row) == len(head), row
        cell = row[head.index("verdict")].replace("\\|", "|").replace("&lt;", "<")
        assert verdict.is_valid(cell), cell


def check_csv(text: str, units: int) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == BATCH["x-csv-columns"]
    rows = list(reader)
    assert len(rows) == units
    for row in rows:
        valid(BATCH, row, "csv_row")
    return rows
