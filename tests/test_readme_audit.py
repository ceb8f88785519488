"""The README's audit transcripts are what eosfix prints (tests/readme_audit.py makes them
against the stand-in Hub: interrupted, resumed, rate-limited, pull requests)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.readme_audit import VOLATILE, transcripts

pytestmark = pytest.mark.slow


def _masked(text: str) -> str:
    return VOLATILE.sub("N", text)


def test_readme_shows_real_audit_output():
    readme = _masked((ROOT / "README.md").read_text())
    blocks = transcripts()
    assert set(blocks) == {"interrupted", "resumed", "rate_limited", "pull_requests"}
    for name, text in blocks.items():
        assert f"```text\n{_masked(text)}\n```" in readme, (
            f"README's {name} transcript differs from `python -m tests.readme_audit`:\n{text}"
        )
    # what the section promises is in what it shows
    assert "interrupted: 4 repos checked" in blocks["interrupted"]
    assert "unchanged since the last run (--state)" in blocks["resumed"]
    assert re.search(r"\d+ rate-limited \(429\)", blocks["rate_limited"])
