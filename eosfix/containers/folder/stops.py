"""A model folder's stop keys: generation_config.json's ``eos_token_id`` (what transformers
reads), config.json's, and the tokenizer's eos, decided against the terminators.

- EOS001 / EOS002 / EOS003: a terminator transformers does not stop on, told by the state of
  generation_config.json (holds the key / missing / no key);
- EOS011-EOS014: stop ids of the JSON files that cut a reply or never fire
  (``eosfix.containers.folder.earlystop``);
- EOS015: runtimes that read generation_config.json and miss a terminator the written list
  would give them (``eosfix.containers.folder.readers``);
- EOS004: the tokenizer's eos is not in the list;
- EOS017 / EOS018: a file that starts with a byte-order mark, an ``eos_token_id`` that is not
  ids (``eosfix.containers.folder.refusals``): what the runtimes' JSON reading refuses.

A folder whose source knows the repo holds no model (``model=False``: a Hub repo or cache
snapshot with no config.json, generation_config.json or weights, only tokenizer files) gets
no finding about its stop keys and no proposal: no runtime loads a model from it.

The proposal is the list ``fix`` writes into generation_config.json (existing ids first,
``eosfix.containers.folder.stopconfig.propose_eos``). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.analysis.terminators import Terminator, TerminatorSet
from eosfix.containers.folder.earlystop import review_stop_ids
from eosfix.containers.folder.readers import reader_finding, readers_fixed_by_list
from eosfix.containers.folder.refusals import bom_findings, malformed_finding
from eosfix.containers.folder.stopconfig import current_stop_config, propose_eos
from eosfix.core.codes import Finding, finding
from eosfix.core.models import well_formed_eos
from eosfix.core.repo import GENERATION_CONFIG, ModelRepo
from eosfix.decide.stops import NO_REVIEW, StopConfig, StopDecision, tokenizer_eos


def _token_str(t: Terminator) -> str:
    return f"{t.content} ({t.id})" if t.id is not None else t.content


def _missing_file_message(repo: ModelRepo, stop: StopConfig, names: str) -> str:
    """EOS002: what transformers falls back to when generation_config.json is missing."""
    if stop.ids:
        key = "text_config.eos_token_id" if stop.source.endswith("text_config") else "eos_token_id"
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
        return [finding("EOS002", GENERATION_CONFIG, _missing_file_message(repo, stop, names))]
    if stop.ids is None:
        msg = f"eos_token_id is not set: generation never stops on {names}"
        return [finding("EOS003", GENERATION_CONFIG, msg)]
    raw = stop.raw if well_formed_eos(stop.raw) else json.dumps(stop.raw)  # EOS018's as written
    msg = f"eos_token_id {raw} does not include {names}: generation runs past the turn end"
    return [finding("EOS001", GENERATION_CONFIG, msg)]


@dataclass(frozen=True)
class FolderStops:
    """The stop keys of a folder (``eosfix.decide.stops.StopKeys``); ``model``: False when
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
        findings = [*bom_findings(repo, config_json=config_json), *early]
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
            findings.append(finding("EOS004", GENERATION_CONFIG, msg))
        return StopDecision(
            stop, eos, review, proposed, tuple(_missing_findings(repo, stop, missing)),
            tuple(findings),
        )  # fmt: skip
