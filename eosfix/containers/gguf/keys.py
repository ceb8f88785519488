"""A GGUF's stop keys: llama.cpp's end-of-generation set, decided against the terminators.

The reference reader is llama.cpp (``eosfix.runtimes.llamacpp``): it stops on eos, eot, eom,
the FIM ids and every token whose text is on its list. Findings:

- EOS201: llama.cpp does not stop on a terminator, and eot/eom can hold it (fixable);
- EOS202: eot/eom cannot hold every missing terminator: stop strings are needed;
- EOS011 / EOS012: llama.cpp stops on a token the template writes inside an assistant turn,
  or on an ordinary text token. Fixable when only eot/eom make it stop there: the key is
  pointed at a terminator instead (``eosfix.containers.gguf.plan``). Not when eos points at it
  (eos is what templates render as ``eos_token`` and what ``add_eos`` appends: eosfix never
  changes it), nor when llama.cpp stops on it by its text (no key can change that);
- EOS013: an eos/eot/eom key holds an id past the token list: llama.cpp ignores it ("bad
  special token") and falls back to its default id or a token found by text;
- EOS203 (and EOS011-EOS013 about its items): ollama's Go engine (0.7.1 to 0.24.0) reads
  ``tokenizer.ggml.eos_token_ids``, not eot/eom (``eosfix.containers.gguf.eos_ids``).

The proposal is llama.cpp's set once the planned keys are written. Pure.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from array import array
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from eosfix.analysis.terminators import Terminator, TerminatorSet
from eosfix.containers.gguf.earlystop import FIM_ROLES, SLOTS, causes, classify_eog
from eosfix.containers.gguf.eos_ids import plan_eos_ids
from eosfix.containers.gguf.format import TOKENS_KEY, ValueType, key_name
from eosfix.containers.gguf.plan import ArrayEdit, GgufPlan, KeyEdit, plan_keys
from eosfix.containers.gguf.read import GgufModel
from eosfix.core.codes import EOS013, EOS201, EOS202, Finding, Severity, finding
from eosfix.core.repo import ModelRepo, TokenInfo
from eosfix.decide.keys import StopConfig, StopDecision, StopIdReview
from eosfix.decide.stopids import CODE_BY_KIND, ORDINARY, StopId, in_turn_text
from eosfix.runtimes.llamacpp import LLAMA_CPP_VERSION, EogSet, end_of_generation
from eosfix.runtimes.ollama.modelfile import stop_line

EOG_SOURCE = "llama.cpp end-of-generation set"
ROLES = ("eos", "eot", "eom")


def _ids_str(ids: Sequence[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _slot(model: GgufModel, role: str) -> str:
    """``eot 100 <|user|>``; ``(by text)`` when llama.cpp found it by its text, not a key."""
    token_id, found = model.specials.get(role), model.specials.detected.get(role, ())
    bad = _bad_key(model, role)
    if bad is not None:
        using = "-" if token_id is None else f"{token_id} {model.token_text(token_id)}"
        return f"{role} {bad} (no token; llama.cpp uses {using})"
    if token_id is None and found:
        texts = " or ".join(str(model.token_text(i)) for i in found)
        return f"{role} {texts} (by text, llama.cpp picks one)"
    if token_id is None:
        return f"{role} -"
    return f"{role} {token_id} {model.token_text(token_id)}" + (" (by text)" if found else "")


def slots_text(model: GgufModel) -> str:
    """How llama.cpp built its set from this file's keys, for a person."""
    slots = ", ".join(_slot(model, r) for r in ROLES)
    return f"{slots}; + token texts; {LLAMA_CPP_VERSION.split(' (')[0]}"


def _missing_findings(
    plan: GgufPlan | None, unplaced: Sequence[Terminator], eog: EogSet, ts: TerminatorSet
) -> list[Finding]:
    out = []
    now = _ids_str(sorted(eog.ids))
    for edit in plan.key_edits if plan is not None else ():
        if edit.new in eog.ids:  # a slot pointed away from a cutting id (_early_findings)
            continue
        t = next(t for t in ts.terminators if t.id == edit.new)
        msg = (
            f"llama.cpp does not stop on {t.content} ({t.id}): its end-of-generation set is "
            f"{now}; fix: {edit.key} = {edit.new}"
        )
        out.append(finding(EOS201, edit.key, msg))
    if unplaced:
        names = ", ".join(f"{t.content} ({t.id})" for t in unplaced)
        msg = (
            f"llama.cpp does not stop on {names} and eot/eom cannot hold "
            f"{'it' if len(unplaced) == 1 else 'them'} without dropping a stop id: "
            "use stop strings (see below)"
        )
        out.append(finding(EOS202, TOKENS_KEY, msg))
    return out


def _early_findings(
    model: GgufModel,
    cutting: Sequence[StopId],
    edits: Sequence[KeyEdit],
    fixed: Collection[int],
    keep: Collection[int],
) -> list[Finding]:
    out = []
    for s in cutting:
        why = causes(model, s.id)
        key = key_name(why[0]) if why and why[0] != "text" else TOKENS_KEY
        msg = f"llama.cpp stops on {_early_what(s)}; {_cause_text(model, why)}"
        mine = [e for e in edits if model.specials.get(e.role) == s.id]
        code = CODE_BY_KIND[s.kind]
        if s.id in fixed and mine:
            fix = ", ".join(f"{e.key} = {e.new} ({e.token})" for e in mine)
            out.append(finding(code, key, f"{msg}; fix: {fix}", fixable=True))
            continue
        if s.id in keep:
            msg, severity = f"{msg}; kept: --keep-id {s.id}", Severity.WARNING
        else:
            msg, severity = f"{msg}; {_not_fixable(why)}", _unfixable_severity(s, why)
        out.append(finding(code, key, msg, severity=severity, fixable=False))
    return out


def _unfixable_severity(s: StopId, why: Sequence[str]) -> Severity:
    """An ordinary token llama.cpp stops on only by its text (Qwen2's ``</s>`` text token is
    on its list) cuts the rare reply that writes it, and no file can change that: a warning.
    Anything the file's keys cause, or a token written inside every turn, is an error."""
    by_text_only = "text" in why and not set(why) & {"eos", *SLOTS, *FIM_ROLES}
    return Severity.WARNING if s.kind == ORDINARY and by_text_only else Severity.ERROR


def _early_what(s: StopId) -> str:
    if s.kind == ORDINARY:  # a token type normal or byte: no "added token" in a GGUF
        return f"{s.label}, an ordinary text token: {s.reason}"
    return in_turn_text(s)


def _cause_text(model: GgufModel, why: Sequence[str]) -> str:
    keys = [key_name(r) for r in why if r != "text" and _by_key(model, r)]
    parts = [f"{' and '.join(keys)} {'point' if len(keys) > 1 else 'points'} at it"] if keys else []
    for role in (r for r in why if r != "text" and not _by_key(model, r)):
        bad = _bad_key(model, role)
        if bad is not None:
            parts.append(
                f"{key_name(role)} is {bad}, which is no token, so llama.cpp uses its default "
                f"{role}, this id"
            )
        elif role in model.specials.detected:
            parts.append(f"llama.cpp takes {role} from this token's text")
        else:
            parts.append(f"it is llama.cpp's default {role} for {model.vocab.model!r} vocabularies")
    if "text" in why:
        parts.append("llama.cpp stops on every token with this text (its end-of-generation list)")
    return "; ".join(parts) or "llama.cpp adds it to its end-of-generation set"


def _not_fixable(why: Sequence[str]) -> str:
    if "text" in why:
        return "no key changes that"
    if "eos" in why:
        return (
            "eosfix never changes eos (templates render it as eos_token and add_eos appends "
            "it, so another value changes prompts too): fix eos_token in tokenizer_config.json "
            "and convert again"
        )
    return "no terminator can take its key without dropping another stop id"


def _by_key(model: GgufModel, role: str) -> bool:
    """llama.cpp holds ``role`` from its key (not a default, nor a token found by text)."""
    value = model.vocab.key_ids.get(role)
    return value is not None and value == model.specials.get(role)


def _bad_key(model: GgufModel, role: str) -> int | None:
    """The value of ``role``'s key when it is no token (llama.cpp ignores it), else None."""
    value = model.vocab.key_ids.get(role)
    return value if value is not None and not 0 <= value < model.vocab.n_tokens else None


def _fallback(model: GgufModel, role: str) -> str:
    token_id, found = model.specials.get(role), model.specials.detected.get(role, ())
    if token_id is None and found:
        texts = " or ".join(f"{i} {model.token_text(i)!r}" for i in found)
        return f"takes {role} from a token's text: {texts} (llama.cpp picks one)"
    if token_id is None:
        return f"has no {role}"
    text = repr(model.token_text(token_id))
    if found:
        return f"takes {role} from a token's text: {token_id} {text}"
    return f"uses its default {role} for {model.vocab.model!r} vocabularies, {token_id} {text}"


def _bad_key_findings(model: GgufModel, edits: Sequence[KeyEdit]) -> list[Finding]:
    """EOS013: an eos/eot/eom key holding an id past the token list, as a folder's stop id
    that is no token (llama.cpp logs "bad special token" and falls back)."""
    out = []
    n = model.vocab.n_tokens
    for role in ROLES:
        value = _bad_key(model, role)
        if value is None:
            continue
        key = key_name(role)
        msg = (
            f"{key} is {value}, which is no token (the file has {n} tokens): llama.cpp ignores "
            f'it ("bad special token") and {_fallback(model, role)}'
        )
        mine = next((e for e in edits if e.key == key), None)
        if mine is not None:
            out.append(finding(EOS013, key, f"{msg}; fix: {key} = {mine.new} ({mine.token})"))
        elif role == "eos":
            msg += (
                "; eosfix never changes eos (templates render it as eos_token): fix eos_token "
                "in tokenizer_config.json and convert again"
            )
            out.append(finding(EOS013, key, msg, fixable=False))
        else:
            out.append(finding(EOS013, key, msg, fixable=False))
    return out


@dataclass(frozen=True)
class GgufDecision:
    """The plan (eot/eom for llama.cpp, the list for ollama's Go engine), the terminators no
    key can hold, the cutting ids the edits take out, the list's findings."""

    plan: GgufPlan | None
    unplaced: tuple[Terminator, ...]
    fixed: frozenset[int]
    list_findings: tuple[Finding, ...]


@dataclass(frozen=True)
class GgufStops:
    """The stop keys of a GGUF (``eosfix.decide.keys.StopKeys``)."""

    model: GgufModel

    def eos(self) -> TokenInfo | None:
        """The eos llama.cpp holds, as the tokenizer's eos (templates render its text)."""
        eos_id = self.model.specials.get("eos")
        text = self.model.token_text(eos_id)
        return None if text is None else TokenInfo(text, eos_id, True, False, key_name("eos"))

    def plan(self, ts: TerminatorSet, review: StopIdReview, keep: Collection[int]) -> GgufDecision:
        """The key edits (``eosfix.containers.gguf.plan.plan_keys``) and the ollama list
        (``eosfix.containers.gguf.eos_ids.plan_eos_ids``) for this file."""
        model = self.model
        eog = end_of_generation(model.vocab)
        slots, unplaced, fixed = plan_keys(model, ts, eog, review.cutting, keep)
        values = dict(slots.values) if slots is not None else {}
        listed = plan_eos_ids(model, ts, self.eos(), values, keep)
        edits = [
            *(slots.edits if slots is not None else ()),
            *([listed.edit] if listed.edit else []),
        ]
        if not edits:
            return GgufDecision(None, unplaced, fixed, listed.findings)
        fields = model.header.fields
        in_place = all(
            (isinstance(e, KeyEdit) and e.key in fields and fields[e.key].type is ValueType.UINT32)
            or (isinstance(e, ArrayEdit) and _same_length_int32(model, e))
            for e in edits
        )  # fmt: skip
        edits = [dataclasses.replace(e, in_place=in_place) for e in edits]
        after = slots.eog_after if slots is not None else eog
        return GgufDecision(GgufPlan(tuple(edits), after, in_place), unplaced, fixed,
                            listed.findings)  # fmt: skip

    def decide(
        self, repo: ModelRepo, ts: TerminatorSet, *, keep: tuple[int, ...], config_json: bool
    ) -> StopDecision:
        model = self.model
        eog = end_of_generation(model.vocab)
        eos = self.eos()
        stop_ids = classify_eog(model, ts, eos, eog) if repo.templates else ()
        review = StopIdReview(stop_ids, frozenset())
        decision = (
            self.plan(ts, review, keep)
            if repo.templates
            else GgufDecision(None, (), frozenset(), ())
        )
        plan, unplaced, fixed = decision.plan, decision.unplaced, decision.fixed
        review = StopIdReview(stop_ids, fixed)
        edits = plan.key_edits if plan is not None else ()
        ids = tuple(sorted(eog.ids))
        stop = StopConfig(
            ids, EOG_SOURCE, list(ids), slots_text(model), "llama.cpp's set after `eosfix fix`"
        )
        texts = tuple(
            dict.fromkeys([*(t.content for t in ts.terminators if t.kind == "stop_string"),
                           *(t.content for t in unplaced)])
        )  # fmt: skip
        return StopDecision(
            stop,
            eos,
            review,
            tuple(sorted(plan.eog_after.ids)) if plan is not None else None,
            tuple(_missing_findings(plan, unplaced, eog, ts)),
            (
                *_early_findings(model, review.cutting, edits, fixed, keep),
                *_bad_key_findings(model, edits),
                *decision.list_findings,
            ),
            unplaced,
            stop_instructions(texts) if texts else {},
        )


def _same_length_int32(model: GgufModel, edit: ArrayEdit) -> bool:
    f = model.header.fields.get(edit.key)
    return (
        f is not None
        and f.item_type is ValueType.INT32
        and isinstance(f.value, array)
        and len(f.value) == len(edit.new)
    )


def stop_instructions(texts: Sequence[str]) -> dict[str, str]:
    """How to stop on ``texts`` without changing the file, per program that runs llama.cpp
    (0c1e57098: llama-completion matches a one-token reverse prompt by id; llama-server and
    llama-cli match ``stop``/``--reverse-prompt`` on the text they send, where a control token
    is empty unless ``--special`` is given; ollama's Modelfile ``PARAMETER stop``, quoted as its
    parser reads it: ``eosfix.runtimes.ollama.modelfile``)."""
    quoted = " ".join(f"--reverse-prompt {shlex.quote(t)}" for t in texts)
    stops = json.dumps(list(texts), ensure_ascii=False)
    return {
        "llama-completion": quoted,
        "llama-server": f'--special {quoted}   (with --special, a request\'s "stop": {stops})',
        "ollama": "\n".join(stop_line(t) for t in texts),
    }
