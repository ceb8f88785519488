"""tests/conformance/venvs.py's kept answers: a runner is asked once per virtualenv, runner
source and arguments; a changed runner or other arguments ask again."""

from __future__ import annotations

import os
import sys

from tests.conformance import venvs

RUNNER = """import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
with open(os.environ["ASKED"], "a") as f:
    f.write("asked\\n")
json.dump({"args": sys.argv[sys.argv.index("--out") + 2:], "version": VERSION}, open(out, "w"))
"""


def _venv(root, monkeypatch):
    """A complete virtualenv named ``vllm`` whose Python is this one."""
    monkeypatch.setenv("EOSFIX_RUNTIME_VENVS", str(root))
    target = venvs.folder("vllm")
    (target / "bin").mkdir(parents=True)
    os.symlink(sys.executable, target / "bin" / "python")
    (target / venvs.MARKER).write_text("{}\n", encoding="utf-8")
    return target


def test_a_runner_is_asked_once_per_source_and_arguments(tmp_path, monkeypatch):
    target = _venv(tmp_path / "venvs", monkeypatch)
    runner, asked = tmp_path / "defaults.py", tmp_path / "asked.txt"
    runner.write_text(RUNNER.replace("VERSION", "1"), encoding="utf-8")
    env = {**os.environ, "ASKED": str(asked)}

    first = venvs.answer("vllm", runner, ["a"], env)
    assert first == {"args": ["a"], "version": 1}
    assert venvs.answer("vllm", runner, ["a"], env) == first
    assert asked.read_text(encoding="utf-8").count("asked") == 1  # the second was read

    assert venvs.answer("vllm", runner, ["b"], env) == {"args": ["b"], "version": 1}
    runner.write_text(RUNNER.replace("VERSION", "2"), encoding="utf-8")
    assert venvs.answer("vllm", runner, ["a"], env) == {"args": ["a"], "version": 2}
    assert asked.read_text(encoding="utf-8").count("asked") == 3
    kept = sorted(p.name for p in (target / "answers").glob("*.json"))
    assert len(kept) == 3
    assert all(p.startswith("defaults-") for p in kept)
    assert not list((target / "answers").glob("*.part"))  # each moved whole into place
