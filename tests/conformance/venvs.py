"""The virtualenvs the runtimes that cannot share eosfix's run in, made from committed locks.

vLLM 0.33.0 and SGLang 0.5.23 need transformers 5.19.0 (eosfix's tests pin 5.24.0) and a
torch/torchvision pair that imports on a CPU; ExLlamaV2 needs nothing of eosfix's. Each gets a virtualenv of its
own, installed from ``locks/NAME.txt`` with ``pip install --no-deps``: every package pinned,
and only those the stop-set code imports (found by running it), not the runtime's whole
dependency tree (vLLM's would be 9.4 GB of CUDA kernels).

A virtualenv lives in ``$EOSFIX_RUNTIME_VENVS`` (default ``~/.cache/eosfix/runtime-venvs``)
under a name that hashes its lock, so a changed lock makes a new one; it counts only once its
``complete`` marker is written, after every install step succeeded. What a runner answers from
nothing but the pinned runtime (``answer``: no file a test writes, no eosfix code) is kept in
the virtualenv's ``answers/``, asked once per runner source and arguments.

    python -m tests.conformance.venvs create [NAME...]   # all when none is named
    python -m tests.conformance.venvs status
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.testcache import locked

LOCKS = Path(__file__).parent / "locks"
MARKER = "complete"


@dataclass(frozen=True)
class Venv:
    name: str
    runtimes: str  # what runs in it, for people

    @property
    def lock(self) -> Path:
        return LOCKS / f"{self.name}.txt"

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.lock.read_bytes())
        digest.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
        return f"{self.name}-{digest.hexdigest()[:12]}"


VENVS: dict[str, Venv] = {
    v.name: v
    for v in (
        Venv("vllm", "vLLM 0.33.0"),
        Venv("sglang", "SGLang 0.5.23"),
        Venv("exllamav2", "ExLlamaV2 0.3.2"),
    )
}


def root() -> Path:
    configured = os.environ.get("EOSFIX_RUNTIME_VENVS")
    base = Path(configured) if configured else Path.home() / ".cache" / "eosfix" / "runtime-venvs"
    return base.expanduser()


def folder(name: str) -> Path:
    return root() / VENVS[name].key


def python(name: str) -> Path | None:
    """The virtualenv's Python, if the virtualenv is complete."""
    path = folder(name)
    return path / "bin" / "python" if (path / MARKER).is_file() else None


def require(name: str) -> Path:
    found = python(name)
    if found is None:
        raise LookupError(
            f"no {name} virtualenv in {root()}: run python -m tests.conformance.venvs create {name}"
        )
    return found


def answer(name: str, runner: Path, args: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """The JSON document ``runner`` writes when the virtualenv's Python runs it
    (``RUNNER --out FILE ARGS...``), asked once per virtualenv (its lock), runner source and
    arguments, under a file lock (pytest -n: one process asks, the others wait and read).
    Only for an answer that depends on those alone (LookupError: no virtualenv)."""
    python = require(name)
    digest = hashlib.sha256(runner.read_bytes())
    digest.update("\0".join(args).encode())
    kept = folder(name) / "answers" / f"{runner.stem}-{digest.hexdigest()[:12]}.json"
    kept.parent.mkdir(exist_ok=True)
    with locked(kept.with_suffix(".lock")):
        if not kept.is_file():
            part = kept.with_suffix(".part")
            subprocess.run(
                [str(python), str(runner), "--out", str(part), *args],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(env),
            )  # fmt: skip
            part.replace(kept)  # whole or not at all
    document: dict[str, Any] = json.loads(kept.read_text(encoding="utf-8"))
    return document


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def create(name: str) -> dict[str, object]:
    """Make the virtualenv (nothing when it is complete already); what it took."""
    target = folder(name)
    if (target / MARKER).is_file():
        return json.loads((target / MARKER).read_text(encoding="utf-8"))
    shutil.rmtree(target, ignore_errors=True)  # an earlier attempt that did not complete
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]  # fmt: skip
    subprocess.run([*pip, "--no-deps", "-r", str(VENVS[name].lock)], check=True)
    seconds = round(time.monotonic() - start)
    info = {"venv": name, "lock": VENVS[name].key, "seconds": seconds, "bytes": _size(target)}
    (target / MARKER).write_text(json.dumps(info) + "\n", encoding="utf-8")
    return info


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("create", "status"):
        print(__doc__, file=sys.stderr)
        return 2
    names = argv[1:] or list(VENVS)
    unknown = [n for n in names if n not in VENVS]
    if unknown:
        print(f"unknown virtualenv {unknown}; known: {list(VENVS)}", file=sys.stderr)
        return 2
    for name in names:
        if argv[0] == "status":
            found = python(name)
            print(f"{name}: {found.parent.parent if found else 'absent'} ({VENVS[name].runtimes})")
            continue
        info = create(name)
        size = int(info["bytes"]) / 2**30  # type: ignore[call-overload]
        print(f"{name}: {folder(name)}, {size:.1f} GiB, made in {info['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
