"""Check a GGUF against llama.cpp's end-of-generation set, and plan the keys that fix it.

A GGUF has no list of stop ids: llama.cpp stops on its EOG set (eos, eot, eom, FIM ids and
token texts, ``eosfix.runtimes.llamacpp``). A terminator already in that set needs nothing
(ChatML's ``<|im_end|>`` is EOG by its text whatever the eos says). A missing one is written
into a free ``tokenizer.ggml.eot_token_id`` / ``eom_token_id``, as llama.cpp's own converter
does for GLM (eot ``<|user|>``, eom ``<|observation|>``). eos is never changed: templates
render it as ``eos_token`` and llama.cpp appends it where ``add_eos`` is set. A slot is free
when writing it removes no id from the EOG set. When the missing terminators outnumber the
free slots, nothing is written and the report says which stop strings to use instead.

Codes (stable, documented in the README):

- EOS201 error, fixable: llama.cpp does not stop on a terminator; eot/eom can hold it.
- EOS202 error: llama.cpp cannot hold every terminator in eot/eom: stop strings are needed.
- EOS011 / EOS012 (as for a folder): llama.cpp stops on a token the template writes inside
  an assistant turn, or on an ordinary text token. Fixable when only eot/eom make it stop
  there: the key is pointed at a terminator instead (the one a missing terminator needs, else
  one llama.cpp stops on already). Not when eos points at it (eos is what templates render
  as ``eos_token`` and what ``add_eos`` appends: eosfix never changes it), nor when llama.cpp
  stops on it by its text (no key can change that).
- EOS005, EOS006, EOS009, EOS1xx: as for a folder (plain-text turns, a terminator that is not
  one token, no terminator found, templates that fail).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from eosfix.analysis.terminators import (
    NEXT_TURN,
    STOP_STRING,
    TOOL_CALL,
    TURN_END,
    StopConfig,
    Terminator,
    TerminatorSet,
    find_terminators,
)
from eosfix.containers.gguf.early import SLOTS, cutting_ids, early_findings, repointable
from eosfix.containers.gguf.read import TOKENS_KEY, GgufModel, ValueType
from eosfix.core.repo import TokenInfo
from eosfix.decide.check import Finding, RepoCheck, Severity, _template_findings
from eosfix.decide.stopids import StopId
from eosfix.runtimes.llamacpp import (
    LLAMA_CPP_VERSION,
    EogSet,
    GgufVocab,
    end_of_generation,
    key_name,
)

EOG_SOURCE = "llama.cpp end-of-generation set"
_KIND_ORDER = {TURN_END: 0, NEXT_TURN: 1, TOOL_CALL: 2}


@dataclass(frozen=True)
class KeyEdit:
    """One ``tokenizer.ggml.*_token_id`` value to write."""

    role: str  # eot | eom
    key: str
    old: int | None  # the value in the file (None: the key is absent)
    new: int
    token: str

    @property
    def old_str(self) -> str:
        return "(unset)" if self.old is None else str(self.old)


@dataclass(frozen=True)
class GgufPlan:
    edits: tuple[KeyEdit, ...]
    eog_after: EogSet
    in_place: bool  # every key exists as UINT32: only those bytes change


@dataclass(frozen=True)
class GgufCheck(RepoCheck):
    """A ``RepoCheck`` of a GGUF: ``stop`` is llama.cpp's EOG set, ``proposed`` the set after
    the fix; ``plan`` the key edits; ``unplaced`` terminators no free key can hold."""

    model: GgufModel | None = None
    eog: EogSet | None = None
    plan: GgufPlan | None = None
    unplaced: tuple[Terminator, ...] = ()
    cutting: tuple[StopId, ...] = ()  # ids of llama.cpp's set that cut a reply (before)

    container = "gguf"

    @property
    def stop_strings_needed(self) -> tuple[str, ...]:
        """Texts a runtime must stop on as strings: plain-text ends, and terminators llama.cpp
        cannot hold as ids."""
        return tuple(dict.fromkeys([*self.stop_strings, *(t.content for t in self.unplaced)]))


def _with_key(vocab: GgufVocab, role: str, token_id: int) -> GgufVocab:
    keys = {**vocab.key_ids, key_name(role): token_id}
    return dataclasses.replace(vocab, key_ids=keys)


def _assign(
    vocab: GgufVocab,
    before: EogSet,
    missing: Sequence[Terminator],
    placed: list[tuple[str, Terminator]] | None = None,
) -> tuple[GgufVocab, list[tuple[str, Terminator]], list[Terminator]]:
    """Put each missing terminator in the first slot that keeps every EOG id and holds it
    (``placed``: slots already rewritten)."""
    placed = list(placed or ())
    unplaced = []
    for t in missing:
        assert t.id is not None
        for role in SLOTS:
            if any(role == r for r, _ in placed):
                continue
            trial = _with_key(vocab, role, t.id)
            after = end_of_generation(trial)
            if before.ids <= after.ids and t.id in after.ids:
                vocab = trial
                placed.append((role, t))
                break
        else:
            unplaced.append(t)
    return vocab, placed, unplaced


def _repoint(
    vocab: GgufVocab,
    before: EogSet,
    bad: StopId,
    roles: Sequence[str],
    candidates: Sequence[Terminator],
) -> tuple[GgufVocab, list[tuple[str, Terminator]]] | None:
    """Point each of ``roles`` at the first candidate terminator that takes ``bad`` out of the
    EOG set and keeps every other id in it."""
    placed = []
    for role in roles:
        for t in candidates:
            assert t.id is not None
            trial = _with_key(vocab, role, t.id)
            after = end_of_generation(trial)
            if before.ids - {bad.id} <= after.ids and t.id in after.ids:
                vocab = trial
                placed.append((role, t))
                break
        else:
            return None
    after = end_of_generation(vocab)
    return (vocab, placed) if bad.id not in after.ids else None


def plan_keys(
    model: GgufModel,
    ts: TerminatorSet,
    eog: EogSet,
    cutting: Sequence[StopId] = (),
    keep: Collection[int] = (),
) -> tuple[GgufPlan | None, tuple[Terminator, ...], frozenset[int]]:
    """The key edits that put every terminator into the EOG set and take out the ids that cut
    a reply (those only eot/eom put there); the terminators no key can hold; the cutting ids
    the edits take out."""
    terms = sorted(
        (t for t in ts.terminators if t.kind != STOP_STRING and t.id is not None),
        key=lambda t: _KIND_ORDER.get(t.kind, 3),
    )
    missing = [t for t in terms if t.id not in eog.ids]
    vocab, fixed = model.vocab, set()
    placed: list[tuple[str, Terminator]] = []
    for s in cutting:
        roles = repointable(model, s, keep)
        todo = [t for t in (*missing, *terms) if all(t is not p for _, p in placed)]
        done = _repoint(vocab, end_of_generation(vocab), s, roles, todo) if roles else None
        if done is not None:
            vocab, new = done
            placed += new
            fixed.add(s.id)
            missing = [t for t in missing if all(t is not p for _, p in new)]
    if not missing and not placed:
        return None, (), frozenset()
    vocab, placed, unplaced = _assign(vocab, end_of_generation(vocab), missing, placed)
    if unplaced:
        return None, tuple(unplaced), frozenset()
    edits = tuple(
        KeyEdit(role, key_name(role), model.vocab.key_ids.get(key_name(role)), t.id or 0, t.content)
        for role, t in placed
    )
    fields = model.header.fields
    in_place = all(e.key in fields and fields[e.key].type is ValueType.UINT32 for e in edits)
    return GgufPlan(edits, end_of_generation(vocab), in_place), (), frozenset(fixed)


def _ids_str(ids: Sequence[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _stop_findings(
    c: GgufPlan | None, unplaced: Sequence[Terminator], eog: EogSet, ts: TerminatorSet
) -> list[Finding]:
    out = []
    now = _ids_str(sorted(eog.ids))
    for edit in c.edits if c is not None else ():
        if edit.new in eog.ids:  # a slot pointed away from a cutting id (_early_findings)
            continue
        t = next(t for t in ts.terminators if t.id == edit.new)
        msg = (
            f"llama.cpp does not stop on {t.content} ({t.id}): its end-of-generation set is "
            f"{now}; fix: {edit.key} = {edit.new}"
        )
        out.append(Finding("EOS201", edit.key, msg, fixable=True))
    if unplaced:
        names = ", ".join(f"{t.content} ({t.id})" for t in unplaced)
        msg = (
            f"llama.cpp does not stop on {names} and eot/eom cannot hold "
            f"{'it' if len(unplaced) == 1 else 'them'} without dropping a stop id: "
            "use stop strings (see below)"
        )
        out.append(Finding("EOS202", TOKENS_KEY, msg))
    return out


def _terminator_findings(ts: TerminatorSet) -> list[Finding]:
    out = []
    for t in ts.terminators:
        keys = ", ".join(sorted({ta.file for ta in ts.templates if ta.name in t.templates}))
        if t.kind == STOP_STRING:
            msg = f"turns end with plain text {t.content!r}: llama.cpp needs it as a stop string"
            out.append(Finding("EOS005", keys, msg, Severity.WARNING))
        elif t.id is None:
            msg = f"{t.content} ends a turn but is not a single token of {TOKENS_KEY}"
            out.append(Finding("EOS006", keys, msg))
    if ts.templates and not ts.terminators and any(ta.rendered for ta in ts.templates):
        msg = "no turn terminator found: the template writes nothing that ends a reply"
        out.append(Finding("EOS009", ts.templates[0].file, msg, Severity.WARNING))
    return out


def check_gguf(model: GgufModel, *, keep_ids: Iterable[int] = ()) -> GgufCheck:
    """Analyze a loaded GGUF: terminators, llama.cpp's EOG set, findings, the key edits.

    ``keep_ids``: ids llama.cpp may keep stopping on even where they cut a reply."""
    repo = model.repo
    keep = frozenset(keep_ids)
    ts = find_terminators(repo)
    eog = end_of_generation(model.vocab)
    eos_id = model.specials.get("eos")
    eos_text = model.token_text(eos_id)
    eos = None if eos_text is None else TokenInfo(eos_text, eos_id, True, False, key_name("eos"))
    cutting = cutting_ids(model, ts, eos, eog) if repo.templates else ()
    plan, unplaced, fixed = plan_keys(model, ts, eog, cutting, keep)
    findings = [*_template_findings(ts), *_stop_findings(plan, unplaced, eog, ts)]
    findings += early_findings(model, cutting, plan.edits if plan else (), fixed, keep)
    findings += _terminator_findings(ts)
    ids = tuple(sorted(eog.ids))
    stop = StopConfig(ids, EOG_SOURCE, False, list(ids))
    proposed = tuple(sorted(plan.eog_after.ids)) if plan is not None else None
    return GgufCheck(
        repo, ts, stop, eos, proposed, tuple(findings),
        model=model, eog=eog, plan=plan, unplaced=unplaced, keep_ids=tuple(keep),
        cutting=cutting,
    )  # fmt: skip


def stop_instructions(texts: Sequence[str]) -> dict[str, str]:
    """How to stop on ``texts`` without changing the file, per program (llama.cpp 0c1e57098:
    llama-completion matches a one-token reverse prompt by id; llama-server and llama-cli
    match ``stop``/``--reverse-prompt`` on the text they send, where a control token is empty
    unless ``--special`` is given)."""
    quoted = " ".join(f"--reverse-prompt {shlex.quote(t)}" for t in texts)
    stops = json.dumps(list(texts), ensure_ascii=False)
    return {
        "llama-completion": quoted,
        "llama-server": f'--special {quoted}   (with --special, a request\'s "stop": {stops})',
        "ollama": "\n".join(f"PARAMETER stop {json.dumps(t, ensure_ascii=False)}" for t in texts),
    }


__all__ = ["LLAMA_CPP_VERSION", "GgufCheck", "GgufPlan", "KeyEdit", "check_gguf", "plan_keys"]
