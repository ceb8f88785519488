"""One unit through the pipeline: read -> analyse -> decide -> plan -> apply -> ``RepoResult``.

The same steps for every container (a model folder, a GGUF file); only reading, planning
and writing are the container's own. Batches, the Python API and the CLI all call these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eosfix.containers.folder.plan import FilePatch, plan_patches
from eosfix.containers.folder.read import load_repo
from eosfix.containers.folder.write import AfterWrite, write_patches
from eosfix.core.errors import EosfixError, VerificationError
from eosfix.core.fileio import locked_dir
from eosfix.decide.check import RepoCheck, Status, check_repo
from eosfix.sources.target import cache_snapshot, is_gguf, resolve

if TYPE_CHECKING:
    from eosfix.containers.gguf.write import Progress


@dataclass(frozen=True)
class RepoResult:
    """One repo (or GGUF file) checked or fixed.

    ``check`` is the repo as it is now: after ``fix`` wrote files, it is read again from disk,
    and ``before`` is the check that planned the writes (None when nothing was written).
    ``patches`` are the edits planned (``check``, ``fix --diff``) or written (``fix``).
    """

    path: Path
    check: RepoCheck | None = None
    patches: tuple[FilePatch, ...] = ()
    written: tuple[str, ...] = ()
    error: EosfixError | None = None
    label: str | None = None  # how to name the repo in output (repo id, cache revision...)
    extra: dict[str, object] = field(default_factory=dict)
    before: RepoCheck | None = None

    @property
    def status(self) -> Status:
        return Status.ERROR if self.check is None else self.check.status

    @property
    def name(self) -> str:
        return self.label or str(self.path)


def _analyze(
    path: Path, config_json: bool, keep_ids: Iterable[int] = ()
) -> tuple[RepoCheck, tuple[FilePatch, ...]]:
    check = check_repo(load_repo(path), keep_ids=keep_ids, config_json=config_json)
    return check, plan_patches(check, config_json=config_json)


def check(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    keep_ids: Iterable[int] = (),
) -> RepoResult:
    """Analyze a model folder (or one of its config files, or a GGUF file) and plan the fix
    without writing anything.

    ``keep_ids``: stop ids the fix must keep even where they cut a reply (``--keep-id``).
    """
    try:
        root = resolve(path)
    except EosfixError as exc:
        return RepoResult(Path(path), error=exc, label=label)
    if is_gguf(root):
        return _check_gguf(root, label, keep_ids)
    return check_folder(root, config_json=config_json, label=label, keep_ids=keep_ids)


def check_folder(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    keep_ids: Iterable[int] = (),
) -> RepoResult:
    """Analyze a folder as it is, whatever it holds (cache snapshots, the Hub store): a folder
    without tokenizer files is a repo without a chat template here, not an error."""
    root = Path(path)
    try:
        result, patches = _analyze(root, config_json, keep_ids)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    return RepoResult(root, result, patches, label=label)


def fix(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    replace_symlinks: bool = False,
    after_write: AfterWrite | None = None,
    keep_ids: Iterable[int] = (),
) -> RepoResult:
    """Analyze and write the planned edits atomically; returns which files changed.

    The folder is locked for the whole read-plan-write, so two eosfix processes fixing the
    same repo never interleave. ``replace_symlinks`` is for the Hugging Face cache: the
    snapshot symlink is replaced by a regular file, the shared blob is never written.
    """
    try:
        root = resolve(path)
    except EosfixError as exc:
        return RepoResult(Path(path), error=exc, label=label)
    if is_gguf(root):
        return fix_gguf(root, label=label, keep_ids=keep_ids)
    try:
        with locked_dir(root):
            result, patches = _analyze(root, config_json, keep_ids)
            written = write_patches(
                root,
                patches,
                replace_symlinks=replace_symlinks,
                after_write=after_write,
                safe_command=_snapshot_fix_command,
            )
            if not written:
                return RepoResult(root, result, patches, label=label)
            now, _ = _analyze(root, config_json, keep_ids)  # the state after writing, read back
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    return RepoResult(root, now, patches, tuple(written), label=label, before=result)


def _snapshot_fix_command(folder: Path) -> str | None:
    """The command that fixes a cache snapshot safely (None: ``folder`` is not one)."""
    snapshot = cache_snapshot(folder)
    return None if snapshot is None else snapshot.fix_command


def _check_gguf(path: Path, label: str | None, keep_ids: Iterable[int] = ()) -> RepoResult:
    from eosfix.containers.gguf.plan import check_gguf
    from eosfix.containers.gguf.read import load_gguf

    try:
        result = check_gguf(load_gguf(path), keep_ids=keep_ids)
    except EosfixError as exc:
        return RepoResult(path, error=exc, label=label)
    return RepoResult(path, result, label=label)


def fix_gguf(
    path: str | Path,
    *,
    output: str | Path | None = None,
    label: str | None = None,
    progress: Progress | None = None,
    keep_ids: Iterable[int] = (),
) -> RepoResult:
    """Write the planned ``tokenizer.ggml.*_token_id`` keys into a GGUF (or ``output``).

    In place when every key exists as UINT32, else a verified rewrite renamed over the
    original (or written to ``output``). Nothing is written when the terminators cannot be
    expressed; the written file is checked again and must need no further fix.
    """
    from eosfix.containers.gguf.plan import check_gguf
    from eosfix.containers.gguf.read import load_gguf
    from eosfix.containers.gguf.write import write_token_ids

    root = Path(path)
    try:
        result = check_gguf(load_gguf(root), keep_ids=keep_ids)
        if result.plan is None or result.model is None:
            return RepoResult(root, result, label=label)
        values = {e.key: e.new for e in result.plan.edits}
        out = None if output is None else Path(output)
        written = write_token_ids(result.model.header, values, output=out, progress=progress)
        again = check_gguf(load_gguf(written.path), keep_ids=keep_ids)
        if again.plan is not None or set(again.stop.ids or ()) != set(result.proposed or ()):
            raise VerificationError("the written file does not stop as planned", path=written.path)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    # ``check`` is the file as written (``output`` when given), ``before`` the one planned on
    extra: dict[str, object] = {
        "write": {
            "path": str(written.path),
            "mode": written.mode,
            "bytes": written.bytes_written,
            "data_sha256": written.data_sha256,
        },
    }
    return RepoResult(
        root, again, (), (str(written.path),), label=label, extra=extra, before=result
    )
