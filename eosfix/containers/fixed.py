"""What a container's ``fix`` gives back to the pipeline, whatever the container.

``fix`` is the same for every container: analyse, write the plan, read the written file back,
analyse again. The analysis is the pipeline's (it is given as a function, ``analyze``): a
container knows how to write itself, not how a result is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from eosfix.decide.check import RepoCheck

if TYPE_CHECKING:
    from eosfix.containers.gguf.write import WriteResult


class Analysed(Protocol):
    """One analysis of a container: the check and the edits planned from it."""

    @property
    def check(self) -> RepoCheck: ...

    @property
    def patches(self) -> tuple[object, ...]: ...


A = TypeVar("A", bound=Analysed)


@dataclass(frozen=True)
class Fixed(Generic[A]):
    """What a ``fix`` did: the analysis it planned on; the container as written, read back
    (None: nothing was written); the files written; how a GGUF was written (``write``: in
    place, rewritten, copied); what the write says of itself (``notes``: a hard link split);
    where it wrote when not over the original (``output``)."""

    planned: A
    now: A | None = None
    written: tuple[str, ...] = ()
    write: WriteResult | None = None
    notes: tuple[str, ...] = ()
    output: Path | None = None
