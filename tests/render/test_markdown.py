"""Repo text in Markdown: token texts, template output, file names and error messages come from
strangers' repos, and eosfix posts PR bodies and discussions on those repos and prints
Markdown tables people paste. Whatever the repo says, it shows as text: no link, @-mention,
raw HTML or heading comes from it.

Each output is parsed with a real CommonMark parser (markdown-it-py, GFM tables on) and every
live element is checked: links and images, autolinks, HTML blocks and inline HTML, headings,
and @-mentions or bare URLs in text (which the Hub and GitHub turn into live ones; a
backslash escape splits them into separate tokens). Every hostile string carries ``pwn``."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eosfix import pipeline
from eosfix.render.markdown import code, escape, fenced
from eosfix.render.pr import pr_description
from eosfix.result import HubOrigin, RepoResult
from tests.conftest import SAMPLES

markdown_it = pytest.importorskip("markdown_it")

HOSTILE = {
    "backticks": "<|`pwn`|>",
    "backtick-runs": "<|pwn``x```y|>",
    "blank-line-heading": "<|pwn\n\n# pwn heading|>",
    "mention": "@pwnuser",
    "img": "<img src=x onerror=pwn()>",
    "script": "<script>pwn()</script>",
    "link": "[pwn](http://pwn.example)",
    "autolink": "<http://pwn.example>",
    "bare-url": "http://pwn.example www.pwn.example",
    "heading": "# pwn",
    "pipes": "|pwn|x|",
    "entity": "&lt;pwn&gt;",
    "emphasis": "**pwn** _pwn_ ~~pwn~~",
}


def parser() -> Any:
    md = markdown_it.MarkdownIt("commonmark").enable("table")
    md.disable("text_join")  # keep backslash escapes as their own tokens (text_special)
    return md


def _walk(tokens: list[Any]) -> Iterator[Any]:
    for t in tokens:
        yield t
        if t.children:
            yield from _walk(t.children)


def live_from_repo(text: str) -> list[str]:
    """Every live Markdown element that carries repo text (``pwn``)."""
    tokens = parser().parse(text)
    found = []
    for i, t in enumerate(tokens):
        if t.type == "heading_open" and "pwn" in tokens[i + 1].content.lower():
            found.append(f"heading: {tokens[i + 1].content!r}")
    for t in _walk(tokens):
        attrs = " ".join(str(v) for v in (t.attrs or {}).values())
        if t.type in ("link_open", "image") and "pwn" in (attrs + t.content).lower():
            found.append(f"{t.type}: {attrs!r} {t.content!r}")
        if t.type in ("html_block", "html_inline") and "pwn" in t.content.lower():
            found.append(f"{t.type}: {t.content!r}")
        if t.type == "text" and re.search(r"@pwn|://pwn|www\.pwn", t.content, re.IGNORECASE):
            found.append(f"mention or bare url: {t.content!r}")
    for t in _walk(tokens):  # emphasis around repo text (``**`` or ``_`` in a token)
        inside = 0
        for c in t.children or ():
            inside += c.nesting if c.type.startswith(("strong_", "em_", "s_")) else 0
            if inside and c.type == "text" and "pwn" in c.content.lower():
                found.append(f"emphasis: {c.content!r}")
    return found


def shown_as_code(text: str) -> str:
    """All text of code spans and fenced blocks."""
    return "\n".join(
        t.content for t in _walk(parser().parse(text)) if t.type in ("code_inline", "fence")
    )


# --- hostile repos: a sample with its tokens' texts replaced --------------------------------


def _swap(data: Any, old: str, new: str, exact: bool) -> Any:
    if isinstance(data, dict):
        return {_swap(k, old, new, exact): _swap(v, old, new, exact) for k, v in data.items()}
    if isinstance(data, list):
        return [_swap(v, old, new, exact) for v in data]
    if not isinstance(data, str):
        return data
    if exact:
        return new if data == old else data
    return data.replace(old, new)


def hostile_repo(sample: str, dst: Path, swaps: dict[str, str], *, exact: bool = False) -> Path:
    """``sample`` with each token text of ``swaps`` replaced everywhere (JSON files through
    their data, templates as text); ``exact``: only JSON strings that are the token's text
    (a vocabulary entry such as ``#``), and no template."""
    shutil.copytree(SAMPLES / sample, dst, ignore=shutil.ignore_patterns("fixed", "expected.txt"))
    for path in dst.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            for old, new in swaps.items():
                data = _swap(data, old, new, exact)
            path.write_text(json.dumps(data, indent=2) + "\n")
        elif not exact:
            text = path.read_text()
            for old, new in swaps.items():
                text = text.replace(old, new)
            path.write_text(text)
    return dst


# (sample, the token whose text is replaced): each reaches other parts of the PR body.
TARGETS = [
    ("chatml-missing-im-end", "<|im_end|>"),  # a terminator added: summary, evidence, verify
    ("stop-inside-turn", "<|end|>"),  # an id removed: written inside a turn (evidence)
    ("ordinary-stop-id", "#"),  # an id removed: an ordinary text token (exact: vocabulary)
]


def _result(tmp_path: Path, sample: str, token: str, hostile: str) -> RepoResult:
    root = hostile_repo(sample, tmp_path / "repo", {token: hostile}, exact=token == "#")
    result = pipeline.check_folder(root, label="org/hostile")
    assert result.error is None, result.error
    assert result.patches, "the hostile repo must still get a fix (else nothing is rendered)"
    return result


@pytest.mark.parametrize(("sample", "token"), TARGETS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_pr_body_shows_hostile_tokens_as_text(tmp_path, sample, token, name):
    result = _result(tmp_path, sample, token, HOSTILE[name])
    body = pr_description(result)
    assert live_from_repo(body) == [], body
    code = shown_as_code(body)  # shown whole, not dropped or cut (a line break as \\n)
    assert HOSTILE[name] in code or HOSTILE[name].replace("\n", "\\n") in code, body


def test_a_template_with_backtick_fences_stays_inside_the_evidence_block(tmp_path):
    """Template lines of three and four backticks (and an info string) in the evidence: the
    block eosfix writes is longer, so they are its content."""
    root = hostile_repo(
        "chatml-missing-im-end",
        tmp_path / "repo",
        {
            "'\\n' + message['content']": "'\\n```\\n# pwn\\n````html\\n<b>pwn</b>\\n' + message['content']"
        },
    )
    assert "````html" in (root / "chat_template.jinja").read_text()
    result = pipeline.check_folder(root, label="org/hostile")
    assert result.patches
    body = pr_description(result)
    assert live_from_repo(body) == [], body
    evidence = shown_as_code(body)
    assert "````html" in evidence
    assert "# pwn" in evidence


@pytest.mark.parametrize("name", list(HOSTILE))
def test_discussion_report_shows_hostile_text_as_text(tmp_path, name):
    pytest.importorskip("fastapi")
    from eosfix.serve.bot import report_markdown

    result = _result(tmp_path, "chatml-missing-im-end", "<|im_end|>", HOSTILE[name])
    result = result._replace(hub=HubOrigin("org/name", "main", "a" * 40))
    text = report_markdown(result)
    assert live_from_repo(text) == [], text
    assert "pwn" in text


def test_hub_markdown_table_shows_hostile_text_as_text(fake_hub, tmp_path, run_eosfix):
    """``hub --format markdown``: hostile tokens in the "ends a turn" cells, a hostile error
    message in an error row; the table keeps its columns; the report's sections after it keep
    hostile text as text too."""
    for i, name in enumerate(HOSTILE):
        root = hostile_repo("chatml-missing-im-end", tmp_path / name, {"<|im_end|>": HOSTILE[name]})
        files = {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }
        fake_hub.add_repo(f"org/m{i:02d}", files)
    bad = hostile_repo("chatml-missing-im-end", tmp_path / "bad", {})
    config = json.loads((bad / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {HOSTILE["link"] + " " + HOSTILE["img"]: {"content": "x"}}
    (bad / "tokenizer_config.json").write_text(json.dumps(config))
    files = {p.relative_to(bad).as_posix(): p.read_bytes() for p in bad.rglob("*") if p.is_file()}
    fake_hub.add_repo("org/zz-error", files)
    result = run_eosfix("hub", "--author", "org", "--format", "markdown")
    report = result.stdout  # the table, the summary line, then the report's sections
    assert live_from_repo(report) == [], report
    table = report.split("\n\n", 1)[0]
    tokens = parser().parse(table)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == len(HOSTILE) + 2  # the header, a row per repo
    cells = [t for t in tokens if t.type in ("td_open", "th_open")]
    assert len(cells) == 6 * len(rows)
    code = shown_as_code(table)
    families = shown_as_code(report.split("## Template families", 1)[1])
    for name, text in HOSTILE.items():
        if "\n" not in text:
            assert text in code, name
    # the report's families (the ten most common) show the tokens as code too
    assert sum(text in families for text in HOSTILE.values()) >= 5
    error_row = next(line for line in table.splitlines() if "zz-error" in line)
    assert "pwn" in error_row


# --- the three helpers, on any text -----------------------------------------------------------


# Printable text with Markdown's special characters over-represented (no NUL: CommonMark
# replaces it, and no other control characters, which no repo text shows).
TEXT = st.text(
    st.sampled_from("`*_~[]()<>&|#@:/.!\\-+=\n 0123456789abcw")
    | st.characters(min_codepoint=32, max_codepoint=0x2FFF, exclude_characters="\x7f"),
    max_size=40,
)


def _inline(text: str) -> list[Any]:
    (_, inline, _) = parser().parse(text)
    return inline.children


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_code_is_one_span_showing_the_whole_text(text):
    if not text:
        return
    (span,) = _inline(f"x {code(text)} x")[1:-1]
    assert span.type == "code_inline"
    assert span.content == text.replace("\r", "\\r").replace("\n", "\\n")


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_a_fenced_block_holds_the_whole_text(text):
    tokens = parser().parse("\n".join(["before", "", *fenced(text, "text"), "", "after"]))
    (block,) = [t for t in tokens if t.type == "fence"]
    assert block.info == "text"
    assert block.content == text.rstrip("\r\n").replace("\r\n", "\n").replace("\r", "\n") + "\n"
    paragraphs = [t for t in tokens if t.type == "paragraph_open"]
    assert len(paragraphs) == 2  # "before" and "after": nothing escaped the block


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_escaped_text_is_only_text(text):
    children = _inline(f"x {escape(text)} x")
    assert {c.type for c in children} <= {"text", "text_special"}
    shown = "".join(c.content for c in children)
    assert shown == f"x {text} x".replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


@pytest.mark.parametrize(
    "text",
    [
        "# h",
        "## h",
        "1. x",
        "2) x",
        "- x",
        "+ x",
        "> q",
        "===",
        "---",
        "```",
        "~~~ x",
        "<div>x</div>",
        "    x",
    ],
)
def test_escaped_text_starts_no_block(text):
    tokens = parser().parse(f"a line\n{escape(text)}\n")
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]


def test_in_a_table_pipes_stay_in_their_cell():
    row = f"| {code('a|b', in_table=True)} | {escape('c|d', in_table=True)} |"
    tokens = parser().parse(f"| x | y |\n| --- | --- |\n{row}\n")
    cells = [tokens[i + 1].children for i, t in enumerate(tokens) if t.type == "td_open"]
    assert [[(c.type, c.content) for c in cell] for cell in cells] == [
        [("code_inline", "a|b")],
        [("text", "c|d")],  # the table took its escape: one cell
    ]


@pytest.mark.parametrize("policy", ["pr", "report"])
def test_what_the_bot_posts_shows_hostile_text_as_text(fake_hub, tmp_path, policy):
    """Through ``eosfix serve`` against the stand-in Hub: the PR body it opens, or the
    discussion it writes, for a repo whose token is hostile."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from eosfix.serve.config import ServeConfig
    from tests.support.serve import SECRET, payload
    from tests.support.service import Service

    token = HOSTILE["img"] + HOSTILE["link"] + " " + HOSTILE["mention"] + HOSTILE["backticks"]
    root = hostile_repo("chatml-missing-im-end", tmp_path / "repo", {"<|im_end|>": token})
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    repo = fake_hub.add_repo("org/hostile", files)
    config = ServeConfig(
        secret=SECRET, token="hf_test", policy=policy, comment=True, state_dir=tmp_path / "s"
    )
    with Service(config) as s:
        assert s.post(payload("org/hostile", repo.head)).status_code == 202
        metrics = s.drained()
    assert metrics.get("outcome_error", 0) == 0, metrics
    (discussion,) = repo.discussions
    assert discussion.is_pull_request == (policy == "pr")
    posted = discussion.description
    assert live_from_repo(posted) == [], posted
    shown = [  # what a reader sees: each paragraph's text and code, each block's lines
        "".join(c.content for c in t.children if c.type in ("text", "text_special", "code_inline"))
        if t.type == "inline"
        else t.content
        for t in parser().parse(posted)
        if t.type in ("inline", "fence")
    ]
    assert any(token in part for part in shown), shown  # whole, as the repo has it
