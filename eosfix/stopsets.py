"""Per-runtime verdicts for one checked repo: does generation stop at each terminator, now and
after the planned fix?

Glue between ``check.RepoCheck`` and the runtime model of ``eosfix.runtimes``:

- ``stop_inputs(check)`` reads what the repo's files say today;
- ``runtime_table(check, patches, pins)`` applies the planned ``FilePatch`` es (their exact
  new text, so ``--config-json`` is shown with the list it really writes) and compares, with
  each runtime's rule for the pinned version (else its current rule);

Pure: no printing, no writing. (A hand-written generation loop is ``eosfix.ports``.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eosfix import stopinputs
from eosfix.check import RepoCheck
from eosfix.patch import FilePatch, plan_config
from eosfix.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes import RUNTIMES, Pins, Runtime, StopInputs, rule_for
from eosfix.stopids import StopId, classify

# Runtimes that read config.json's eos_token_id (never generation_config.json).
CONFIG_READERS = ("candle", "ExLlamaV2")
FIRST_ID_ONLY = ("ExLlamaV2",)  # exllamav2/config.py: a list keeps only element [0]
TOKENIZER_EOS_ONLY = ("TGI-transformers",)  # no config file can change what these stop on


@dataclass(frozen=True)
class RuntimeRow:
    """One runtime's verdict; ``None`` in ``stops_*`` means the terminator has no id.

    ``versions`` is the range the rule used holds for, ``pinned`` the version the user asked
    about (None: the current rule), ``executed`` the runtime version the conformance tests ran
    that rule against (None: modelled from the runtime's source, not executed).
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
    # Stop ids in its set that cut a reply (eosfix.stopids: in-turn or ordinary tokens),
    # label -> id, now, after the planned fix, and with --config-json.
    early_before: dict[str, int] = field(default_factory=dict)
    early_after: dict[str, int] = field(default_factory=dict)
    early_with_config_json: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.runtime if self.pinned is None else f"{self.runtime}=={self.pinned}"

    @property
    def basis(self) -> str:
        if self.executed is None:
            return "modelled, not executed"
        return f"executed with {self.runtime} {self.executed}"

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


def inputs_from_files(
    gen: Mapping[str, Any] | None, cfg: Mapping[str, Any] | None, check: RepoCheck
) -> StopInputs:
    """StopInputs from generation_config.json / config.json objects (``None``: file absent)."""
    terms = check.terminators.terminators
    return stopinputs.inputs_from_files(gen, cfg, check.repo, terms, check.tokenizer_eos)


def _data(check: RepoCheck, name: str, patches: Sequence[FilePatch]) -> dict[str, Any] | None:
    for p in patches:
        if p.file == name:
            data: dict[str, Any] = json.loads(p.new_text.removeprefix("\ufeff"))
            return data
    f = check.repo.files.get(name)
    return None if f is None else f.data


def stop_inputs(check: RepoCheck, patches: Sequence[FilePatch] = ()) -> StopInputs:
    """What the runtimes read from the repo, after ``patches`` (none: as the files are now)."""
    return inputs_from_files(
        _data(check, GENERATION_CONFIG, patches), _data(check, CONFIG, patches), check
    )


def _stops(ids: frozenset[int], terms: Mapping[str, int | None]) -> dict[str, bool | None]:
    return {c: None if i is None else i in ids for c, i in terms.items()}


def _early(ids: frozenset[int], cutting: Mapping[int, StopId]) -> dict[str, int]:
    """Token text -> id of the ids in ``ids`` that cut a reply."""
    return {_text(cutting[i]): i for i in sorted(ids) if i in cutting}


def _text(s: StopId) -> str:
    return s.text or s.token or str(s.id)


def cutting_ids(check: RepoCheck, ids: set[int]) -> tuple[StopId, ...]:
    """The ids of ``ids`` (what any runtime stops on, in any state) that cut a reply."""
    known = {s.id: s for s in check.review.stop_ids} if check.review is not None else {}
    fresh = classify(check.repo, check.terminators, check.tokenizer_eos, sorted(ids - set(known)))
    return tuple(s for s in (*known.values(), *fresh) if s.id in ids and s.cuts)


def _note(name: str, base: str, check: RepoCheck, after: StopInputs) -> str:
    if name in FIRST_ID_ONLY and after.config_eos and len(after.config_eos) > 1:
        return f"keeps only config.json's first id ({after.config_eos[0]}): stops on no other id"
    if name in CONFIG_READERS and CONFIG not in check.repo.files:
        return f"{base}; no config.json in this folder"
    if check.stop_strings:
        return f"{base}; plain-text turn ends need stop strings"
    return base


def _row(
    rt: Runtime,
    pins: Pins | None,
    check: RepoCheck,
    after_inputs: StopInputs,
    sets: Sequence[frozenset[int]],
    cutting: Mapping[int, StopId],
) -> RuntimeRow:
    """``sets``: the ids the runtime stops on now, after the planned fix (whose inputs are
    ``after_inputs``), and with --config-json."""
    rule = rule_for(rt, pins)
    terms = {t.content: t.id for t in check.terminators.terminators}
    before, after, with_cfg = (_stops(ids, terms) for ids in sets)
    early = [_early(ids, cutting) for ids in sets]
    executed = rt.executed if rule == rt.current else None  # older rules are only modelled
    return RuntimeRow(
        rt.name, rule.reads, before, after, with_cfg, _note(rt.name, rule.note, check, after_inputs),
        rule.versions_str, (pins or {}).get(rt.name), executed, rule.source, *early,
    )  # fmt: skip


def runtime_table(
    check: RepoCheck, patches: Sequence[FilePatch] = (), pins: Pins | None = None
) -> RuntimeTable:
    """Every runtime's verdict before and after ``patches``, and with ``--config-json``, each
    with its rule for the version in ``pins`` (else its current rule)."""
    terms = {t.content: t.id for t in check.terminators.terminators}
    before, after = stop_inputs(check), stop_inputs(check, patches)
    config_written = any(p.file == CONFIG for p in patches)
    with_cfg = after
    if not config_written:
        cfg_patch = plan_config(check)
        if cfg_patch is not None:
            with_cfg = stop_inputs(check, [*patches, cfg_patch])
    states = (before, after, with_cfg)
    sets = {rt.name: [rule_for(rt, pins).derive(x) for x in states] for rt in RUNTIMES}
    cutting = cutting_ids(check, {i for per in sets.values() for ids in per for i in ids})
    by_id = {s.id: s for s in cutting}
    rows = tuple(_row(rt, pins, check, after, sets[rt.name], by_id) for rt in RUNTIMES)
    first = after.config_eos[0] if after.config_eos else None
    eos = check.tokenizer_eos.id if check.tokenizer_eos is not None else None
    return RuntimeTable(
        rows, terms, config_written, CONFIG in check.repo.files, first, cutting, eos
    )


def runtime_rows_json(table: RuntimeTable) -> list[dict[str, Any]]:
    """The ``"runtimes"`` key of ``--format json``."""
    return [
        {"runtime": r.runtime, "version": r.pinned, "versions": r.versions,
         "executed": r.executed, "basis": r.basis, "source": r.source, "reads": r.reads,
         "stops_before": r.stops_before, "stops_after": r.stops_after,
         "stops_early_before": r.early_before, "stops_early_after": r.early_after,
         "ok_before": r.ok_before, "ok_after": r.ok_after, "note": r.note}
        for r in table.rows
    ]  # fmt: skip
