"""The renderer reproduces what transformers renders, byte for byte (render_goldens)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from eosfix.analysis.template import make_environment
from tests.conftest import CORPUS

GOLDENS = CORPUS / "render_goldens"
CASES = sorted(GOLDENS.glob("*.json")) if GOLDENS.is_dir() else []
# The one case whose expected text comes from the JavaScript renderer: Python's
# `{{ tools|string }}` is a repr with single quotes, JavaScript's is JSON.
JS_ONLY = "hfjs-e2e--custom--MadeAgents--Hammer2.1.json"


def _render(case: dict) -> str:
    now = datetime.fromisoformat(case["mock_system_time"].replace("Z", "+00:00"))
    env = make_environment(now=lambda: now)
    return env.from_string(case["template"]).render(**case["context"])


@pytest.mark.skipif(not CASES, reason=f"render goldens absent at {GOLDENS}")
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_render_matches_golden(path):
    case = json.loads(path.read_text())
    out = _render(case)
    if path.name == JS_ONLY:
        assert out != case["expected"]  # documents what Python gives:
        assert "'type': 'function'" in out  # a Python repr where JS writes JSON
    else:
        assert out == case["expected"]
