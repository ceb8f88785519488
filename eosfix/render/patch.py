"""``fix --diff``: the planned file edits as one patch that ``git apply`` (or ``patch -p1``)
takes from the current folder, and the GGUF key edits that no text patch can carry.

The patch holds every text file edit of every repo, each file named relative to the current
folder, files created from ``/dev/null``, like ``git diff``. A GGUF's edits change 4-byte
values in a binary header (or rewrite it): a text diff cannot express them, so they are
listed apart, for stderr, and the patch stays appliable (issue 23).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eosfix.containers.folder.plan import FilePatch
from eosfix.result import RepoResult

GGUF_NOT_IN_PATCH = (
    "not in the patch: a GGUF's metadata is binary; `eosfix fix {path}` writes these key edits"
)


def _folder_name(folder: Path, cwd: Path) -> str:
    """``folder`` relative to ``cwd``, as the patch names it (``""`` for ``cwd`` itself)."""
    rel = Path(os.path.relpath(folder.absolute(), cwd.absolute())).as_posix()
    return "" if rel == "." else rel


def render_patch(results: Sequence[RepoResult], *, cwd: Path) -> str:
    """Every planned text file edit of ``results`` as one unified diff, paths relative to
    ``cwd`` (``""`` when nothing changes)."""
    parts = [
        p.diff(_folder_name(r.path, cwd))
        for r in results
        if r.error is None
        for p in r.patches
        if isinstance(p, FilePatch)
    ]
    return "".join(parts)


def render_binary_edits(results: Sequence[RepoResult]) -> str:
    """The edits the patch leaves out (a GGUF's keys), each GGUF's block after a line saying
    why (``""`` when there are none)."""
    blocks = []
    for r in results:
        edits = [p for p in r.patches if not isinstance(p, FilePatch)]
        if r.error is None and edits:
            lines = [f"{r.name}: {GGUF_NOT_IN_PATCH.format(path=r.name)}"]
            lines += [e.diff(r.path.name).rstrip("\n") for e in edits]
            blocks.append("\n".join(lines))
    return "\n".join(blocks)
