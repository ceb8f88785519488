"""A report never contradicts itself (``tests.support.invariants``), on everything the suite checks:
every sample repo, every corpus repo, every render golden's template, the hostile templates
and the real templates kept in ``tests/analysis/cases/templates`` (the shape tables and the fuzz
regressions check it beside their cases: ``test_no_report_on_a_..._contradicts_itself``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import CORPUS, SAMPLES, corpus_cases, sample_names
from tests.support.hostile import HOSTILE
from tests.support.invariants import contradictions, golden_repo, template_repo
from tests.support.real_templates import REAL, TEMPLATES, real_repo

GOLDENS = sorted((CORPUS / "render_goldens").glob("*.json")) if CORPUS.is_dir() else []


def _holds(repo: Path, tmp_path: Path, *, fix: bool = True) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert contradictions(repo, work, fix=fix) == []


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_repo(name, tmp_path):
    _holds(SAMPLES / name, tmp_path)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus folder {CORPUS} absent")
@pytest.mark.parametrize("name", corpus_cases())
def test_every_corpus_repo(name, tmp_path):
    _holds(CORPUS / name, tmp_path)


@pytest.mark.skipif(not GOLDENS, reason=f"render goldens absent under {CORPUS}")
@pytest.mark.parametrize("path", GOLDENS, ids=[p.stem for p in GOLDENS])
def test_every_render_golden_template(path, tmp_path):
    _holds(golden_repo(json.loads(path.read_text()), tmp_path / "repo"), tmp_path)


@pytest.mark.parametrize("template", [pytest.param(t, id=i) for i, t, _ in HOSTILE])
def test_every_hostile_template(template, tmp_path):
    # A hostile template proposes nothing (its renders were refused): no fix to check after.
    _holds(template_repo(tmp_path / "repo", template, eos="<|im_end|>"), tmp_path, fix=False)


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("stop", ["eos", "none"])
def test_every_real_template(name, stop, tmp_path):
    _holds(real_repo(name, tmp_path / "repo", stop=[] if stop == "none" else None), tmp_path)


@pytest.mark.parametrize("name", sorted(REAL))
def test_every_real_template_is_the_file_its_source_names(name):
    data = (TEMPLATES / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == REAL[name]["sha256"]
    assert REAL[name]["source"]
    assert REAL[name]["model"]
