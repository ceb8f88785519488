"""What the strings a user gives stand for, together: each parsed (``eosfix.targets.parse``),
a folder of GGUF files opened into what it holds, each unit once.

A folder as given, plus every ``*.gguf`` under it (a llama.cpp or LM Studio models folder): a
folder holding GGUFs stands for its GGUFs and every model folder under it (none is skipped, so
a broken one fails the run). A string that names nothing eosfix checks is ``Refused`` with the
reason, after the others (a README.md passed with its folder's config.json, as pre-commit
does, is left out: its folder is checked anyway); a Hub spelling that names no repo is refused
in its place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from eosfix.containers.paths import is_model_folder, model_folders_below
from eosfix.core.errors import NotChecked
from eosfix.targets.parse import (
    LocalFolder,
    LocalGguf,
    OllamaTarget,
    Target,
    parse,
    spelled_for_the_hub,
)


class Refused(NamedTuple):
    """A string that names nothing eosfix checks, and why (the error names the string)."""

    given: str
    error: NotChecked

    @property
    def shown(self) -> str:
        """How output names it: as given; a blank text as its error names it (``''``), never
        as a path, which would read as the current folder."""
        return self.given if self.given.strip() else self.error.path or repr(self.given)


Unit = Target | Refused


def open_targets(texts: Sequence[str], *, local: bool = True) -> list[Unit]:
    """What to check, one unit per model folder, GGUF file or Hub repo, every string
    accounted for (see the module)."""
    out: dict[object, Unit] = {}
    later: list[Refused] = []
    for raw in texts:
        try:
            target = parse(raw, local=local)
        except NotChecked as exc:
            refusal = Refused(raw, exc)
            if spelled_for_the_hub(raw):
                out[refusal] = refusal
            else:
                later.append(refusal)
            continue
        for unit in _opened(target):
            out.setdefault(_key(unit), unit)
    for refusal in later:  # e.g. a README.md passed with its folder's config.json
        path = Path(refusal.given)
        if not (os.path.lexists(path) and ("path", path.parent) in out):
            out[refusal] = refusal
    return list(out.values())


def open_store(store: Path) -> list[OllamaTarget]:
    """Every model of an ollama store, by its manifest, sorted (``RepoLoadError`` when it is
    no store)."""
    from eosfix.containers.ollama.read import iter_manifests

    return [OllamaTarget(str(m), store, m) for m in iter_manifests(store)]


def _key(unit: Unit) -> object:
    """Units are the same when they check the same thing: a local one by its path."""
    if isinstance(unit, (LocalFolder, LocalGguf)):
        return ("path", unit.path)
    return unit


def _opened(target: Target) -> list[Target]:
    if not isinstance(target, LocalFolder) or not Path(target.given).is_dir():
        return [target]
    folder = target.path
    ggufs = _ggufs_under(folder)
    units: list[Target] = [target] if not ggufs or is_model_folder(folder) else []
    below = model_folders_below(folder) if ggufs else []
    for path in sorted([*below, *ggufs]):
        units.append(LocalGguf(str(path), path) if path in ggufs else LocalFolder(str(path), path))
    return units


def _ggufs_under(folder: Path) -> list[Path]:
    """``iter_gguf_files(folder)``; the GGUF reader is imported only when the folder holds a
    ``*.gguf`` at all (a check of a model folder does not import it)."""
    if next(folder.rglob("*.gguf"), None) is None:
        return []
    from eosfix.containers.gguf.read import iter_gguf_files

    return list(iter_gguf_files(folder))
