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
from dataclasses import dataclass
from typing import Any

from eosfix.check import RepoCheck
from eosfix.models import eos_tuple
from eosfix.patch import FilePatch, plan_config
from eosfix.repo import CONFIG, GENERATION_CONFIG
from eosfix.runtimes import RUNTIMES, Pins, Runtime, StopInputs, rule_for
from eosfix.runtimes.llamacpp import converter_special_ids
from eosfix.sources.convert import converter_inputs

# Runtimes that read config.json's eos_token_id (never generation_config.json).
CONFIG_READERS = ("candle", "ExLlamaV2")
FIRST_ID_ONLY = ("ExLlamaV2",)  # exllamav2/config.py: a list keeps only element [0]


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

    @property
    def label(self) -> str:
        return self.runtime if self.pinned is None else f"{self.runtime}=={self.pinned}"

    @property
    def basis(self) -> str:
        if self.executed is None:
            return "modelled, not executed"
        return f"executed with {self.runtime} {self.executed}"

    @property
    def ok_before(self) -> bool:
        return all(v is not False for v in self.stops_before.values())

    @property
    def ok_after(self) -> bool:
        return all(v is not False for v in self.stops_after.values())

    @property
    def ok_with_config_json(self) -> bool:
        return all(v is not False for v in self.stops_with_config_json.values())


@dataclass(frozen=True)
class RuntimeTable:
    rows: tuple[RuntimeRow, ...]
    terminators: dict[str, int | None]  # content -> id (None: plain text or unresolved)
    config_json_written: bool  # the planned fix rewrites config.json (--config-json)
    has_config_json: bool
    first_config_id: int | None  # config.json's first eos id after the fix (ExLlamaV2 keeps it)

    def failing_before(self) -> list[str]:
        return [r.label for r in self.rows if not r.ok_before]

    def failing_after(self) -> list[str]:
        return [r.label for r in self.rows if not r.ok_after]

    def fixed_by_config_json(self) -> list[str]:
        """Runtimes still failing after the planned fix that --config-json would fix."""
        if self.config_json_written:
            return []
        return [r.label for r in self.rows if not r.ok_after and r.ok_with_config_json]


def _vocab(check: RepoCheck) -> dict[str, int]:
    """Token text -> id for what the runtimes look up by text (added tokens, terminators)."""
    vocab = {c: info.id for c, info in check.repo.added_tokens.items() if info.id is not None}
    for t in check.terminators.terminators:
        if t.id is not None:
            vocab.setdefault(t.content, t.id)
    eos = check.tokenizer_eos
    if eos is not None and eos.id is not None:
        vocab.setdefault(eos.content, eos.id)
    return vocab


def _eos(data: Mapping[str, Any] | None) -> tuple[tuple[int, ...] | None, bool]:
    raw = None if data is None else data.get("eos_token_id")
    valid = isinstance(raw, int) or (isinstance(raw, list) and all(isinstance(i, int) for i in raw))
    return (eos_tuple(raw), isinstance(raw, list)) if valid else (None, False)


def inputs_from_files(
    gen: Mapping[str, Any] | None, cfg: Mapping[str, Any] | None, check: RepoCheck
) -> StopInputs:
    """StopInputs from generation_config.json / config.json objects (``None``: file absent)."""
    gen_eos, gen_list = _eos(gen)
    cfg_eos, cfg_list = _eos(cfg)
    text_config = cfg.get("text_config") if cfg is not None else None
    text_eos, _ = _eos(text_config if isinstance(text_config, dict) else None)
    eos = check.tokenizer_eos
    return StopInputs(
        tokenizer_eos_id=eos.id if eos is not None else None,
        tokenizer_eos_content=eos.content if eos is not None else None,
        generation_config_exists=gen is not None,
        generation_config_eos=gen_eos,
        generation_config_has_eos_key=gen is not None and "eos_token_id" in gen,
        generation_config_eos_is_list=gen_list,
        config_eos=cfg_eos,
        config_eos_is_list=cfg_list,
        text_config_eos=text_eos,
        vocab=_vocab(check),
        gguf_special_ids=converter_special_ids(converter_inputs(check.repo, cfg)),
    )


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


def _note(name: str, base: str, check: RepoCheck, after: StopInputs) -> str:
    if name in FIRST_ID_ONLY and after.config_eos and len(after.config_eos) > 1:
        return f"keeps only config.json's first id ({after.config_eos[0]}): stops on no other id"
    if name in CONFIG_READERS and CONFIG not in check.repo.files:
        return f"{base}; no config.json in this folder"
    if check.stop_strings:
        return f"{base}; plain-text turn ends need stop strings"
    return base


def _row(
    rt: Runtime, pins: Pins | None, check: RepoCheck, states: tuple[StopInputs, ...]
) -> RuntimeRow:
    """``states``: the inputs now, after the planned fix, and with --config-json."""
    rule = rule_for(rt, pins)
    terms = {t.content: t.id for t in check.terminators.terminators}
    before, after, with_cfg = (_stops(rule.derive(x), terms) for x in states)
    executed = rt.executed if rule == rt.current else None  # older rules are only modelled
    return RuntimeRow(
        rt.name, rule.reads, before, after, with_cfg, _note(rt.name, rule.note, check, states[1]),
        rule.versions_str, (pins or {}).get(rt.name), executed, rule.source,
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
    rows = tuple(_row(rt, pins, check, (before, after, with_cfg)) for rt in RUNTIMES)
    first = after.config_eos[0] if after.config_eos else None
    return RuntimeTable(rows, terms, config_written, CONFIG in check.repo.files, first)


def runtime_rows_json(table: RuntimeTable) -> list[dict[str, Any]]:
    """The ``"runtimes"`` key of ``--format json``."""
    return [
        {"runtime": r.runtime, "version": r.pinned, "versions": r.versions,
         "executed": r.executed, "basis": r.basis, "source": r.source, "reads": r.reads,
         "stops_before": r.stops_before, "stops_after": r.stops_after, "ok_before": r.ok_before,
         "ok_after": r.ok_after, "note": r.note}
        for r in table.rows
    ]  # fmt: skip
