"""Runtimes asked in their own virtualenv: one subprocess per runtime answers for many folders.

Each runner (tests/conformance/runners/) runs in the virtualenv ``tests.conformance.venvs``
makes for it and writes the stop set of every folder it is given, or the runtime's error for
that folder (see runners/_protocol.py). Starting vLLM or SGLang (importing them) takes 5-6 s
of CPU time, so the tests hand a runner every folder at once. The stop sets are asked anew on
every run: most folders are written by eosfix's ``fix``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.conformance import venvs

RUNNERS = Path(__file__).parent / "runners"
SCAN = 256  # every id below this is put to each runtime's own per-token stop check
REQUIRE = "EOSFIX_REQUIRE_RUNTIME_VENVS"  # set (CI): a missing virtualenv fails, never skips
# Everything is local: a runtime that would ask the Hub (config classes that fetch a default
# sub-model, for one) waits for network time-outs otherwise.
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}


@dataclass(frozen=True)
class External:
    runtime: str  # eosfix's name for it (eosfix.runtimes)
    venv: str
    runner: str


EXTERNAL: dict[str, External] = {
    e.runtime: e
    for e in (
        External("vLLM", "vllm", "vllm_stop_sets.py"),
        External("SGLang", "sglang", "sglang_stop_sets.py"),
        External("ExLlamaV2", "exllamav2", "exllamav2_stop_sets.py"),
    )
}


def required() -> bool:
    return bool(os.environ.get(REQUIRE))


@dataclass(frozen=True)
class Answer:
    """What one runner said: its runtime's version and, per folder, the set or the error."""

    version: str
    details: dict[str, str]
    sets: dict[Path, frozenset[int] | str]


def ask(runtime: str, folders: Iterable[Path]) -> Answer:
    """The stop sets ``runtime`` computes for ``folders`` (LookupError: no virtualenv)."""
    spec = EXTERNAL[runtime]
    python = venvs.require(spec.venv)
    folders = list(folders)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sets.json"
        command = [str(python), str(RUNNERS / spec.runner), "--out", str(out),
                   "--scan", str(SCAN), *map(str, folders)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=OFFLINE)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"{spec.runner} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        document = json.loads(out.read_text(encoding="utf-8"))
    sets: dict[Path, frozenset[int] | str] = {}
    for folder, result in document["sets"].items():
        sets[Path(folder)] = frozenset(result["ids"]) if "ids" in result else result["error"]
    return Answer(document["version"], document["details"], sets)
