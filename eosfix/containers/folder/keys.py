"""A model folder's stop keys: generation_config.json's ``eos_token_id`` (what transformers
reads), config.json's, and the tokenizer's eos, decided against the terminators.

transformers reads generation_config.json alone; only a missing file falls back to
config.json (its ``eos_token_id``, else ``text_config.eos_token_id``): that is what the folder
stops on today (``current_stop_config``).

- EOS001 / EOS002 / EOS003: a terminator transformers does not stop on, told by the state of
  generation_config.json (holds the key / missing / no key);
- EOS011-EOS014: stop ids of the JSON files that cut a reply or never fire
  (``eosfix.containers.folder.earlystop``);
- EOS015: runtimes that read generation_config.json and miss a terminator the written list
  would give them (``readers_fixed_by_list``): transformers may stop while they do not (a
  vision-language repo whose eos sits only under config.json's ``text_config``, which mlx-lm
  and mlx-vlm do not read; config.json's eos alone, where TGI stops on the tokenizer's eos; an
  integer in the file, which TGI ignores). Runtimes that never read the file (candle,
  ExLlamaV2, llama.cpp) are not counted: ``--config-json`` and the GGUF fix are their
  remedies. Each runtime is judged by its current rule;
- EOS004: the tokenizer's eos is not in the list;
- EOS017 / EOS018: a file that starts with a byte-order mark, an ``eos_token_id`` that is not
  ids (``eosfix.containers.folder.refusals``): what the runtimes' JSON reading refuses.

A folder whose source knows the repo holds no model (``model=False``: a Hub repo or cache
snapshot with no config.json, generation_config.json or weights, only tokenizer files) gets
no finding about its stop keys and no proposal: no runtime loads a model from it.

The proposal is the list ``fix`` writes into generation_config.json (``propose_eos``: the
existing ids first, in their order). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from eosfix.analysis.terminators import STOP_STRING, Terminator, TerminatorSet
from eosfix.containers.folder.earlystop import review_stop_ids
from eosfix.containers.folder.inputs import inputs_from_files
from eosfix.containers.folder.refusals import (
    bom_findings,
    malformed_finding,
    unreadable_findings,
)
from eosfix.core.codes import EOS001, EOS002, EOS003, EOS004, EOS015, Finding, finding
from eosfix.core.models import eos_tuple, well_formed_eos
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, ModelRepo, TokenInfo
from eosfix.decide.keys import NO_REVIEW, StopConfig, StopDecision, tokenizer_eos
from eosfix.runtimes import RUNTIMES, Runtime, apply_generation_config_eos


def current_stop_config(repo: ModelRepo) -> StopConfig:
    """transformers reads generation_config.json alone; only a missing file falls back."""
    if repo.generation_config is not None:  # a value that is not ids: the ids it names
        gen = repo.generation_config
        return StopConfig(gen.eos_ids, GENERATION_CONFIG, gen.eos_token_id)
    if repo.config is not None:
        if repo.config.eos_token_id is not None:
            raw = repo.config.eos_token_id
            return StopConfig(eos_tuple(raw), CONFIG, raw)
        if repo.config.text_config is not None and repo.config.text_config.eos_token_id is not None:
            raw = repo.config.text_config.eos_token_id
            return StopConfig(eos_tuple(raw), f"{CONFIG} text_config", raw)
    return StopConfig(None, "none", None)


def propose_eos(
    current: tuple[int, ...] | None,
    eos: TokenInfo | None,
    terminators: Iterable[Terminator],
    remove: Collection[int] = (),
    *,
    always: bool = False,
    rewrite: bool = False,
) -> tuple[int, ...] | None:
    """The list to write, or None when it would not change what transformers stops on.

    Existing ids first in their order (transformers pads with the first; ExLlamaV2 keeps only
    the first), minus ``remove`` (ids that cut a reply or are no token), then the tokenizer's
    eos when a terminator is added (TGI and mlx-lm before 0.32 replace it with the list),
    then each missing terminator id. ``always``: the list even when nothing changes (a
    runtime that reads generation_config.json needs it written as a list); ``rewrite``: the
    list even when the ids are complete, without adding the tokenizer's eos (the value is
    not ids: EOS018).
    """
    before = list(current or ())
    have = [i for i in before if i not in remove]
    missing = [t.id for t in terminators if t.id is not None and t.id not in have]
    if not missing and have == before and not always:
        return tuple(dict.fromkeys(have)) if rewrite else None
    extra = [eos.id] if eos is not None and eos.id is not None and (missing or always) else []
    return tuple(dict.fromkeys([*have, *extra, *missing]))


class ReaderMiss(NamedTuple):
    """A runtime that misses ``missed`` now and stops on them once the list is written."""

    runtime: Runtime
    missed: tuple[Terminator, ...]


def readers_fixed_by_list(
    repo: ModelRepo, ts: TerminatorSet, eos: TokenInfo | None, stop: StopConfig
) -> tuple[tuple[int, ...], tuple[ReaderMiss, ...]]:
    """The list to write and the runtimes it would make stop (none: nothing to write)."""
    terms = [t for t in ts.terminators if t.kind != STOP_STRING and t.id is not None]
    target = propose_eos(stop.ids, eos, ts.terminators, always=True)
    if not terms or not target:
        return (), ()
    gen, cfg = repo.files.get(GENERATION_CONFIG), repo.files.get(CONFIG)
    known = {t.content: t.id for t in ts.terminators}
    now = inputs_from_files(gen.data if gen else None, cfg.data if cfg else None, repo, known, eos)
    after = apply_generation_config_eos(now, target)
    misses = []
    for rt in RUNTIMES:
        before_ids, after_ids = rt.derive(now), rt.derive(after)
        fixed = tuple(t for t in terms if t.id not in before_ids and t.id in after_ids)
        if fixed:
            misses.append(ReaderMiss(rt, fixed))
    return (target, tuple(misses)) if misses else ((), ())


def reader_finding(target: Sequence[int], misses: Sequence[ReaderMiss]) -> Finding:
    """EOS015, naming each runtime, what it reads, and the terminators it misses."""
    names = [f"{m.runtime.name} (reads {m.runtime.reads})" for m in misses]
    who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    tokens = sorted({f"{t.content} ({t.id})" for m in misses for t in m.missed})
    verb = ("does" if len(names) == 1 else "do") + " not stop on"
    them = "it" if len(names) == 1 else "them"
    listed = "[" + ", ".join(str(i) for i in target) + "]"
    msg = (
        f"{who} {verb} {', '.join(tokens)}: generation_config.json with eos_token_id "
        f"{listed} makes {them} stop"
    )
    return finding(EOS015, GENERATION_CONFIG, msg)


def _token_str(t: Terminator) -> str:
    return f"{t.content} ({t.id})" if t.id is not None else t.content


def _fallback_key(stop: StopConfig) -> str:
    return "text_config.eos_token_id" if stop.source.endswith("text_config") else "eos_token_id"


def _missing_file_message(repo: ModelRepo, stop: StopConfig, names: str) -> str:
    """EOS002: what transformers falls back to when generation_config.json is missing (or not
    JSON at all: it ignores that file)."""
    unreadable = repo.unreadable.get(GENERATION_CONFIG)
    if unreadable is not None:
        why = unreadable.why.split(" (")[0]
        reads = f"{CONFIG}, whose {_fallback_key(stop)} {stop.raw}" if stop.ids else None
        said = (
            f"does not include {names}: generation runs past the turn end"
            if reads
            else f"sets none: generation never stops on {names}"
        )
        return (
            f"generation_config.json {why}, so transformers ignores it and reads "
            f"{reads or CONFIG + ', which'} {said}"
        )
    if stop.ids:
        key = _fallback_key(stop)
        return (
            f"generation_config.json is missing and config.json's {key} {stop.raw} does not "
            f"include {names}: generation runs past the turn end"
        )
    if repo.config is None:
        return (
            f"generation_config.json and config.json are missing: no file lists {names} as a "
            "stop id"
        )
    return (
        "generation_config.json is missing and config.json sets no eos_token_id: "
        f"generation never stops on {names}"
    )


def _missing_findings(
    repo: ModelRepo, stop: StopConfig, missing: Sequence[Terminator]
) -> list[Finding]:
    if not missing:
        return []
    names = ", ".join(_token_str(t) for t in missing)
    if repo.generation_config is None:
        return [finding(EOS002, GENERATION_CONFIG, _missing_file_message(repo, stop, names))]
    if stop.ids is None:
        msg = f"eos_token_id is not set: generation never stops on {names}"
        return [finding(EOS003, GENERATION_CONFIG, msg)]
    raw = stop.raw if well_formed_eos(stop.raw) else json.dumps(stop.raw)  # EOS018's as written
    msg = f"eos_token_id {raw} does not include {names}: generation runs past the turn end"
    return [finding(EOS001, GENERATION_CONFIG, msg)]


@dataclass(frozen=True)
class FolderStops:
    """The stop keys of a folder (``eosfix.decide.keys.StopKeys``); ``model``: False when
    the repo is known to hold no model (tokenizer files only)."""

    model: bool = True

    def decide(
        self, repo: ModelRepo, ts: TerminatorSet, *, keep: tuple[int, ...], config_json: bool
    ) -> StopDecision:
        stop = current_stop_config(repo)
        eos = tokenizer_eos(repo)
        if not self.model:  # tokenizer files only: nothing stops, nothing to write
            return StopDecision(stop, eos, NO_REVIEW, None, (), (), model=False)
        review, early = (
            review_stop_ids(repo, ts, eos, stop, keep=keep, config_json=config_json)
            if repo.templates  # a base model: nothing ends a turn, so nothing stops early
            else (NO_REVIEW, [])
        )
        # never add a tokenizer eos that cuts a reply
        listed_eos = None if eos is not None and review.cuts(eos.id) else eos
        malformed = malformed_finding(repo)
        proposed = propose_eos(
            stop.ids, listed_eos, ts.terminators, review.remove, rewrite=malformed is not None
        )
        have = set(stop.ids or ())
        missing = [t for t in ts.terminators if t.id is not None and t.id not in have]
        findings = [
            *unreadable_findings(repo),
            *bom_findings(repo, config_json=config_json),
            *early,
        ]
        if malformed is not None:
            findings.insert(0, malformed)
        if proposed is None and repo.templates:
            target, misses = readers_fixed_by_list(repo, ts, listed_eos, stop)
            if misses:
                findings.append(reader_finding(target, misses))
                proposed = target
        stop_list = proposed or stop.ids or ()
        listed_eos = listed_eos if repo.templates else None
        if listed_eos is not None and listed_eos.id is not None and listed_eos.id not in stop_list:
            msg = (
                f"the tokenizer's eos_token {listed_eos.content} ({listed_eos.id}) is not a stop id"
            )
            findings.append(finding(EOS004, GENERATION_CONFIG, msg))
        return StopDecision(
            stop, eos, review, proposed, tuple(_missing_findings(repo, stop, missing)),
            tuple(findings),
        )  # fmt: skip
