"""The Python API: what a conversion script calls in-process.

    >>> import eosfix.api as eosfix
    >>> result = eosfix.check("./my-model")          # read only
    >>> result.status.value, [t.content for t in result.check.id_terminators]
    ('fixable', ['<|im_end|>'])
    >>> eosfix.fix("./my-model").written             # atomic, minimal, idempotent
    ('generation_config.json',)

Every function returns a ``RepoResult``; expected input problems are captured in
``result.error`` (an ``EosfixError``) instead of raised, so a batch can go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eosfix.check import RepoCheck, Status, check_repo
from eosfix.errors import EosfixError, VerificationError
from eosfix.fileio import check_writable, locked_dir, write_atomic, write_if_changed
from eosfix.patch import FilePatch, plan_patches
from eosfix.sources.folder import load_repo

if TYPE_CHECKING:
    from eosfix.sources.gguf_write import Progress


@dataclass(frozen=True)
class RepoResult:
    path: Path
    check: RepoCheck | None = None
    patches: tuple[FilePatch, ...] = ()
    written: tuple[str, ...] = ()
    error: EosfixError | None = None
    label: str | None = None  # how to name the repo in output (repo id, cache revision...)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def status(self) -> Status | None:
        return None if self.check is None else self.check.status

    @property
    def name(self) -> str:
        return self.label or str(self.path)


def _analyze(path: Path, config_json: bool) -> tuple[RepoCheck, tuple[FilePatch, ...]]:
    check = check_repo(load_repo(path))
    return check, plan_patches(check, config_json=config_json)


def _write_all(root: Path, patches: tuple[FilePatch, ...], replace_symlinks: bool) -> list[str]:
    """Write every patch, or none: an unforeseen failure (disk full, I/O error) on a later
    file puts the earlier ones back as they were (a created file is removed)."""
    written: list[FilePatch] = []
    try:
        for patch in patches:
            target = root / patch.file
            if write_if_changed(target, patch.new_text, allow_symlink_replace=replace_symlinks):
                written.append(patch)
    except EosfixError:
        for done in reversed(written):
            target = root / done.file
            if done.old_text is None:
                target.unlink(missing_ok=True)
            else:  # a cache snapshot link comes back as a regular file with the same bytes
                write_atomic(target, done.old_text.encode("utf-8"), allow_symlink_replace=True)
        raise
    return [p.file for p in written]


def is_gguf(path: Path) -> bool:
    """A GGUF file (checked as llama.cpp loads it), as opposed to a model folder."""
    return path.suffix.lower() == ".gguf" and not path.is_dir()


def check(path: str | Path, *, config_json: bool = False, label: str | None = None) -> RepoResult:
    """Analyze the folder (or GGUF file) and plan the fix without writing anything."""
    root = Path(path)
    if is_gguf(root):
        return _check_gguf(root, label)
    try:
        result, patches = _analyze(root, config_json)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    return RepoResult(root, result, patches, label=label)


def fix(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    replace_symlinks: bool = False,
    after_write: Callable[[Path, FilePatch], None] | None = None,
) -> RepoResult:
    """Analyze and write the planned edits atomically; returns which files changed.

    The folder is locked for the whole read-plan-write, so two eosfix processes fixing the
    same repo never interleave. ``replace_symlinks`` is for the Hugging Face cache: the
    snapshot symlink is replaced by a regular file, the shared blob is never written.
    """
    root = Path(path)
    if is_gguf(root):
        return fix_gguf(root, label=label)
    try:
        with locked_dir(root):
            result, patches = _analyze(root, config_json)
            for patch in patches:  # all or nothing: refuse before writing the first file
                check_writable(root / patch.file, allow_symlink_replace=replace_symlinks)
            written = _write_all(root, patches, replace_symlinks)
            for patch in patches:
                if after_write is not None and patch.file in written:
                    after_write(root / patch.file, patch)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    return RepoResult(root, result, patches, tuple(written), label=label)


def _check_gguf(path: Path, label: str | None) -> RepoResult:
    from eosfix.ggufplan import check_gguf
    from eosfix.sources.gguf import load_gguf

    try:
        result = check_gguf(load_gguf(path))
    except EosfixError as exc:
        return RepoResult(path, error=exc, label=label)
    return RepoResult(path, result, label=label)


def fix_gguf(
    path: str | Path,
    *,
    output: str | Path | None = None,
    label: str | None = None,
    progress: Progress | None = None,
) -> RepoResult:
    """Write the planned ``tokenizer.ggml.*_token_id`` keys into a GGUF (or ``output``).

    In place when every key exists as UINT32, else a verified rewrite renamed over the
    original (or written to ``output``). Nothing is written when the terminators cannot be
    expressed; the written file is checked again and must need no further fix.
    """
    from eosfix.ggufplan import check_gguf
    from eosfix.sources.gguf import load_gguf
    from eosfix.sources.gguf_write import write_token_ids

    root = Path(path)
    try:
        result = check_gguf(load_gguf(root))
        if result.plan is None or result.model is None:
            return RepoResult(root, result, label=label)
        values = {e.key: e.new for e in result.plan.edits}
        out = None if output is None else Path(output)
        written = write_token_ids(result.model.header, values, output=out, progress=progress)
        again = check_gguf(load_gguf(written.path))
        if again.plan is not None or set(again.stop.ids or ()) != set(result.proposed or ()):
            raise VerificationError("the written file does not stop as planned", path=written.path)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=label)
    extra: dict[str, object] = {
        "write": {
            "path": str(written.path),
            "mode": written.mode,
            "bytes": written.bytes_written,
            "data_sha256": written.data_sha256,
        },
    }
    return RepoResult(root, result, (), (str(written.path),), label=label, extra=extra)
