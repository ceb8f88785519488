"""Pull requests across a batch of Hub repos: what `eosfix hub --pr` does with each
fixable repo, and the same keys in every entry.

``PrPlan`` opens at most ``max_prs`` new PRs (in the batch's order), or in a dry run says
which it would open; a repo with an open eosfix PR gets no second one (it is reported,
updated, or left: ``eosfix.sources.hub.write``). ``PrState`` is what an entry says about its
PR, checked now or carried over from a state file (``carried_over``: "opened earlier"). The
PR's description is rendered by the function the caller passes (``eosfix.render.pr``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from huggingface_hub import HfApi

from eosfix import pipeline
from eosfix.batch.run import PrState, Unit
from eosfix.result import HubOrigin, RepoResult
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubReader
from eosfix.sources.hub.write import PrError, PrOutcome, find_open_pr
from eosfix.targets.pr import Describe, fix_of, open_fix_pr, token_user

CARRIED = frozenset(  # the words of a PR that is open
    o.value
    for o in (PrOutcome.OPENED, PrOutcome.UNCHANGED, PrOutcome.UPDATED, PrOutcome.CARRIED_OVER)
)

_SETTLED = frozenset((PrOutcome.UNCHANGED.value, PrOutcome.CARRIED_OVER.value))


def carried_over(fields: dict[str, Any]) -> PrState:
    """A PR recorded by an earlier run, as this run reports it: "opened earlier", never
    "opened" (this run created nothing)."""
    state = PrState.of(fields)
    if state.words in CARRIED and state.url:
        return dataclasses.replace(state, words=PrOutcome.CARRIED_OVER.value, created=False)
    return state


@dataclass
class PrPlan:
    """Pull requests across a batch: ``max_prs`` new ones at most (in the batch's order);
    ``dry_run`` opens none and says which it *would* open. Writes go one at a time. A repo
    with an open eosfix PR never gets a second one (``eosfix.sources.hub.write``)."""

    hf_api: HfApi
    reader: HubReader
    describe: Describe
    max_prs: int | None = None
    dry_run: bool = False
    new: int = 0  # opened (or, in a dry run, that would be)
    updated: int = 0  # open eosfix PRs given a commit with the current fix
    failed: int = 0
    keep_ids: tuple[int, ...] = ()  # stop ids the fix keeps (--keep-id)
    stopping: bool = False  # interrupted: no new pull request

    @staticmethod
    def settled(unit: Unit) -> bool:
        """An open pull request already carries the unit's fix (found now, or recorded by an
        earlier run): nothing is left to do for it (``Run.settled``)."""
        return unit.pr is not None and unit.pr.words in _SETTLED

    def wants(self, unit: Unit) -> bool:
        v = unit.verdict
        return v is not None and v.has_patches and not (unit.pr and unit.pr.url)

    @functools.cached_property
    def me(self) -> str | None:
        """The token's user (an eosfix PR of someone else is never updated), asked once."""
        return token_user(self.hf_api)

    def handle(self, unit: Unit) -> Unit:
        """Open (or find) the PR of one fixable repo; its outcome goes into ``unit.pr``."""
        assert unit.path is not None
        item = unit.item
        fields = item.fields()
        hub = HubOrigin(item.repo_id, fields.get("revision", "main"), fields.get("sha"))
        result = pipeline.check(
            unit.path, label=item.repo_id, keep_ids=self.keep_ids, blockers=False
        )._replace(
            hub=hub,
        )
        return self.settle(unit, result)

    def settle(self, unit: Unit, result: RepoResult) -> Unit:
        """Open (or find) the PR that carries ``result``'s fix (a GGUF repo's: its params
        file, ``eosfix.targets.gguf_hub``); its outcome goes into ``unit.pr``."""
        if self.stopping:
            return unit.but(pr=PrState("not opened: interrupted"))
        try:
            state = self._decide(result)
        except PrError as exc:
            self.failed += 1
            state = PrState(f"error: {exc.message}", error=exc.message)
        return unit if state is None else unit.but(pr=state)

    def _decide(self, result: RepoResult) -> PrState | None:
        fix = fix_of(result)
        if fix is None:
            return None
        repo_id, file, new_bytes = fix
        over = self.max_prs is not None and self.new >= self.max_prs
        if self.dry_run or over:
            try:
                found = find_open_pr(self.hf_api, self.reader, repo_id, new_bytes, file=file)
            except hub_errors() as exc:
                raise PrError(f"cannot look for pull requests: {describe_error(exc)[0]}") from None
            if found is not None:
                words = found.outcome.value
                if found.outcome is PrOutcome.WOULD_UPDATE:
                    words += " (dry run)"
                return PrState(words, url=found.url, num=found.num)
            if over:
                return PrState(f"not opened: --max-prs {self.max_prs} reached")
            self.new += 1
            return PrState("would open (dry run)")
        pr = open_fix_pr(self.hf_api, self.reader, result, self.describe, self.me)
        if pr is None:
            return None
        self.new += pr.created
        self.updated += pr.updated
        words = pr.outcome.value  # opened, updated, already open, left open: why
        if pr.outcome is PrOutcome.LEFT:
            words = f"{words}: {pr.left}"
        return PrState(words, url=pr.url, num=pr.num, created=pr.created)
