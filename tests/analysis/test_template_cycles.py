"""A render that fails (a probe the template cannot take, a bound a hostile template hits)
leaves no reference cycle through the frames of the check: such a cycle holds every frame of
the call and all their callers hold (the repo, a GGUF's token list) until the garbage
collector happens to run, which in a server holding few objects is long after the check."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from eosfix import api
from eosfix.analysis import terminators
from eosfix.core.repo import ModelRepo
from tests.support.ggufs import chatml
from tests.support.hostile import HOSTILE, hostile_repo


def left_for_the_collector(target: Path) -> list[object]:
    """What a fresh check of ``target`` (no memo) leaves that only the collector frees."""
    terminators._memo_analysis.cache_clear()
    terminators._read_templates.cache_clear()
    gc.collect()
    gc.disable()
    try:
        result = api.check(target)
        assert result.check is not None, result.error
        del result
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _frames_and_repos(garbage: list[object]) -> list[str]:
    return [
        type(o).__name__ for o in garbage if type(o).__name__ == "frame" or isinstance(o, ModelRepo)
    ]


def test_a_gguf_whose_template_fails_some_probes_leaves_its_check_to_no_collector(tmp_path):
    """The ChatML template of the test GGUFs cannot render a tool call (content None): jinja2
    raises, and rewrites the traceback through frames that hold the error."""
    path = chatml(tmp_path / "m.gguf")
    assert not _frames_and_repos(left_for_the_collector(path))


@pytest.mark.parametrize(
    ("name", "template"), [(n, t) for n, t, _ in HOSTILE[:4]], ids=[n for n, _, _ in HOSTILE[:4]]
)
def test_a_template_refused_by_a_bound_leaves_its_check_to_no_collector(tmp_path, name, template):
    """The refusal is kept for the rest of the analysis (later renders refused at once): its
    traceback must not hold the frame that keeps it."""
    root = hostile_repo(tmp_path, name, template)
    assert not _frames_and_repos(left_for_the_collector(root))
