"""The Hub's own JavaScript packages, executed: ``tests/conformance/ollama_hub/`` pins them
(package.json, package-lock.json; ``npm ci`` there installs them, as .ci/run does) and
``run.js`` (eosfix's driver) answers one JSON request per call, with the clock pinned.

- ``@huggingface/ollama-utils`` 0.0.18: ``convertGGUFTemplateToOllama``, the conversion the
  Hub applies to a GGUF's chat template for ``ollama run hf.co/...``;
- ``@huggingface/tasks`` 0.21.54: ``parseGGUFQuantLabel``, a GGUF file name's quant label.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).parent / "ollama_hub"
FAKE_NOW = "2025-07-10T12:00:00Z"


def missing() -> str | None:
    """Why the packages cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (Debian: apt-get install nodejs npm)"
    if not (FOLDER / "node_modules" / "@huggingface" / "ollama-utils").is_dir():
        return f"the Hub's packages are not installed: npm ci --ignore-scripts in {FOLDER}"
    return None


def ask(request: dict[str, Any], *, now: str = FAKE_NOW) -> dict[str, Any]:
    """``run.js``'s answer to ``request`` (see it); RuntimeError when node fails."""
    proc = subprocess.run(
        ["node", "run.js"],
        cwd=FOLDER,
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": _path(), "EOSFIX_FAKE_NOW": now},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"node run.js failed: {proc.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def _path() -> str:
    node = shutil.which("node")
    return str(Path(node).parent) if node else "/usr/bin"
