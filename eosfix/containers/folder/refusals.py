"""EOS017, EOS018 and EOS020: what the runtimes' JSON reading refuses in a folder's files.

- EOS017: a JSON file that starts with a UTF-8 byte-order mark. eosfix reads past the mark;
  no runtime does (Python's ``json``, Go's ``encoding/json``, Rust's ``serde_json``): each
  runtime that reads the file ignores it (a generation_config.json it loads with a fallback:
  it stops on config.json's ids instead) or cannot load the model. ``fix`` removes the mark
  from the files it writes (generation_config.json; config.json with --config-json).
- EOS018: generation_config.json's ``eos_token_id`` that is not ids (``"2"``, ``2.0``,
  ``true``, ``[2, null]``, a nested list): what each runtime does with the value (it cannot
  run, reads it as ids, holds what no token equals, or ignores it), and the ids it names,
  which ``fix`` writes as a list of ints.

- EOS020: a generation_config.json or special_tokens_map.json that is not JSON at all (empty,
  NUL bytes, cut short), which eosfix reads past as if missing: each runtime that opens the
  file ignores it (transformers then stops on config.json's ids) or cannot load the model;
  ``fix`` writes generation_config.json anew and keeps the old bytes beside it. A
  special_tokens_map.json that transformers never opens (tokenizer_config.json lists
  ``added_tokens_decoder``) is a warning, as is a byte-order mark in it (EOS017).

Each says it per runtime from ``eosfix.runtimes``' ``Refusals`` (executed where the runtime
installs: tests/conformance/). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from eosfix.containers.folder.inputs import layout
from eosfix.containers.folder.plan import CORRUPT_SUFFIX
from eosfix.core.codes import EOS017, EOS018, EOS020, Finding, Severity, finding
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, SPECIAL_TOKENS_MAP, ModelRepo
from eosfix.runtimes import RUNTIMES
from eosfix.runtimes.rule import FAILS, IGNORES, Layout

_BOM_EFFECTS = {  # (one runtime, several)
    IGNORES: (
        "ignores the file (as if it were missing)",
        "ignore the file (as if it were missing)",
    ),
    FAILS: ("cannot load the model", "cannot load the model"),
}


def _names(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _group(names: Sequence[str], what: tuple[str, str]) -> str:
    return f"{_names(names)} {what[0] if len(names) == 1 else what[1]}"


def _effects(name: str, where: Layout) -> list[str]:
    """What the runtimes that open ``name`` do when their JSON reader refuses it, by effect:
    ``transformers and vLLM ignore the file (...)``, ``ExLlamaV2 cannot load the model``."""
    groups = []
    for effect, words in _BOM_EFFECTS.items():
        who = [rt.name for rt in RUNTIMES if rt.refusals.effect(name, where) == effect]
        if who:
            groups.append(_group(who, words))
    return groups


def _unopened(name: str) -> str:
    """Why no runtime opens ``name`` in this folder (special_tokens_map.json only)."""
    return (
        f"no runtime opens {name} here (tokenizer_config.json lists added_tokens_decoder, so "
        "transformers' tokenizer never reads it)"
    )


def bom_findings(repo: ModelRepo, *, config_json: bool = False) -> list[Finding]:
    """EOS017 for each file read that starts with a byte-order mark."""
    out = []
    where = layout(repo)
    for name in repo.bom:
        groups = _effects(name, where)
        if not groups and name == SPECIAL_TOKENS_MAP:
            msg = f"{name} starts with a UTF-8 byte-order mark: {_unopened(name)}"
            out.append(finding(EOS017, name, msg, severity=Severity.WARNING, fixable=False))
            continue
        said = ", ".join(groups) if groups else "a runtime reading it cannot parse it"
        fixable = name == GENERATION_CONFIG or (name == CONFIG and config_json)
        remedy = "fix removes the mark" if fixable else "remove the mark (its first 3 bytes)"
        msg = (
            f"{name} starts with a UTF-8 byte-order mark, which JSON readers refuse: {said}; "
            f"{remedy}"
        )
        out.append(finding(EOS017, name, msg, fixable=fixable))
    return out


def unreadable_findings(repo: ModelRepo) -> list[Finding]:
    """EOS020 for each file read past because it is not JSON at all: what each runtime that
    opens it does (it ignores the file, or cannot load the model), and what ``fix`` does."""
    out = []
    where = layout(repo)
    for name, f in sorted(repo.unreadable.items()):
        groups = _effects(name, where)
        if not groups:
            msg = f"{name} {f.why}: {_unopened(name)}; delete it, or save the tokenizer again"
            out.append(finding(EOS020, name, msg, severity=Severity.WARNING, fixable=False))
            continue
        fixable = name == GENERATION_CONFIG
        remedy = (
            f"fix writes a new one from config.json, keeping these bytes as {name}{CORRUPT_SUFFIX}"
            if fixable
            else "delete it, or save the tokenizer again"
        )
        msg = f"{name} {f.why}, which JSON readers refuse: {', '.join(groups)}; {remedy}"
        out.append(finding(EOS020, name, msg, fixable=fixable))
    return out


def _ids_text(ids: Sequence[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def malformed_finding(repo: ModelRepo) -> Finding | None:
    """EOS018 when generation_config.json's ``eos_token_id`` is not ids: what each runtime
    that stops by it does with the value, and the ids ``fix`` writes."""
    gen = repo.generation_config
    if gen is None or not gen.eos_malformed:
        return None
    value = gen.eos_token_id
    fails: dict[str, list[str]] = {}  # why -> runtimes
    reads: dict[tuple[int, ...], list[str]] = {}
    none, ignore = [], []
    for rt in RUNTIMES:
        if rt.refusals.eos is None:
            continue
        read = rt.refusals.eos(value)
        if read.fails:
            fails.setdefault(read.fails, []).append(rt.name)
        elif read.ids is None:
            if rt.config_only:  # it reads the file, and stops by config.json alone
                continue
            ignore.append(rt.name)
        elif read.ids:
            reads.setdefault(read.ids, []).append(rt.name)
        else:
            none.append(rt.name)
    groups = []
    if fails:
        who = [n for names in fails.values() for n in names]
        groups.append(f"{_group(who, ('cannot run it', 'cannot run it'))} ({'; '.join(fails)})")
    groups += [_group(who, (f"reads it as {_ids_text(ids)}", f"read it as {_ids_text(ids)}"))
               for ids, who in reads.items()]  # fmt: skip
    if none:
        groups.append(_group(none, ("holds it but no token equals it",
                                    "hold it but no token equals it")))  # fmt: skip
    if ignore:
        groups.append(_group(ignore, ("ignores it", "ignore it")))
    ids = gen.eos_ids or ()
    then = (
        f"fix writes the ids it names, {_ids_text(ids)}, as a list of ints"
        if ids
        else "it names no id, and fix writes none of it"
    )
    msg = (
        f"eos_token_id {json.dumps(value)} is not a token id or a list of ids: "
        f"{', '.join(groups)}; {then}"
    )
    return finding(EOS018, GENERATION_CONFIG, msg)
