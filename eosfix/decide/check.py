"""Turn the terminator analysis into findings with stable codes and a proposed stop list.

Codes (stable: documented in the README, used by tests and scripts):

- EOS001 error, fixable: a turn terminator is not among the stop ids transformers uses.
- EOS002 error, fixable: generation_config.json is missing and config.json's eos lacks a terminator.
- EOS003 error, fixable: generation_config.json has no eos_token_id: generation never stops on eos.
- EOS004 warning: the tokenizer's eos_token is not in the stop list (TGI, mlx-lm replace it).
- EOS005 warning: turns end with plain text: only stop strings can stop them, no id is written.
- EOS006 error: a terminator is not a single token of this tokenizer: no id can stop on it.
- EOS007 warning: a terminator's id cannot be checked (no tokenizer file lists it).
- EOS008 warning: a terminator is not marked special: decoded replies show it as text.
- EOS009 warning: no turn terminator found: the template writes nothing that ends a reply.
- EOS010 error: what closes the last reply is also written inside a turn (between reasoning
  and answer), and nothing else closes it: no stop id can end the reply without cutting it.
- EOS011 error, fixable: a stop id the template writes inside an assistant turn (cuts the reply).
- EOS012 error, fixable: a stop id that is an ordinary text token (cuts replies that use it).
- EOS013 warning, fixable: a stop id that is no token of the tokenizer (never fires).
- EOS014 warning: eos_token_id is written twice in one JSON object (the last one counts).
- EOS015 error, fixable: a runtime that reads generation_config.json misses a terminator
  transformers stops on, and the file written as a list would make it stop.
  (EOS011-EOS014: ``eosfix.decide.earlystop``; EOS015: ``eosfix.decide.readers``.)
- EOS100 error: a template refused or failed every probe: nothing could be analyzed.
- EOS101 error: a template exceeded a render limit (size, output, loop iterations, calls,
  recursion depth, memory): it was stopped, its analysis is incomplete.
- EOS102 error: a template tried to reach an attribute the sandbox hides (``__class__``...).
- EOS103 error: a template could not finish rendering before the wall-clock backstop on this
  machine: not a verdict on the repo; retry (batches retry it once).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from eosfix.analysis.inturn import closers_inside_a_turn
from eosfix.analysis.terminators import (
    STOP_STRING,
    StopConfig,
    Terminator,
    TerminatorSet,
    current_stop_config,
    find_terminators,
    propose_eos,
    tokenizer_eos,
)
from eosfix.core.findings import Finding, Severity
from eosfix.core.repo import GENERATION_CONFIG, ModelRepo, TokenInfo
from eosfix.decide.earlystop import StopIdReview, review_stop_ids
from eosfix.decide.readers import reader_finding, readers_fixed_by_list

__all__ = ["Finding", "RepoCheck", "Severity", "Status", "check_repo"]


class Status(enum.Enum):
    OK = "ok"  # every terminator is a stop id, and nothing for fix to change
    FIXABLE = "fixable"  # eosfix fix would repair it
    PROBLEMS = "problems"  # errors eosfix cannot fix by writing ids
    NO_TEMPLATE = "no_template"  # a base model: nothing to check
    ERROR = "error"  # not checked: RepoResult.error says why (never a RepoCheck's status)


@dataclass(frozen=True)
class RepoCheck:
    """Everything eosfix knows about one repo; ``check``, ``fix --diff`` and ``fix`` show it."""

    repo: ModelRepo
    terminators: TerminatorSet
    stop: StopConfig
    tokenizer_eos: TokenInfo | None
    proposed: tuple[int, ...] | None
    findings: tuple[Finding, ...]
    # Every stop id of the JSON files, classified, and what fix removes (earlystop.py).
    review: StopIdReview | None = None
    keep_ids: tuple[int, ...] = ()  # ids the user keeps (--keep-id), never removed

    @property
    def status(self) -> Status:
        if not self.repo.templates:
            return Status.NO_TEMPLATE
        errors = [f for f in self.findings if f.severity is Severity.ERROR]
        if any(not f.fixable for f in errors):
            return Status.PROBLEMS
        # A fixable warning too (EOS013: an id that is no token): fix would change a file.
        return Status.FIXABLE if any(f.fixable for f in self.findings) else Status.OK

    @property
    def id_terminators(self) -> tuple[Terminator, ...]:
        return tuple(t for t in self.terminators.terminators if t.kind != STOP_STRING)

    @property
    def unwritten_eog_tokens(self) -> tuple[tuple[str, int], ...]:
        """Special tokens runtimes treat as end-of-generation by their text (llama.cpp's list)
        that no template writes: a model may still have learned them from data the template
        does not show (Llama 3.2's ``<|eom_id|>``). Evidence for a person, never written."""
        from eosfix.runtimes import EOG_TEXTS

        rendered = "".join(p.text or "" for ta in self.terminators.templates for p in ta.rendered)
        return tuple(
            (text, info.id)
            for text in EOG_TEXTS
            if (info := self.repo.added_tokens.get(text)) is not None
            and info.special
            and info.id is not None
            and text not in rendered
        )

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return tuple(t.content for t in self.terminators.terminators if t.kind == STOP_STRING)


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


def _stop_findings(repo: ModelRepo, stop: StopConfig, missing: list[Terminator]) -> list[Finding]:
    if not missing:
        return []
    names = ", ".join(_token_str(t) for t in missing)
    if not stop.generation_config_exists:
        msg = _missing_file_message(repo, stop, names)
        return [Finding("EOS002", GENERATION_CONFIG, msg, fixable=True)]
    if stop.ids is None:
        msg = f"eos_token_id is not set: generation never stops on {names}"
        return [Finding("EOS003", GENERATION_CONFIG, msg, fixable=True)]
    msg = f"eos_token_id {stop.raw} does not include {names}: generation runs past the turn end"
    return [Finding("EOS001", GENERATION_CONFIG, msg, fixable=True)]


def _terminator_findings(repo: ModelRepo, ts: TerminatorSet) -> list[Finding]:
    out = []
    for t in ts.terminators:
        files = ", ".join(sorted({ta.file for ta in ts.templates if ta.name in t.templates}))
        if t.kind == STOP_STRING:
            msg = f"turns end with plain text {t.content!r}: runtimes need it as a stop string"
            out.append(Finding("EOS005", files, msg, Severity.WARNING))
        elif t.id is None and repo.has_tokenizer_json:
            msg = f"{t.content} ends a turn but is not a single token of tokenizer.json"
            out.append(Finding("EOS006", files, msg))
        elif t.id is None:
            msg = f"{t.content} ends a turn; its id cannot be checked without tokenizer.json"
            out.append(Finding("EOS007", files, msg, Severity.WARNING))
        elif t.special is False and t.content != repo.eos_token:
            msg = (
                f"{t.content} ({t.id}) ends a turn but is not marked special: "
                "decoding with skip_special_tokens=True leaves it in the reply text"
            )
            out.append(Finding("EOS008", t.id_source or "", msg, Severity.WARNING))
    cut = closers_inside_a_turn(ts)
    if cut:
        msg = (
            f"{' '.join(cut)} closes the last reply but is also written inside a turn "
            "(between reasoning and answer): stopping on it cuts the turn, and no other token "
            "ends the reply"
        )
        out.append(Finding("EOS010", ts.templates[0].file, msg))
    elif repo.templates and not ts.terminators and any(ta.rendered for ta in ts.templates):
        msg = "no turn terminator found: the template writes nothing that ends a reply"
        out.append(Finding("EOS009", ts.templates[0].file, msg, Severity.WARNING))
    return out


def _template_findings(ts: TerminatorSet) -> list[Finding]:
    out = []
    for ta in ts.templates:
        limited = next((p for p in ta.probes if p.limit is not None), None)
        if limited is not None and limited.limit == "time":  # this machine, not the repo
            msg = f"template {ta.name!r} {limited.refusal}"
            out.append(Finding("EOS103", ta.file, msg))
        elif limited is not None:  # named first: it explains why the probes failed
            escape = limited.limit == "sandbox"
            what = "was stopped by the sandbox" if escape else "exceeded a render limit"
            msg = f"template {ta.name!r} {what}: {limited.refusal}"
            out.append(Finding("EOS102" if escape else "EOS101", ta.file, msg))
        elif not ta.rendered:
            first = ta.refusals[0].refusal if ta.refusals else "no output"
            msg = f"template {ta.name!r} refused every probe ({first})"
            out.append(Finding("EOS100", ta.file, msg))
    return out


def check_repo(
    repo: ModelRepo, *, keep_ids: Iterable[int] = (), config_json: bool = False
) -> RepoCheck:
    """Analyze a loaded repo: terminators, the current stop ids, findings, the proposed list.

    ``keep_ids``: stop ids never removed (``--keep-id``); ``config_json``: config.json's ids
    are edited too, so its early stops are fixable.
    """
    keep = tuple(dict.fromkeys(keep_ids))
    ts = find_terminators(repo)
    stop = current_stop_config(repo)
    eos = tokenizer_eos(repo)
    review = (
        review_stop_ids(repo, ts, eos, stop, keep=keep, config_json=config_json)
        if repo.templates  # a base model: nothing ends a turn, so nothing stops early
        else StopIdReview((), frozenset(), frozenset(), ())
    )
    template_findings = _template_findings(ts)
    # EOS103: an analysis this machine could not finish proposes nothing: fix writes nothing.
    unfinished = any(f.code == "EOS103" for f in template_findings)
    if unfinished:
        review = replace(review, remove=frozenset(), config_remove=frozenset())
    # never add a tokenizer eos that cuts a reply
    listed_eos = None if eos is not None and review.cuts(eos.id) else eos
    proposed = (
        None if unfinished else propose_eos(stop.ids, listed_eos, ts.terminators, review.remove)
    )
    have = set(stop.ids or ())
    missing = [t for t in ts.terminators if t.id is not None and t.id not in have]
    findings = [*template_findings, *_stop_findings(repo, stop, missing)]
    findings += _terminator_findings(repo, ts)
    findings += review.findings
    if proposed is None and repo.templates and not unfinished:
        target, misses = readers_fixed_by_list(repo, ts, listed_eos, stop)
        if misses:
            findings.append(reader_finding(target, misses))
            proposed = target
    stop_list = proposed or stop.ids or ()
    listed_eos = listed_eos if repo.templates else None
    if listed_eos is not None and listed_eos.id is not None and listed_eos.id not in stop_list:
        msg = f"the tokenizer's eos_token {listed_eos.content} ({listed_eos.id}) is not a stop id"
        findings.append(Finding("EOS004", GENERATION_CONFIG, msg, Severity.WARNING))
    return RepoCheck(repo, ts, stop, eos, proposed, tuple(findings), review, keep)
