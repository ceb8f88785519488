"""Which ids each runtime stops on for a model folder: now, after the planned fix, and after
``fix --config-json`` (the runtime rules of ``eosfix.runtimes`` applied to the files as they
are and to the patches' exact new text), and which runtimes cannot load the folder at all.

A verdict is *not applicable* when ``config.json`` is absent and, even after the planned fix,
whether the runtime stops depends on what that missing file would say (candle and ExLlamaV2
read nothing else): the runtime cannot load this folder, so it neither stops nor fails here.
A folder that is not a model repo at all (tokenizer files only) is not applicable to any.
Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from eosfix.containers.folder import inputs as stopinputs
from eosfix.containers.folder.plan import FilePatch, config_edits
from eosfix.core.repo import CONFIG, GENERATION_CONFIG
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import RowInputs, RuntimeTable, build_table
from eosfix.runtimes import RUNTIMES, Pins, Runtime, StopInputs, rule_for


def inputs_from_files(
    gen: Mapping[str, Any] | None,
    cfg: Mapping[str, Any] | None,
    check: RepoCheck,
    patches: Sequence[FilePatch] = (),
) -> StopInputs:
    """StopInputs from generation_config.json / config.json objects (``None``: file absent),
    the byte-order marks and the files that are not JSON as ``patches`` leave them."""
    terms = {t.content: t.id for t in check.terminators.terminators}
    bom = frozenset(check.repo.bom) - {p.file for p in patches if p.bom_removed}
    unreadable = frozenset(check.repo.unreadable) - {p.file for p in patches if p.replaces}
    return stopinputs.inputs_from_files(
        gen, cfg, check.repo, terms, check.tokenizer_eos, bom, unreadable
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
        _data(check, GENERATION_CONFIG, patches), _data(check, CONFIG, patches), check, patches
    )


def _with_config_json(
    check: RepoCheck, patches: Sequence[FilePatch], after: StopInputs
) -> StopInputs:
    """What the runtimes read after the planned fix and ``--config-json``: config.json as
    parsed, with the values ``config_edits`` gives (its text edit is made, and verified, when
    ``fix --config-json`` plans it; here only the values matter). ``after`` when it changes
    nothing."""
    edits = config_edits(check)
    cfg = check.repo.files.get(CONFIG)
    if cfg is None or not (edits or CONFIG in check.repo.bom):
        return after
    data = dict(cfg.data)  # copied along each edited path only
    for path, value in edits:
        node = data
        for key in path[:-1]:
            node[key] = node = dict(node[key])
        node[path[-1]] = value
    stripped = FilePatch(CONFIG, cfg.text, cfg.text.removeprefix("\ufeff"))  # its mark goes
    gen = _data(check, GENERATION_CONFIG, patches)
    return inputs_from_files(gen, data, check, [*patches, stripped])


def _note(rt: Runtime, base: str, check: RepoCheck, before: StopInputs, after: StopInputs) -> str:
    # it cannot load (or generate with) the files as they are, or reads one as missing
    refused = rt.refused(before) or rt.ignored(before)
    if refused:
        still = rt.refused(after) or rt.ignored(after)
        return refused + ("" if still else "; the fix removes that")
    if rt.first_id_only and after.config_eos and len(after.config_eos) > 1:
        return f"keeps only config.json's first id ({after.config_eos[0]}): stops on no other id"
    if rt.config_only and CONFIG not in check.repo.files:
        return f"{base}; no config.json in this folder"
    if check.stop_strings:
        return f"{base}; plain-text turn ends need stop strings"
    return base


def not_applicable(
    check: RepoCheck, patches: Sequence[FilePatch] = (), pins: Pins | None = None
) -> frozenset[str]:
    """Runtimes (by name) whose verdict here depends on a config.json the folder lacks;
    every runtime when the folder is not a model repo (tokenizer files only)."""
    if not check.model:
        return frozenset(rt.name for rt in RUNTIMES)
    ids = tuple(t.id for t in check.terminators.terminators if t.id is not None)
    if CONFIG in check.repo.files or not ids:
        return frozenset()
    after = stop_inputs(check, patches)
    filled = after._replace(config_eos=ids, config_eos_is_list=len(ids) > 1)
    out = set()
    for rt in RUNTIMES:
        rule = rule_for(rt, pins)
        empty, full = rule.derive(after), rule.derive(filled)
        if any((i in empty) != (i in full) for i in ids):
            out.add(rt.name)
    return frozenset(out)


def runtime_table(
    check: RepoCheck, patches: Sequence[FilePatch] = (), pins: Pins | None = None
) -> RuntimeTable:
    """Every runtime's verdict before and after ``patches``, and with ``--config-json``, each
    with its rule for the version in ``pins`` (else its current rule)."""
    before, after = stop_inputs(check), stop_inputs(check, patches)
    config_written = any(p.file == CONFIG for p in patches)
    with_cfg = after if config_written else _with_config_json(check, patches, after)
    specs = []
    for rt in RUNTIMES:
        rule = rule_for(rt, pins)
        sets = (rule.derive(before), rule.derive(after), rule.derive(with_cfg))
        note = _note(rt, rule.note, check, before, after)
        specs.append(RowInputs(rt, rule, sets, (pins or {}).get(rt.name), note))
    first = after.config_eos[0] if after.config_eos else None
    return build_table(
        check, specs, config_json_written=config_written,
        has_config_json=CONFIG in check.repo.files, first_config_id=first,
        not_applicable=not_applicable(check, patches, pins),
    )  # fmt: skip
