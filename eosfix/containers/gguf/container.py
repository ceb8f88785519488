"""A GGUF file as a container: its repo, its stop keys, its plan, llama.cpp's and ollama's
verdicts (``runtime_table``), and ``fix_gguf``: the plan written, read back and verified;
``HubGguf``: a GGUF on the Hub, read by its header, judged for ``ollama run hf.co/...``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eosfix.containers.fixed import A, Fixed
from eosfix.containers.gguf.hubparams import OllamaParams
from eosfix.containers.gguf.keys import GgufStops
from eosfix.containers.gguf.plan import GgufEdit, GgufValue
from eosfix.containers.gguf.read import GgufModel, load_gguf
from eosfix.containers.gguf.runtime_table import (
    hub_runtime_table,
    ollama_stops,
    runtime_table,
    values,
)
from eosfix.core.errors import EosfixError, VerificationError, WriteError
from eosfix.core.repo import ModelRepo
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import RuntimeTable
from eosfix.runtimes import Pins

if TYPE_CHECKING:
    from eosfix.containers.gguf.write import Progress
from eosfix.runtimes.ollama.engines import OllamaStops


@dataclass(frozen=True)
class Gguf:
    """A GGUF file read from its header; ``keys`` decide llama.cpp's end-of-generation set."""

    model: GgufModel
    kind = "gguf"

    @property
    def repo(self) -> ModelRepo:
        return self.model.repo

    @property
    def keys(self) -> GgufStops:
        return GgufStops(self.model)

    def plan(self, check: RepoCheck, *, config_json: bool = False) -> tuple[GgufEdit, ...]:
        """The ``tokenizer.ggml.*`` values ``fix`` writes (config_json: no such file)."""
        plan = self.keys.plan(check.terminators, check.review, check.keep_ids).plan
        return plan.edits if plan is not None else ()

    @staticmethod
    def values(patches: Sequence[object]) -> dict[str, GgufValue]:
        """key -> the value to write, for the planned edits."""
        return values(patches)

    def ollama_stops(
        self,
        patches: Sequence[object] = (),
        version: str | None = None,
        has_projector: bool = False,
    ) -> OllamaStops:
        """What ollama ``version`` (None: the latest eosfix read) stops on for this file, with
        ``patches`` written."""
        return ollama_stops(self.model, patches, version, has_projector)

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[GgufEdit], pins: Pins | None
    ) -> RuntimeTable:
        """llama.cpp's and ollama's sets now and once the planned keys are written."""
        return runtime_table(self.model, check, patches, pins)

    def write_blocker(
        self, patches: Sequence[object], *, replace_symlinks: bool | None = None
    ) -> EosfixError | None:
        """What would stop ``fix`` writing the file itself (a symlink, an ollama blob, a
        read-only file or folder: ``check_in_place``); None when nothing does."""
        from eosfix.containers.gguf.write import check_in_place  # only asked when planning

        try:
            check_in_place(self.model.header)
        except WriteError as exc:
            return exc
        return None


@dataclass(frozen=True)
class HubGguf(Gguf):
    """A GGUF on the Hub, read by its header alone (``eosfix.containers.gguf.remote``): its
    verdicts are llama.cpp's and ``ollama run hf.co/...``'s, with the params the Hub hands
    ollama (``eosfix.containers.gguf.hubparams``). Nothing is written: a pull request can
    change the repo's params file, never the header."""

    params: OllamaParams

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[GgufEdit], pins: Pins | None
    ) -> RuntimeTable:
        return hub_runtime_table(self.model, check, patches, pins, self.params)


def open_gguf(path: Path) -> Gguf:
    """Read the GGUF's header (a later shard is read from the first)."""
    return Gguf(load_gguf(path))


def fix_gguf(
    path: Path,
    analyze: Callable[[Gguf], A],
    *,
    output: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> Fixed[A]:
    """Write the planned ``tokenizer.ggml.*`` keys into the GGUF at ``path`` (or ``output``).

    In place when every key exists with the same encoding, else a verified rewrite renamed
    over the original (or written to ``output``: for a split, every shard). Nothing is
    written when the terminators cannot be expressed; the written file is analysed again and
    must need no further fix. ``output`` with nothing to fix gets a verified copy
    (``Fixed.write.mode == "copy"``; nothing counts as written). An existing ``output``
    is refused unless ``force``, the input itself too (with ``force``, it is fixed in place).
    """
    from eosfix.containers.gguf.write import copy_gguf, in_place_or_output, write_token_ids
    from eosfix.core.fileio import hard_link_note

    container = open_gguf(path)
    header, shards = container.model.header, container.model.shards
    if output is not None:  # None: the input itself, with force
        output = in_place_or_output(header, output, force=force)
    planned = analyze(container)
    if not planned.patches:
        if output is None:
            return Fixed(planned)
        copied = copy_gguf(header, output, shards=shards, force=force, progress=progress)
        return Fixed(planned, write=copied, output=copied.path)
    values = container.values(planned.patches)
    link = hard_link_note(header.path) if output is None else None
    written = write_token_ids(
        header, values, output=output, shards=shards, force=force, progress=progress
    )
    again = analyze(open_gguf(written.path))
    proposed = set(planned.check.proposed or ())
    if again.patches or set(again.check.stop.ids or ()) != proposed:
        raise VerificationError("the written file does not stop as planned", path=written.path)
    notes = (link,) if link and written.mode == "rewrite" else ()
    return Fixed(
        planned, again, tuple(str(p) for p in written.paths), written, notes,
        written.path if output is not None else None,
    )  # fmt: skip
