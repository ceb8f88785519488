"""A model folder as a container: its repo, its stop keys, its plan, its runtime verdicts, and
``fix_folder``: the plan written under a lock and read back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eosfix.containers.fixed import A, Fixed
from eosfix.containers.folder.keys import FolderStops
from eosfix.containers.folder.plan import FilePatch, plan_patches
from eosfix.containers.folder.read import load_repo
from eosfix.containers.folder.runtime_table import runtime_table
from eosfix.containers.paths import cache_snapshot
from eosfix.core.errors import EosfixError
from eosfix.core.repo import ModelRepo
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import RuntimeTable
from eosfix.runtimes import Pins

if TYPE_CHECKING:
    from eosfix.containers.folder.write import AfterWrite


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


def fix_folder(
    root: Path,
    analyze: Callable[[Folder], A],
    *,
    replace_symlinks: bool = False,
    after_write: AfterWrite | None = None,
) -> Fixed[A]:
    """Analyze the folder and write the planned edits atomically, then read it back.

    The folder is locked for the whole read-plan-write, so two eosfix processes fixing the
    same repo never interleave. ``replace_symlinks`` is for the Hugging Face cache: the
    snapshot symlink is replaced by a regular file, the shared blob is never written.
    """
    from eosfix.containers.folder.write import write_patches  # only a fix writes
    from eosfix.core.fileio import hard_link_note, locked_dir

    with locked_dir(root):
        planned = analyze(open_folder(root))
        patches = tuple(p for p in planned.patches if isinstance(p, FilePatch))
        links = {p.file: hard_link_note(root / p.file) for p in patches}
        written = write_patches(
            root, patches, replace_symlinks=replace_symlinks, after_write=after_write
        )
        if not written:
            return Fixed(planned)
        now = analyze(open_folder(root))  # the state after writing, read back
    notes = tuple(note for name in written if (note := links.get(name)))
    return Fixed(planned, now, tuple(written), notes=notes)
