"""The per-runtime verdicts as text for ``check``/``fix``: one line while a fix is pending,
caveats once none is (so a healthy repo never reads as failing), and the runtimes that cannot
be judged at all (``RuntimeTable.not_applicable``: a folder without the ``config.json`` they
read). The table is computed with the check; what a runtime needs said about itself comes
from its facts (``eosfix.runtimes.rule.Runtime``), never from its name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from eosfix.decide.runtime_table import RuntimeRow, RuntimeTable


def _why_still(table: RuntimeTable, still: list[str]) -> list[str]:
    """Why runtimes still fail after the fix, when the reason is config.json."""
    why = []
    cfg_fixes = [n for n in table.fixed_by_config_json() if n in still]
    if cfg_fixes:
        why.append(f"{', '.join(cfg_fixes)}: use --config-json")
    rows = [r for r in table.rows if r.label in still]
    if not table.has_config_json:
        absent = [r.label for r in rows if r.config_only]
        if absent:
            why.append(f"{', '.join(absent)}: no config.json here")
    elif table.first_config_id is not None:
        why += [
            f"{r.label} stops only on config.json's first id, {table.first_config_id}"
            for r in rows
            if r.first_id_only
        ]
    else:
        untold = [r for r in rows if _no_top_level_applies(table, r)]
        if untold:
            why.append(_no_top_level(table, untold))
    why += [f"{r.label}: {r.remedy}" for r in rows if r.remedy]
    return why


def _no_top_level_applies(table: RuntimeTable, row: RuntimeRow) -> bool:
    """A runtime reading only config.json, which has no top-level eos_token_id that
    --config-json could edit (first_config_id: its first id after the fix, None: none)."""
    return (
        row.config_only
        and table.has_config_json
        and table.first_config_id is None
        and row.label not in table.fixed_by_config_json()
    )


def _no_top_level(table: RuntimeTable, rows: Sequence[RuntimeRow]) -> str:
    """Why runtimes that read only config.json miss a terminator when config.json has no
    top-level eos_token_id (a VLM's ids live under text_config, which they do not read), and
    what would make them stop: eosfix edits only ids a file already lists there."""
    contents = _missed(table, rows)
    ids = [table.terminators[c] for c in contents]
    names = ", ".join(r.label for r in rows)
    reads, they = ("reads", "it misses") if len(rows) == 1 else ("read", "they miss")
    return (
        f"{names} {reads} only config.json's top-level eos_token_id, which is not set (its ids "
        f"are under text_config), so {they} "
        f"{', '.join(f'{c} ({table.terminators[c]})' for c in contents)}; fix --config-json "
        f'edits only ids already there: add "eos_token_id": {json.dumps(ids)} at config.json\'s '
        f"top level to make {'it' if len(rows) == 1 else 'them'} stop"
    )


def _missed(table: RuntimeTable, rows: Sequence[RuntimeRow]) -> list[str]:
    """The terminators these runtimes miss after the planned fix."""
    return list(dict.fromkeys(c for r in rows for c, ok in r.stops_after.items() if ok is False))


def _na_note(table: RuntimeTable) -> str:
    names = [r.runtime for r in table.rows if r.runtime in table.not_applicable]
    return f"not applicable without config.json: {', '.join(names)}" if names else ""


def _all_stop(rows: Sequence[RuntimeRow]) -> str:
    if len(rows) == 1:
        return f"{rows[0].label} stops at every terminator"
    return f"all {len(rows)} stop at every terminator"


def runtimes_line(table: RuntimeTable) -> str:
    """One glanceable line: the runtimes that run on past a turn's end with the files as they
    are now, and those that stop inside a reply (at an id that cuts it) now; then what the
    planned fix leaves: ``after fix: all stop``, or the runtimes that still run on or still
    stop inside a reply (runtimes that cannot load the folder are left out of the lists and
    named last). Each list says when it holds (``now``, ``after fix``), so a list of what
    the fix leaves never reads as what it repairs."""
    if all(i is None for i in table.terminators.values()):
        return "nothing to compare: no terminator has a known token id"
    rows = list(table.applicable)
    before = [r.label for r in rows if r.misses_before]
    early_before = early_stop_groups(rows, table, after=False)
    note = _na_note(table)
    if not before and not early_before:
        text = _all_stop(rows)
        return f"{text} ({note})" if note else text
    after = [r.label for r in rows if r.misses_after]
    early_after = early_stop_groups(rows, table, after=True)
    parts = [f"run on now: {', '.join(before)}"] if before else []
    parts += [f"{what} now: {', '.join(names)}" for what, names in early_before]
    if (after, early_after) != (before, early_before):
        if not after and not early_after:
            parts.append(
                f"after fix: {rows[0].label} stops" if len(rows) == 1 else "after fix: all stop"
            )
        if after:
            parts.append(f"{_still(after, before)}run on after fix: {', '.join(after)}")
        was = [n for _, names in early_before for n in names]
        parts += [
            f"{_still(names, was)}{what} after fix: {', '.join(names)}"
            for what, names in early_after
        ]
    why = [*_why_still(table, after), *_why_early(table), *([note] if note else [])]
    text = "; ".join(parts)
    return text + (f" ({'; '.join(why)})" if why else "")


def _still(names: Sequence[str], before: Sequence[str]) -> str:
    """``still `` when every runtime named already did so before the fix."""
    return "still " if set(names) <= set(before) else ""


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
        f"{name} is the tokenizer's eos_token, which they add whatever the stop list says: "
        "change eos_token in tokenizer_config.json"
    )


def _why_early(table: RuntimeTable) -> list[str]:
    """Why runtimes still stop inside a reply after the fix, when the repo cannot change it."""
    stuck = table.early_from_tokenizer_eos()
    if not stuck or table.tokenizer_eos_id is None:
        return []
    return [f"{', '.join(stuck)}: {_eos_cut_reason(table)}"]


def _config_json_remedy(run: str | None, what: str) -> str:
    """``: run: eosfix fix PATH --config-json`` where that command writes config.json (a
    folder), else what to do; ``what``: what it does (``adds it``)."""
    return f" (run: {run})" if run else f": fix --config-json on a local copy {what}"


def _caveat(row: RuntimeRow, table: RuntimeTable, missed: str, run: str | None) -> str:
    """Why a runtime misses a terminator of a repo that needs no fix, and what would help."""
    if row.first_id_only and table.first_config_id is not None:
        return (
            f"{row.label} keeps only config.json's first id, {table.first_config_id}, so it "
            f"misses {missed} (eosfix keeps that id first: transformers pads with it)"
        )
    if row.label in table.fixed_by_config_json():
        return f"{row.label} reads config.json, which lacks {missed}" + _config_json_remedy(
            run, "adds it"
        )
    if row.remedy:
        return f"{row.label} would not stop on {missed}: {row.remedy}"
    return f"{row.label} would not stop on {missed} ({row.reads})"


def settled_lines(table: RuntimeTable, config_json_run: str | None = None) -> list[str]:
    """When no fix is pending: which runtimes stop, then one caveat per runtime that does not.
    Caveats are labelled as such, so they never read as a verdict on the repo's files.
    ``config_json_run``: the command that also writes config.json, where one does."""
    if all(i is None for i in table.terminators.values()):
        return ["runtimes      nothing to compare: no terminator has a known token id"]
    rows = list(table.applicable)
    failing = [r for r in rows if not r.ok_after]
    n = len(rows)
    head = (
        _all_stop(rows)
        if not failing
        else f"{n - len(failing)} of {n} stop at every terminator and never inside a reply; "
        "caveats below"
    )
    note = _na_note(table)
    lines = [f"runtimes      {head}" + (f" ({note})" if note else "")]
    stuck, by_config_json = table.early_from_tokenizer_eos(), table.fixed_by_config_json()
    early: dict[tuple[tuple[int, ...], str], list[str]] = {}  # one line per cut and reason
    untold = [r for r in failing if _no_top_level_applies(table, r) and _missed(table, [r])]
    if untold:
        lines.append(f"caveat        {_no_top_level(table, untold)}")
    for row in failing:
        missed = ", ".join(
            f"{c} ({table.terminators[c]})" for c, ok in row.stops_after.items() if ok is False
        )
        if missed and row not in untold:
            lines.append(f"caveat        {_caveat(row, table, missed, config_json_run)}")
        if row.early_after:
            why = ""
            if row.label in stuck:
                why = f": {_eos_cut_reason(table)}"
            elif row.label in by_config_json:
                remedy = (
                    f"; run: {config_json_run}"
                    if config_json_run
                    else ": fix --config-json on a local copy removes the id"
                )
                why = " ({} config.json" + remedy + ")"
            early.setdefault((tuple(row.early_after.values()), why), []).append(row.label)
    for (ids, why), labels in early.items():
        one = len(labels) == 1
        where = early_stop_text(table, ids, "stops" if one else "stop")
        said = why.format("it reads" if one else "they read")
        lines.append(f"caveat        {', '.join(labels)} {where}{said}")
    return lines
