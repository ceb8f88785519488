"""The report a Hub listing's Markdown ends with: repos by verdict, by runtime, the template
families most common among the repos to fix, and those repos by downloads (a bounded list)."""

from __future__ import annotations

import io

from eosfix.batch.run import Result, Unit
from eosfix.batch.verdict import Verdict
from eosfix.render import batch as render
from eosfix.render.auditrows import audit_row
from eosfix.sources.hub.read import HubEntry


def result(name: str, downloads: int, verdict: Verdict) -> Result:
    entry = HubEntry(f"org/{name}", "main", "a" * 40, (), listed={"downloads": downloads})
    return Result(Unit(entry, verdict=verdict))


# Functions, not module constants: a Verdict kept alive by a test module would count in
# tests/batch/test_cache.py's census of live Verdicts.
def chatml() -> Verdict:
    return Verdict("fixable", terminators=(("<|im_end|>", 7),), eos=(2,), proposed=(2, 7),
                   runs_on=("vLLM", "llama.cpp"))  # fmt: skip


def llama() -> Verdict:
    return Verdict("fixable", terminators=(("<|eot_id|>", 9),), eos=(1,), proposed=(1, 9),
                   runs_on=("vLLM",), stops_early=("ollama",))  # fmt: skip


def ok() -> Verdict:
    return Verdict("ok", terminators=(("<|im_end|>", 7),), eos=(7,))


def report(*results: Result) -> str:
    digest = render.Digest()
    for r in results:
        digest.add(audit_row(r))
    out = io.StringIO()
    digest.write(out)
    return out.getvalue()


def test_counts_by_verdict_runtime_and_family_and_the_most_downloaded_first():
    text = report(
        result("a", 10, chatml()), result("b", 500, llama()), result("c", 30, chatml()),
        result("d", 9_999, ok()),
    )  # fmt: skip
    assert "| runs on | 2 |\n" in text
    assert "| ok | 1 |\n| runs on and stops early | 1 |\n" in text  # ties: by name
    assert "| vLLM | 3 | 0 |\n| llama.cpp | 2 | 0 |\n| ollama | 0 | 1 |\n" in text
    # families: most repos first, then most downloads
    assert "| `<\\|im_end\\|>` | 2 | 40 |\n| `<\\|eot_id\\|>` | 1 | 500 |\n" in text
    first = text.split("## What to fix first (by downloads)\n\n", 1)[1].splitlines()
    assert [ln.split(" | ")[0] for ln in first[2:]] == ["| `org/b`", "| `org/c`", "| `org/a`"]
    assert first[2] == "| `org/b` | 500 | runs on and stops early -> [1, 9] |"
    assert "org/d" not in text.split("## What to fix first", 1)[1]  # ok: nothing to fix


def test_the_list_to_fix_first_is_bounded_and_says_how_many_more():
    many = [result(f"m{i:03d}", i, chatml()) for i in range(render.FIRST * 3 + 5)]
    text = report(*many)
    first = text.split("## What to fix first (by downloads)\n\n", 1)[1].splitlines()
    rows = [ln for ln in first if ln.startswith("| `")]
    top = len(many) - 1
    assert [r.split(" | ")[1] for r in rows] == [str(top - i) for i in range(render.FIRST)]
    assert first[-1] == f"{len(many) - render.FIRST} more repos to fix."


def test_nothing_to_fix_shows_the_counts_only():
    text = report(result("d", 1, ok()))
    assert text.startswith("\n## Verdicts\n")
    assert "## Template families" not in text
    assert "## What to fix first" not in text
