"""What a container's stop keys are, and what deciding on them yields: the one contract
between ``eosfix.decide.check`` and every container (a model folder, a GGUF file).

A container says where its stop ids live as data (``StopKeys``): which ids its reference
reader stops on today (``StopConfig``: transformers reading generation_config.json for a
folder, llama.cpp's end-of-generation set for a GGUF), and, given the terminators, which
findings its keys raise and which ids the reader stops on once ``fix`` has written them
(``StopDecision``). The check never asks which container it looks at. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

from eosfix.analysis.terminators import Terminator, TerminatorSet
from eosfix.core.codes import Finding
from eosfix.core.repo import ModelRepo, TokenInfo
from eosfix.decide.stopids import UNCHECKED, StopId


class StopConfig(NamedTuple):
    """What the container's reference reader stops on today, and where that comes from.

    ``source``: the file or set read (``generation_config.json``, ``config.json text_config``,
    ``none``, ``llama.cpp end-of-generation set``); ``raw`` the value as written; ``detail``
    how the reader builds the set from the container's keys, for a person (a GGUF's
    eos/eot/eom); ``after`` where a loop's ids come from once ``fix`` wrote them.
    """

    ids: tuple[int, ...] | None
    source: str
    raw: int | list[int] | None
    detail: str = ""
    after: str = "generation_config.json after `eosfix fix`"


class StopIdReview(NamedTuple):
    """Every stop id of the container's keys, classified; the ids ``fix`` takes out."""

    stop_ids: tuple[StopId, ...]
    remove: frozenset[int]  # out of what the reference reader stops on
    config_remove: frozenset[int] = frozenset()  # out of config.json's lists (--config-json)

    def by_id(self, token_id: int) -> StopId | None:
        return next((s for s in self.stop_ids if s.id == token_id), None)

    def cuts(self, token_id: int | None) -> bool:
        """Stopping at ``token_id`` cuts a reply (never add such an id, e.g. the tokenizer's
        eos, to a list): it is written inside a turn, ordinary text, or the reply's only closer
        that a finding says is also written inside a turn (EOS010, EOS016)."""
        s = None if token_id is None else self.by_id(token_id)
        return s is not None and (s.cuts or s.closes_inside)

    @property
    def unchecked(self) -> tuple[StopId, ...]:
        return tuple(s for s in self.stop_ids if s.kind == UNCHECKED)

    @property
    def cutting(self) -> tuple[StopId, ...]:
        return tuple(s for s in self.stop_ids if s.cuts)


NO_REVIEW = StopIdReview((), frozenset())


class StopDecision(NamedTuple):
    """What the container's keys come to, given the terminators.

    ``proposed``: the ids the reference reader stops on after ``fix`` (None: nothing to
    write); ``missing``: the findings for terminators the reader does not stop on (listed
    first), ``findings`` the keys' other findings; ``unplaced``: terminators no key can hold (runtimes need stop strings for them);
    ``instead``: how to stop on text without changing the file, per program.
    """

    stop: StopConfig
    tokenizer_eos: TokenInfo | None
    review: StopIdReview
    proposed: tuple[int, ...] | None
    missing: tuple[Finding, ...]
    findings: tuple[Finding, ...]
    unplaced: tuple[Terminator, ...] = ()
    instead: Mapping[str, str] = {}
    model: bool = True  # False: no runtime loads a model from this container (NOT_A_MODEL)


class StopKeys(Protocol):
    """A container's stop keys: what ``eosfix.decide.check`` asks of every container."""

    def decide(
        self, repo: ModelRepo, ts: TerminatorSet, *, keep: tuple[int, ...], config_json: bool
    ) -> StopDecision:
        """The findings of the keys and the ids the reader stops on after ``fix``."""
        ...


def tokenizer_eos(repo: ModelRepo) -> TokenInfo | None:
    """The tokenizer's ``eos_token``, resolved to its id where a file names it."""
    content = repo.eos_token
    if content is None:
        return None
    return repo.resolve(content) or TokenInfo(content, None, True, False, "unresolved")
