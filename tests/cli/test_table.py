"""A long run on a terminal: ``eosfix hub`` and ``eosfix cache`` print each row as its repo
finishes, in order, above a progress bar whose total is shown once the Hub's listing is
complete; the table fits the terminal's width and never cuts a repo id or a token mid-way.
Run on a pseudo-terminal (tests/support/terminal.py) against the stand-in Hub; each wait is
for an event in the output, never for a window of time."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from eosfix.batch.run import Row
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.hubrepos import chatml_org, sample_files
from tests.support.hubserver import FakeHub
from tests.support.terminal import Terminal

ORG = "big"
LONG_ID = f"{ORG}/Meta-Llama-3.1-8B-Instruct-abliterated-4bit"
# repo -> the sample it holds: a long name, a plain-text stop, next-turn openers, a VLM
SHAPES = {
    LONG_ID: "chatml-missing-im-end",
    f"{ORG}/glm-chat": "glm-next-turn-opener",
    f"{ORG}/plain-text-turns": "plain-text-turns",
    f"{ORG}/reasoner-20b": "stop-inside-turn",
    f"{ORG}/vl-chat": "vlm-text-config-eos",
}
TOKENS = ("<|im_end|>", "<|user|>", "<|observation|>", "### Instruction:", "<|return|>",
          "<|call|>")  # fmt: skip
SHA = re.compile(r"[0-9a-f]{8}")


def _env(tmp_path: Path, hub: FakeHub | None = None) -> dict[str, str]:
    env = {"HOME": str(tmp_path / "home"), "EOSFIX_CACHE": str(tmp_path / "store"),
           "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}  # fmt: skip
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return env


def _tables(lines: list[str]) -> list[list[list[list[str]]]]:
    """Every table on the screen (a header printed again starts another): its rows, each a
    list of cells, each the cell's lines. A row starts where the revision column starts with
    a commit."""
    heads = [i for i, line in enumerate(lines) if line.startswith(" repo ")]
    tables = []
    for head in heads:
        assert set(lines[head + 1]) <= {"━", "╇"}, lines[head + 1]
        rows: list[list[list[str]]] = []
        for line in lines[head + 2 :]:
            if "│" not in line:
                break
            cells = [c.strip() for c in line.split("│")]
            if SHA.fullmatch(cells[1].split(" ")[0]):
                rows.append([[c] if c else [] for c in cells])
            else:
                for cell, text in zip(rows[-1], cells, strict=True):
                    if text:
                        cell.append(text)
        tables.append(rows)
    return tables


def _assert_nothing_cut(rows: list[list[list[str]]], repo_ids: list[str]) -> None:
    """Each repo id whole across its lines, broken only after a / - or _; each token on one
    line; each word of the other cells whole."""
    assert ["".join(r[0]) for r in rows] == repo_ids
    for row in rows:
        repo = row[0]
        for line in repo[:-1]:
            assert line.endswith(("/", "-", "_")), repo
        for line in row[2]:  # ends a turn: tokens and ids, whole
            rest = line
            for token in TOKENS:
                rest = rest.replace(token, "")
            assert re.fullmatch(r"[\d ]*|-", rest), (line, row)
        for line in row[2]:
            for token in TOKENS:
                if token[:3] in line and token not in " ".join(row[2]):
                    raise AssertionError(f"{token} cut in {row[2]}")


@pytest.fixture
def shapes_hub():
    hub = FakeHub()
    for repo_id, sample in SHAPES.items():
        hub.add_repo(repo_id, sample_files(sample))
    with hub:
        yield hub


@pytest.mark.parametrize("columns", [80, 120])
def test_the_table_fits_the_terminal_and_cuts_no_id_or_token(shapes_hub, tmp_path, columns):
    term = Terminal(["hub", "--author", ORG], _env(tmp_path, shapes_hub), columns=columns)
    assert term.finish() == 1
    lines = term.screen()
    assert all(len(line) <= columns for line in lines if "│" in line or "┃" in line), lines
    rows = [row for table in _tables(lines) for row in table]
    _assert_nothing_cut(rows, sorted(SHAPES))
    text = "\n".join(lines)
    assert "…" not in text
    for token in TOKENS:  # every token the repos end a turn with is on the screen, whole
        assert any(token in line for line in lines), token
    assert any(
        line.startswith("4 repos would be fixed, 1 repo with warnings only") for line in lines
    )
    assert not any("checking" in line for line in lines)  # the bar is gone


def test_rows_print_as_repos_finish_above_a_bar_with_the_listing_s_total(tmp_path):
    """The listing arrives in one page: while the third repo's files are held, the first two
    rows are on the terminal and the bar counts 2 of 40 (it showed ``2/?`` and no row until
    every repo was done)."""
    hub = FakeHub()
    ids = chatml_org(hub, 40, name=ORG)
    held = hub.hold(rf"^/{ORG}/m002/")
    with hub:
        term = Terminal(["hub", "--author", ORG], _env(tmp_path, hub), columns=80)
        term.wait_for(lambda t: ids[1] in t and "2/40" in t, "two rows and 2/40")
        assert ids[2] not in term.text  # in order: nothing after the repo held
        held.release()
        code = term.finish()
    assert code == 1
    assert "40/40" in term.text
    lines = term.screen()
    tables = _tables(lines)
    assert len(tables) == 1  # one header: the rows never needed another layout
    assert ["".join(row[0]) for row in tables[0]] == ids
    assert not any("checking" in line for line in lines)
    hint = lines.index("(run with --pr to open a pull request per fixable repo)")
    assert lines[hint + 1].startswith("26 repos would be fixed, 14 repos stop correctly")
    assert all("│" not in line for line in lines[hint:])  # the summary after the table


def test_piped_output_is_the_whole_table_at_the_end(shapes_hub, tmp_path):
    """Not a terminal: the table as it always was (the transcripts hold its bytes)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "EOSFIX_"))}
    env |= {**_env(tmp_path, shapes_hub), "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    out = subprocess.run(
        [sys.executable, "-m", "eosfix", "hub", "--author", ORG],
        capture_output=True, text=True, env=env, check=False,
    ).stdout  # fmt: skip
    assert out.count("┃ revision") == 1
    assert max(len(line) for line in out.splitlines()) > 80  # 200 columns when piped
    assert f" {LONG_ID} " in out


def test_cache_prints_its_rows_on_a_terminal(tmp_path):
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/Qwen3-VeryLongModelName-Instruct-2507-FP8-dynamic", chatml_files(1000))
    b.add_revision("org/good", chatml_files(2000, healthy=True))
    args = ["cache", "--cache-dir", str(b.root)]
    term = Terminal(args, _env(tmp_path), columns=80)
    assert term.finish() == 1
    lines = term.screen()
    (table,) = _tables(lines)
    ids = ["org/good", "org/Qwen3-VeryLongModelName-Instruct-2507-FP8-dynamic"]  # the cache's order
    assert ["".join(row[0]) for row in table] == ids
    assert lines[-1].startswith("2 snapshots of 2 repos: 1 would be fixed")


# --- the layout, without a terminal ---------------------------------------------------------


def _term_table(width: int, styled: bool = False):
    from rich.console import Console

    from eosfix.cli.table import TermTable

    console = Console(
        file=io.StringIO(), width=width, force_terminal=styled,
        color_system="truecolor" if styled else None, no_color=not styled,
    )  # fmt: skip
    return TermTable(console)


def _row(repo: str, terms: str = "<|im_end|> 151645", note: str = " -> [1, 2]", pr: str = ""):
    return Row(repo, "98ad1746 (main)", terms, "151643", "fixable", note, pr, "runs_on")


def test_a_wider_token_lays_the_table_out_again_under_a_new_header():
    table = _term_table(80)
    first = table.add(_row("org/a")).splitlines()
    assert first[0].startswith(" repo ")
    again = table.add(_row("org/b", terms="<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|> 5"))
    lines = again.splitlines()
    assert lines[0].startswith(" repo ")  # a new header: the columns moved
    assert any("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>" in line for line in lines)
    assert all(len(line) <= 80 for line in lines)
    same = table.add(_row("org/c")).splitlines()
    assert not same[0].startswith(" repo ")  # nothing wider: no header


def test_a_pull_request_column_appears_with_the_first_pull_request():
    table = _term_table(120)
    assert "pull request" not in table.add(_row("org/a"))
    lines = table.add(_row("org/b", pr="opened (#3)")).splitlines()
    assert lines[0].endswith("pull request")
    assert lines[2].endswith("opened (#3)")


def test_a_piece_wider_than_the_terminal_is_folded_and_kept_whole_across_lines():
    from eosfix.cli.table import wrap

    token = "<|" + "x" * 100 + "|>"
    lines = wrap("tokens", f"{token} 7", 30)
    assert all(len(line) <= 30 for line in lines)
    assert "".join(lines) == f"{token} 7"  # folded only where it must be, nothing lost


def test_a_repo_id_breaks_after_its_slash_then_between_words_of_its_name():
    from eosfix.cli.table import wrap

    assert wrap("repo", "org/short", 20) == ["org/short"]
    assert wrap("repo", LONG_ID, 24) == [
        f"{ORG}/",
        "Meta-Llama-3.1-8B-",
        "Instruct-abliterated-",
        "4bit",
    ]
    assert wrap("repo", "mlx-community/Qwen2.5-7B-Instruct-4bit", 20) == [
        "mlx-community/", "Qwen2.5-7B-Instruct-", "4bit",
    ]  # fmt: skip


def test_cells_never_let_a_repo_move_the_cursor():
    table = _term_table(80)
    text = table.add(_row("org/x", terms="<|a\x1b[2J|> 5", note=": bad\tname"))
    assert "\x1b" not in text
    assert "\\x1b[2J" in text
    assert "\\t" in text


@pytest.mark.parametrize("width", [80, 120])
def test_styles_do_not_move_a_column(width):
    rows = [_row(f"org/{n}") for n in ("a", "b-very-long-name-of-a-model-repo-for-testing")]
    plain, styled = _term_table(width), _term_table(width, styled=True)
    for row in rows:
        shown = re.sub(r"\x1b\[[0-9;]*m", "", styled.add(row))
        assert shown == plain.add(row)
