"""Runtimes asked in their own virtualenv: one subprocess per runtime answers for many folders.

Each runner (tests/conformance/runners/) runs in the virtualenv ``tests.conformance.venvs``
makes for it and writes the stop set of every folder it is given, or the runtime's error for
that folder (see runners/_protocol.py). Starting vLLM or SGLang (importing them) takes 5-6 s
of CPU time, so one runner process answers every folder: ``ask`` hands it every folder at once
(a table of them all), ``serve`` keeps it running and asks for each folder when a test reads it,
so a test waits for its own folders (and the first one for the import). The stop sets are asked
anew on every run: most folders are written by eosfix's ``fix``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.conformance import venvs
from tests.support.processes import LineChild

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
    sets: Mapping[Path, frozenset[int] | str]


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
    sets = {Path(folder): _result(result) for folder, result in document["sets"].items()}
    return Answer(document["version"], document["details"], sets)


def _result(result: dict[str, object]) -> frozenset[int] | str:
    return frozenset(result["ids"]) if "ids" in result else str(result["error"])  # type: ignore[call-overload]


class Served(Mapping[Path, "frozenset[int] | str"]):
    """A runner kept running (``--serve``): each folder's answer asked the first time it is
    read, then kept. ``close`` ends the runner."""

    def __init__(self, spec: External) -> None:
        python = venvs.require(spec.venv)
        command = [str(python), str(RUNNERS / spec.runner), "--serve", "--scan", str(SCAN)]
        self._name, self._child = spec.runner, LineChild(command, env=OFFLINE)
        self._known: dict[Path, frozenset[int] | str] = {}
        self.header = self._document(self._child.read())

    def _document(self, line: str | None) -> dict[str, object]:
        if line is None:
            code = self._child.proc.wait()
            raise RuntimeError(f"{self._name} failed ({code}):\n{self._child.said()}")
        document: dict[str, object] = json.loads(line)
        return document

    def __getitem__(self, folder: Path) -> frozenset[int] | str:
        if folder not in self._known:
            document = self._document(self._child.ask(str(folder)))
            assert document["folder"] == str(folder), document
            self._known[folder] = _result(document)
        return self._known[folder]

    def __iter__(self) -> Iterator[Path]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)

    def close(self) -> None:
        self._child.close()


def serve(runtime: str) -> tuple[Answer, Served]:
    """``runtime``'s runner kept running, its answers asked folder by folder as they are
    read (LookupError: no virtualenv)."""
    served = Served(EXTERNAL[runtime])
    version, details = served.header["version"], served.header["details"]
    return Answer(str(version), dict(details), served), served  # type: ignore[call-overload]
