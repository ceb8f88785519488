"""The real chat templates kept in ``tests/analysis/cases/templates`` (``sources.json`` names where
each was taken from), as model folders."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tests.support.invariants import template_repo

TEMPLATES = Path(__file__).resolve().parents[1] / "analysis" / "cases" / "templates"
REAL: dict[str, dict] = json.loads((TEMPLATES / "sources.json").read_text())["templates"]


def real_repo(name: str, root: Path, *, stop: Sequence[str] | None = None) -> Path:
    """A model folder of the real template ``name``: its control tokens as special added
    tokens (ids in ``sources.json`` order, from ``tests.support.invariants.FIRST_ID``), its eos and
    bos; generation_config.json stops on ``stop`` (default: the eos)."""
    entry = REAL[name]
    return template_repo(
        root,
        (TEMPLATES / name).read_text(),
        entry["tokens"],
        eos=entry["eos"],
        bos=entry["bos"],
        stop=stop,
    )


def token_id(name: str, token: str) -> int:
    """The id ``real_repo`` gives ``token`` in the template ``name``'s folder."""
    from tests.support.invariants import FIRST_ID

    entry = REAL[name]
    names = list(dict.fromkeys(t for t in (entry["eos"], entry["bos"], *entry["tokens"]) if t))
    return FIRST_ID + names.index(token)
