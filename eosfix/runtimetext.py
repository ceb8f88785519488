"""The per-runtime verdicts as text for ``check``/``fix``: one line while a fix is pending,
caveats once none is (so a healthy repo never reads as failing), and which runtimes cannot be
judged at all because the folder has no ``config.json`` they would read.

A verdict is *not applicable* when ``config.json`` is absent and, even after the planned fix,
whether the runtime stops depends on what that missing file would say (candle and ExLlamaV2
read nothing else): the runtime cannot load this folder, so it neither stops nor fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from eosfix.check import RepoCheck
from eosfix.patch import FilePatch
from eosfix.repo import CONFIG
from eosfix.runtimes import RUNTIMES, Pins, rule_for
from eosfix.stopsets import (
    CONFIG_READERS,
    FIRST_ID_ONLY,
    TOKENIZER_EOS_ONLY,
    RuntimeRow,
    RuntimeTable,
    stop_inputs,
)

EOS_ONLY = "it stops only on the tokenizer's eos_token"


def not_applicable(
    check: RepoCheck, patches: Sequence[FilePatch] = (), pins: Pins | None = None
) -> frozenset[str]:
    """Runtimes (by name) whose verdict here depends on a config.json the folder lacks."""
    ids = tuple(t.id for t in check.terminators.terminators if t.id is not None)
    if CONFIG in check.repo.files or not ids:
        return frozenset()
    after = stop_inputs(check, patches)
    filled = dataclasses.replace(after, config_eos=ids, config_eos_is_list=len(ids) > 1)
    out = set()
    for rt in RUNTIMES:
        rule = rule_for(rt, pins)
        empty, full = rule.derive(after), rule.derive(filled)
        if any((i in empty) != (i in full) for i in ids):
            out.add(rt.name)
    return frozenset(out)


def _why_still(table: RuntimeTable, still: list[str]) -> list[str]:
    """Why runtimes still fail after the fix, when the reason is config.json."""
    why = []
    cfg_fixes = [n for n in table.fixed_by_config_json() if n in still]
    if cfg_fixes:
        why.append(f"{', '.join(cfg_fixes)}: use --config-json")
    if not table.has_config_json:
        absent = [n for n in still if n in CONFIG_READERS]
        if absent:
            why.append(f"{', '.join(absent)}: no config.json here")
    elif table.first_config_id is not None:
        why += [
            f"{n} stops only on config.json's first id, {table.first_config_id}"
            for n in still
            if n in FIRST_ID_ONLY
        ]
    eos_only = [n for n in still if n in TOKENIZER_EOS_ONLY]
    if eos_only:
        why.append(f"{', '.join(eos_only)}: {EOS_ONLY}")
    if "llama.cpp" in still:  # its converter never reads generation_config.json
        why.append("llama.cpp: after converting, run eosfix fix on the .gguf")
    return why


def _na_note(na: frozenset[str]) -> str:
    names = [rt.name for rt in RUNTIMES if rt.name in na]
    return f"not applicable without config.json: {', '.join(names)}" if names else ""


def runtimes_line(table: RuntimeTable, na: frozenset[str] = frozenset()) -> str:
    """One glanceable line: runtimes that would not stop now, and after the planned fix, and
    runtimes that stop inside a reply (at an id that cuts it), now and after the fix (``na``:
    runtimes that cannot load the folder, left out of the lists and named last)."""
    if all(i is None for i in table.terminators.values()):
        return "nothing to compare: no terminator has a known token id"
    rows = [r for r in table.rows if r.runtime not in na]
    before = [r.label for r in rows if r.misses_before]
    early_before = early_stop_groups(rows, table, after=False)
    note = _na_note(na)
    if not before and not early_before:
        text = f"all {len(rows)} stop at every terminator"
        return f"{text} ({note})" if note else text
    after = [r.label for r in rows if r.misses_after]
    early_after = early_stop_groups(rows, table, after=True)
    parts = [f"would not stop: {', '.join(before)}"] if before else []
    parts += [f"{what}: {', '.join(names)}" for what, names in early_before]
    text = "; ".join(parts)
    if (after, early_after) != (before, early_before):
        text += f"; after fix: {', '.join(after) if after else 'all stop'}"
        text += "".join(f"; still {what}: {', '.join(names)}" for what, names in early_after)
    why = [*_why_still(table, after), *_why_early(table), *([note] if note else [])]
    return text + (f" ({'; '.join(why)})" if why else "")


def early_stop_groups(
    rows: Sequence[RuntimeRow], table: RuntimeTable, *, after: bool
) -> list[tuple[str, list[str]]]:
    """("stop inside a turn at <|end|>", [runtimes]) for each set of ids that cut a reply."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        early = row.early_after if after else row.early_before
        if early:
            groups.setdefault(early_stop_text(table, early.values()), []).append(row.label)
    return list(groups.items())


def early_stop_text(table: RuntimeTable, ids: Iterable[int], verb: str = "stop") -> str:
    """``stop inside a turn at <|end|>`` / ``stop mid-reply at '#'``: where runtimes cut
    (``verb``: ``stops`` for one runtime)."""
    stops = [s for i in ids if (s := table.stop_id(i)) is not None]
    names = ", ".join(s.token or str(s.id) if s.kind == "in_turn" else s.label for s in stops)
    inside = all(s.kind == "in_turn" for s in stops)
    return f"{verb} {'inside a turn' if inside else 'mid-reply'} at {names}"


def _eos_cut_reason(table: RuntimeTable) -> str:
    eos = table.tokenizer_eos_id
    s = None if eos is None else table.stop_id(eos)
    name = s.token if s is not None and s.token else str(eos)
    return (
        f"{name} is the tokenizer's eos_token, which they add whatever generation_config.json "
        "says: change eos_token in tokenizer_config.json"
    )


def _why_early(table: RuntimeTable) -> list[str]:
    """Why runtimes still stop inside a reply after the fix, when the repo cannot change it."""
    stuck = table.early_from_tokenizer_eos()
    if not stuck or table.tokenizer_eos_id is None:
        return []
    return [f"{', '.join(stuck)}: {_eos_cut_reason(table)}"]


def _caveat(row: RuntimeRow, table: RuntimeTable, missed: str) -> str:
    """Why a runtime misses a terminator of a repo that needs no fix, and what would help."""
    if row.runtime in FIRST_ID_ONLY and table.first_config_id is not None:
        return (
            f"{row.label} keeps only config.json's first id, {table.first_config_id}, so it "
            f"misses {missed} (eosfix keeps that id first: transformers pads with it)"
        )
    if row.label in table.fixed_by_config_json():
        return (
            f"{row.label} reads config.json, which lacks {missed}: eosfix fix --config-json adds it"
        )
    if row.runtime in TOKENIZER_EOS_ONLY:
        return f"{row.label} would not stop on {missed}: {EOS_ONLY}"
    if row.runtime == "llama.cpp":
        return (
            f"llama.cpp would not stop on {missed}: after converting, run eosfix fix on the .gguf"
        )
    return f"{row.label} would not stop on {missed} ({row.reads})"


def settled_lines(table: RuntimeTable, na: frozenset[str] = frozenset()) -> list[str]:
    """When no fix is pending: which runtimes stop, then one caveat per runtime that does not.
    Caveats are labelled as such, so they never read as a verdict on the repo's files."""
    if all(i is None for i in table.terminators.values()):
        return ["runtimes      nothing to compare: no terminator has a known token id"]
    rows = [r for r in table.rows if r.runtime not in na]
    failing = [r for r in rows if not r.ok_after]
    n = len(rows)
    head = (
        f"all {n} stop at every terminator"
        if not failing
        else f"{n - len(failing)} of {n} stop at every terminator and never inside a reply; "
        "caveats below"
    )
    note = _na_note(na)
    lines = [f"runtimes      {head}" + (f" ({note})" if note else "")]
    stuck, by_config_json = table.early_from_tokenizer_eos(), table.fixed_by_config_json()
    for row in failing:
        missed = ", ".join(
            f"{c} ({table.terminators[c]})" for c, ok in row.stops_after.items() if ok is False
        )
        if missed:
            lines.append(f"caveat        {_caveat(row, table, missed)}")
        if row.early_after:
            where = early_stop_text(table, row.early_after.values(), "stops")
            why = ""
            if row.label in stuck:
                why = f": {_eos_cut_reason(table)}"
            elif row.label in by_config_json:
                why = " (it reads config.json: eosfix fix --config-json removes the id)"
            lines.append(f"caveat        {row.label} {where}{why}")
    return lines
