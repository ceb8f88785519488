"""Per-runtime verdicts for one checked repo: does generation stop at each terminator, and
nowhere inside a reply, now and after the planned fix?

The container says which ids each runtime stops on in each state (``RowInputs``: now, after
the planned fix, after ``fix --config-json``); ``build_table`` turns those sets into rows the
same way for every container. The table is computed once, when the check is made, and carried
in the result (``eosfix.result.RepoResult.runtimes``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from eosfix.decide.check import RepoCheck
from eosfix.decide.stopids import StopId, classify
from eosfix.runtimes import Rule, Runtime

States = tuple[frozenset[int], frozenset[int], frozenset[int]]  # now, after fix, --config-json


class RuntimeRow(NamedTuple):
    """One runtime's verdict; ``None`` in ``stops_*`` means the terminator has no id.

    ``versions`` is the range the rule used holds for, ``pinned`` the version the user asked
    about (None: the current rule), ``executed`` the runtime version the conformance tests ran
    that rule against (None: not executed), ``cited`` the commit and lines of the runtime's
    source the rule was read at when it cannot run here (None: modelled, not cited).
    """

    runtime: str
    reads: str
    stops_before: dict[str, bool | None]
    stops_after: dict[str, bool | None]
    stops_with_config_json: dict[str, bool | None]
    note: str
    versions: str = "not established"
    pinned: str | None = None
    executed: str | None = None
    source: str = ""  # where the rule was read
    cited: str | None = None
    # Stop ids in its set that cut a reply (eosfix.decide.stopids: in-turn or ordinary tokens),
    # label -> id, now, after the planned fix, and with --config-json.
    early_before: Mapping[str, int] = {}
    early_after: Mapping[str, int] = {}
    early_with_config_json: Mapping[str, int] = {}
    # Runtime facts the verdict text needs (``eosfix.runtimes.rule.Runtime``).
    config_only: bool = False
    first_id_only: bool = False
    remedy: str = ""

    @property
    def label(self) -> str:
        return self.runtime if self.pinned is None else f"{self.runtime}=={self.pinned}"

    @property
    def basis(self) -> str:
        if self.executed is not None:
            return f"executed with {self.runtime} {self.executed}"
        if self.cited is not None:
            return f"cited at {self.cited}"
        return "modelled, not executed"

    @property
    def misses_before(self) -> bool:
        return any(v is False for v in self.stops_before.values())

    @property
    def misses_after(self) -> bool:
        return any(v is False for v in self.stops_after.values())

    @property
    def ok_before(self) -> bool:
        """Stops at every terminator and nowhere inside a reply."""
        return not self.misses_before and not self.early_before

    @property
    def ok_after(self) -> bool:
        return not self.misses_after and not self.early_after

    @property
    def ok_with_config_json(self) -> bool:
        misses = any(v is False for v in self.stops_with_config_json.values())
        return not misses and not self.early_with_config_json


@dataclass(frozen=True)
class RuntimeTable:
    rows: tuple[RuntimeRow, ...]
    terminators: dict[str, int | None]  # content -> id (None: plain text or unresolved)
    config_json_written: bool  # the planned fix rewrites config.json (--config-json)
    has_config_json: bool
    first_config_id: int | None  # config.json's first eos id after the fix (ExLlamaV2 keeps it)
    cutting: tuple[StopId, ...] = ()  # every stop id of any runtime that cuts a reply
    tokenizer_eos_id: int | None = None
    # Runtimes (by name) that cannot load this container as it is (a folder without the
    # config.json they read): shown as not applicable, never as a verdict.
    not_applicable: frozenset[str] = frozenset()

    @property
    def applicable(self) -> tuple[RuntimeRow, ...]:
        return tuple(r for r in self.rows if r.runtime not in self.not_applicable)

    @property
    def runs_on(self) -> tuple[str, ...]:
        """Runtimes that miss a terminator now: generation runs past the turn end."""
        return tuple(r.label for r in self.applicable if r.misses_before)

    @property
    def stops_early(self) -> tuple[str, ...]:
        """Runtimes that stop now at an id that cuts a reply."""
        return tuple(r.label for r in self.applicable if r.early_before)

    def failing_after(self) -> list[str]:
        """Runtimes that still miss a terminator after the planned fix."""
        return [r.label for r in self.rows if r.misses_after]

    def early_from_tokenizer_eos(self) -> list[str]:
        """Runtimes still stopping early after the fix because they add the tokenizer's eos,
        which cuts a reply: no generation_config.json can change that."""
        eos = self.tokenizer_eos_id
        return [r.label for r in self.rows if eos is not None and eos in r.early_after.values()]

    def fixed_by_config_json(self) -> list[str]:
        """Runtimes still failing after the planned fix that --config-json would fix."""
        if self.config_json_written:
            return []
        return [r.label for r in self.rows if not r.ok_after and r.ok_with_config_json]

    def stop_id(self, token_id: int) -> StopId | None:
        return next((s for s in self.cutting if s.id == token_id), None)


class RowInputs(NamedTuple):
    """One runtime's stop sets in each state, with the rule that gave them."""

    runtime: Runtime
    rule: Rule
    sets: States
    pinned: str | None = None
    note: str | None = None  # the rule's note, unless the container has a better one


def cutting_ids(check: RepoCheck, ids: Iterable[int]) -> tuple[StopId, ...]:
    """The ids of ``ids`` (what any runtime stops on, in any state) that cut a reply."""
    wanted = set(ids)
    known = {s.id: s for s in check.review.stop_ids}
    fresh = classify(
        check.repo, check.terminators, check.tokenizer_eos, sorted(wanted - set(known))
    )
    return tuple(s for s in (*known.values(), *fresh) if s.id in wanted and s.cuts)


def _stops(ids: frozenset[int], terms: Mapping[str, int | None]) -> dict[str, bool | None]:
    return {c: None if i is None else i in ids for c, i in terms.items()}


def _early(ids: frozenset[int], cutting: Mapping[int, StopId]) -> dict[str, int]:
    """Token text -> id of the ids in ``ids`` that cut a reply."""
    return {(cutting[i].text or cutting[i].token or str(i)): i for i in sorted(ids) if i in cutting}


def _row(
    spec: RowInputs,
    terms: Mapping[str, int | None],
    cutting: Mapping[int, StopId],
    seen: dict[frozenset[int], tuple[dict[str, bool | None], dict[str, int]]],
) -> RuntimeRow:
    rt, rule = spec.runtime, spec.rule
    for ids in spec.sets:  # most runtimes stop on one of a few sets: each is compared once
        if ids not in seen:
            seen[ids] = (_stops(ids, terms), _early(ids, cutting))
    (before, early0), (after, early1), (with_cfg, early2) = (seen[ids] for ids in spec.sets)
    early = [dict(early0), dict(early1), dict(early2)]  # a row's own: rows never share dicts
    before, after, with_cfg = dict(before), dict(after), dict(with_cfg)
    executed = rt.executed if rule == rt.current else None  # older rules are only modelled
    cited = rt.cited if rule == rt.current else None
    note = rule.note if spec.note is None else spec.note
    return RuntimeRow(
        rt.name, rule.reads, before, after, with_cfg, note, rule.versions_str, spec.pinned,
        executed, rule.source, cited, early[0], early[1], early[2],
        config_only=rt.config_only, first_id_only=rt.first_id_only, remedy=rt.remedy,
    )  # fmt: skip


def build_table(
    check: RepoCheck,
    specs: Sequence[RowInputs],
    *,
    config_json_written: bool = False,
    has_config_json: bool = True,
    first_config_id: int | None = None,
    not_applicable: frozenset[str] = frozenset(),
) -> RuntimeTable:
    """The rows of ``specs``, each runtime's stop sets compared with the terminators."""
    terms = {t.content: t.id for t in check.terminators.terminators}
    every = {i for spec in specs for ids in spec.sets for i in ids}
    cutting = cutting_ids(check, every)
    by_id = {s.id: s for s in cutting}
    seen: dict[frozenset[int], tuple[dict[str, bool | None], dict[str, int]]] = {}
    rows = tuple(_row(spec, terms, by_id, seen) for spec in specs)
    eos = check.tokenizer_eos.id if check.tokenizer_eos is not None else None
    return RuntimeTable(
        rows, terms, config_json_written, has_config_json, first_config_id, cutting, eos,
        not_applicable,
    )  # fmt: skip
