"""What one target gave: its results, and the lines a person reads beside them."""

from __future__ import annotations

from typing import NamedTuple

from eosfix.decide.check import Status
from eosfix.result import RepoResult

_WORST_FIRST = (Status.PROBLEMS, Status.FIXABLE, Status.ERROR, Status.OK, Status.NO_TEMPLATE,
                Status.NOT_A_MODEL)  # fmt: skip


class Checked(NamedTuple):
    """What a target gave: its results (one, or for a GGUF repo on the Hub one per group of
    alike files); ``summary``: what reading a GGUF repo's headers cost; ``note``: a Hub repo
    checked by its small files that also holds GGUF files says how to check those. The lines
    are for a person (stderr, the page), never part of a result."""

    results: tuple[RepoResult, ...]
    summary: str | None = None
    note: str | None = None

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(line for line in (self.summary, self.note) if line)

    @property
    def main(self) -> RepoResult:
        """The one result that stands for the target (``explain``, ``render``, a bot's verdict
        and pull request): its only one; of a GGUF repo's groups, the worst (a group that
        would not stop outweighs those that do, as an audit's row says), of equally bad ones
        the one whose params file a pull request carries (``eosfix.targets.pr``), else the
        biggest group."""
        if len(self.results) == 1:
            return self.results[0]
        from eosfix.targets.pr import params_result

        carried = params_result(self.results)
        return min(self.results, key=lambda r: (_WORST_FIRST.index(r.status), r is not carried))
