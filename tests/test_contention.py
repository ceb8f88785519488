"""The same repo gets the same verdict on a busy machine.

Every sample repo, every hostile template of tests/analysis/test_template.py and every corpus case
(``$EOSFIX_CORPUS``; skipped when absent) is checked twice in a fresh process: once as the
machine is, once with three busy processes per core spinning (tests/support/contention.py). The
``--format json`` outputs must be byte-identical: the render budgets are counts, and the
wall-clock backstop sits far beyond what any of them needs. Nothing in that output is
legitimately variable (no time, no load, no temp path: the same folders are checked twice);
were a template to write today's date into a verdict, the two runs straddling midnight would
be the one exception, and none does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, ROOT, SAMPLES, corpus_cases, sample_names
from tests.support.cachebuilder import CacheBuilder
from tests.support.contention import cpu_contention
from tests.support.hostile import HOSTILE, hostile_repo

pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
PER_CORE = 3  # busy processes per core: eosfix gets a quarter of a core, or less


def _eosfix(*args: str | Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "eosfix", *map(str, args)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout.startswith("{"), proc.stderr
    return proc.stdout


def _hostile(tmp_path: Path) -> list[Path]:
    return [hostile_repo(tmp_path, name, template) for name, template, _ in HOSTILE]


def _targets(kind: str, tmp_path: Path) -> list[Path]:
    if kind == "samples":
        return [SAMPLES / name for name in sample_names()] + _hostile(tmp_path)
    cases = corpus_cases()
    if not cases:
        pytest.skip(f"corpus absent at {CORPUS} (set EOSFIX_CORPUS)")
    return [CORPUS / name for name in cases]


def _same_when_busy(*args: str | Path) -> str:
    idle = _eosfix(*args)
    with cpu_contention(per_core=PER_CORE):
        busy = _eosfix(*args)
    assert busy == idle
    assert "EOS103" not in busy  # the backstop never fired: the counts decided
    return busy


@pytest.mark.parametrize("kind", ["samples", "corpus"])
def test_check_verdicts_under_cpu_contention_equal_idle_ones(kind, tmp_path):
    targets = _targets(kind, tmp_path)
    out = _same_when_busy("check", "--format", "json", *targets)
    assert out.count('"status"') >= len(targets)
    if kind == "samples":
        assert "EOS101" in out  # the hostile templates were stopped, by a count


@pytest.mark.parametrize("kind", ["samples", "corpus"])
def test_batch_verdicts_under_cpu_contention_equal_idle_ones(kind, tmp_path):
    """The batch engine (worker processes, shared analyses) over the same repos as a HF cache:
    the samples with the hostile templates, and the corpus, each its own cache."""
    b = CacheBuilder(tmp_path / "hub")
    (tmp_path / "hostile").mkdir()
    folders = _targets(kind, tmp_path / "hostile")
    for folder in folders:
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and "fixed" not in p.relative_to(folder).parts
        }
        b.add_revision(f"{folder.parent.name}/{folder.name}", files)
    out = _same_when_busy("cache", "--cache-dir", b.root, "--format", "json")  # 2 workers
    assert out.count('"repo_id"') == len(folders)
