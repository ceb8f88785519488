"""A folder's stop ids that end a reply too early, or never fire: findings, and the ids
``fix`` removes from generation_config.json and config.json.

eosfix's first question is whether every turn terminator is a stop id; this is the other
direction: whether every stop id is a place where a reply is complete.
``eosfix.decide.stopids`` says what token each id is; this module turns that into findings for
the files that hold the ids (generation_config.json, config.json and its ``text_config``).

Codes (stable, documented in the README):

- EOS011 error, fixable: a stop id the template writes inside an assistant turn (between
  reasoning and answer, inside a tool call): generation stops there and the reply is cut.
- EOS012 error, fixable: a stop id that is an ordinary text token (not a special or added
  token): a reply is cut wherever the model writes it.
- EOS013 warning, fixable: a stop id that is no token of the tokenizer: it never fires.
- EOS014 warning: ``eos_token_id`` appears twice in one JSON object: json.loads (and so
  transformers) keeps the last; eosfix reads and edits that one.

The tokenizer's eos is never removed (runtimes that add it would stop there anyway), nor an
id the user keeps (``--keep-id``), nor the last id of a list when nothing else would remain.
config.json's ids are removed only with ``--config-json``; without it, an early stop there
(runtimes that read config.json) is a warning that says so. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from eosfix.analysis.terminators import TerminatorSet
from eosfix.core.codes import EOS014, Finding, Severity, finding
from eosfix.core.jsonedit import duplicate_spans
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, ModelRepo, TokenInfo
from eosfix.decide.keys import StopConfig, StopIdReview
from eosfix.decide.stopids import (
    CODE_BY_KIND,
    OUT_OF_VOCAB,
    REMOVABLE,
    StopId,
    classify,
    what_it_is,
)

TEXT_CONFIG_KEY = ("text_config", "eos_token_id")
EOS_KEY = ("eos_token_id",)


class IdList(NamedTuple):
    """One ``eos_token_id`` value of one file: where it is, its ids, who reads it."""

    file: str
    key: tuple[str, ...]
    ids: tuple[int, ...]
    read: bool  # the list transformers stops on (fix edits it without --config-json)

    @property
    def key_str(self) -> str:
        return ".".join(self.key)


def id_lists(repo: ModelRepo, stop: StopConfig) -> list[IdList]:
    """The ``eos_token_id`` values of generation_config.json and config.json (and its
    ``text_config``), the one transformers reads first."""
    out: list[IdList] = []
    if stop.source == GENERATION_CONFIG and stop.ids:
        out.append(IdList(GENERATION_CONFIG, EOS_KEY, stop.ids, True))
    cfg = repo.files.get(CONFIG)
    if cfg is None:
        return out
    top = _ids(cfg.data.get("eos_token_id"))
    sub = cfg.data.get("text_config")
    nested = _ids(sub.get("eos_token_id")) if isinstance(sub, dict) else ()
    read_top = stop.source == CONFIG
    read_sub = stop.source == f"{CONFIG} text_config"
    if top:
        out.append(IdList(CONFIG, EOS_KEY, top, read_top))
    if nested:
        out.append(IdList(CONFIG, TEXT_CONFIG_KEY, nested, read_sub))
    return out


def _ids(value: object) -> tuple[int, ...]:
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        return tuple(value)
    return ()


def review_stop_ids(
    repo: ModelRepo,
    ts: TerminatorSet,
    eos: TokenInfo | None,
    stop: StopConfig,
    *,
    keep: Iterable[int] = (),
    config_json: bool = False,
) -> tuple[StopIdReview, list[Finding]]:
    """Classify every stop id the repo's JSON files hold and report the ones that cut a
    reply or never fire, with what ``fix`` (and ``fix --config-json``) removes."""
    lists = id_lists(repo, stop)
    eos_id = eos.id if eos is not None else None
    extra = [eos_id] if eos_id is not None else []  # does the tokenizer's eos cut a reply?
    stops = classify(repo, ts, eos, [*(i for lst in lists for i in lst.ids), *extra])
    kinds = {s.id: s for s in stops}
    keep = frozenset(keep)
    terminator_ids = {t.id for t in ts.terminators if t.id is not None}
    remove: set[int] = set()
    config_remove: set[int] = set()
    findings: list[Finding] = []
    for lst in lists:
        editable = lst.read or config_json
        bad = [kinds[i] for i in dict.fromkeys(lst.ids) if kinds[i].kind in REMOVABLE]
        out = {s.id for s in bad if s.id not in keep and s.id != eos_id}
        if not (set(lst.ids) - out) and not terminator_ids and eos_id is None:
            out = set()  # nothing would remain: a list that stops nowhere is no better
        if lst.read:
            remove.update(out)
        if lst.file == CONFIG:  # what --config-json removes (shown even without it)
            config_remove.update(out)
        findings += [_finding(s, lst, s.id in out and editable, keep, eos_id) for s in bad]
    findings += duplicate_findings(repo)
    return StopIdReview(stops, frozenset(remove), frozenset(config_remove)), findings


def _finding(
    s: StopId, lst: IdList, fixable: bool, keep: frozenset[int], eos_id: int | None
) -> Finding:
    what = what_it_is(s)
    severity = Severity.WARNING if s.kind == OUT_OF_VOCAB else Severity.ERROR
    if s.id in keep:
        what += f"; kept: --keep-id {s.id}"
        severity = Severity.WARNING
    elif s.id == eos_id:
        what += (
            "; it is the tokenizer's eos_token, which eosfix never removes and runtimes that "
            "add the tokenizer's eos stop on anyway: change eos_token in tokenizer_config.json"
        )
    elif not lst.read and not fixable:
        what += "; runtimes that read config.json stop there: eosfix fix --config-json removes it"
        severity = Severity.WARNING
    message = f"{lst.key_str} holds {what}"
    return finding(CODE_BY_KIND[s.kind], lst.file, message, severity=severity, fixable=fixable)


# --- duplicate keys ----------------------------------------------------------------------


def duplicate_findings(repo: ModelRepo) -> list[Finding]:
    """EOS014 for each ``eos_token_id`` written more than once in one JSON object."""
    out = []
    for name, key in ((GENERATION_CONFIG, EOS_KEY), (CONFIG, EOS_KEY), (CONFIG, TEXT_CONFIG_KEY)):
        f = repo.files.get(name)
        if f is None:
            continue
        spans = duplicate_spans(f.text, key)
        if spans:
            msg = _duplicate_message(f.text, key, spans, name)
            out.append(finding(EOS014, name, msg))
    return out


def _duplicate_message(
    text: str, key: tuple[str, ...], spans: Sequence[tuple[int, int]], name: str
) -> str:
    lines = [text.count("\n", 0, a) + 1 for a, _ in spans]
    values = [json.dumps(json.loads(text[a:b])) for a, b in spans]
    earlier = ", ".join(f"{v} (line {n})" for v, n in zip(values[:-1], lines[:-1], strict=True))
    msg = (
        f"{'.'.join(key)} is written {len(spans)} times in one object: json.loads, and so "
        f"transformers, keeps only the last, {values[-1]} (line {lines[-1]}), and ignores "
        f"{earlier}; eosfix reads and edits only the last one"
    )
    if name == CONFIG:
        msg += '; serde-based loaders such as candle\'s refuse the file ("duplicate field")'
    return msg
