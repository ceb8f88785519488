"""A model folder as a container: its repo, its stop keys, its plan, its runtime verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eosfix.containers.folder.plan import FilePatch, plan_patches
from eosfix.containers.folder.read import load_repo
from eosfix.containers.folder.runtimes import runtime_table
from eosfix.containers.folder.stops import FolderStops
from eosfix.containers.target import cache_snapshot
from eosfix.core.errors import EosfixError
from eosfix.core.repo import ModelRepo
from eosfix.decide.check import RepoCheck, check
from eosfix.decide.verdicts import RuntimeTable
from eosfix.runtimes import Pins


@dataclass(frozen=True)
class Folder:
    """A folder read into a ``ModelRepo``; ``keys`` decide its stop ids."""

    repo: ModelRepo
    keys: FolderStops = field(default_factory=FolderStops)
    kind = "folder"

    def plan(self, check: RepoCheck, *, config_json: bool = False) -> tuple[FilePatch, ...]:
        """The byte-minimal JSON edits ``fix`` writes."""
        return plan_patches(check, config_json=config_json)

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[FilePatch], pins: Pins | None
    ) -> RuntimeTable:
        return runtime_table(check, patches, pins)

    def write_blocker(
        self, patches: Sequence[FilePatch], *, replace_symlinks: bool | None = None
    ) -> EosfixError | None:
        """What would stop the writer (``write_blocker``); ``replace_symlinks`` None: as the
        command ``check`` recommends writes (``eosfix cache --fix`` in a cache snapshot)."""
        from eosfix.containers.folder.write import write_blocker  # only asked when planning

        root = self.repo.root
        replace = cache_snapshot(root) is not None if replace_symlinks is None else replace_symlinks
        return write_blocker(root, patches, replace_symlinks=replace)


def open_folder(path: Path, *, model: bool = True) -> Folder:
    """Read every stop-relevant file of the folder (``RepoLoadError`` when one is invalid).
    ``model``: False when its source knows the repo holds no model (tokenizer files only)."""
    return Folder(load_repo(path), FolderStops(model))


def check_repo(
    repo: ModelRepo, *, keep_ids: Iterable[int] = (), config_json: bool = False, model: bool = True
) -> RepoCheck:
    """The one check of a folder already read (tests, fuzzing, scripts holding a ModelRepo)."""
    return check(repo, FolderStops(model), keep_ids=keep_ids, config_json=config_json)
