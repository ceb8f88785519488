"""A GGUF key that makes llama.cpp stop too early: which ids of its end-of-generation set cut
a reply, why llama.cpp stops there, and the findings (EOS011, EOS012).

An id llama.cpp stops on cuts a reply when the chat template writes it inside an assistant
turn, or when it is an ordinary text token (``tokenizer.ggml.token_type`` normal or byte).
Why it is in the set decides the remedy: an ``eot``/``eom`` key can point elsewhere
(``eosfix.containers.gguf.plan`` plans that); ``eos`` is never changed (templates render it as
``eos_token`` and ``add_eos`` appends it); llama.cpp's own list of token texts cannot be
changed by any key. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from eosfix.analysis.terminators import TerminatorSet
from eosfix.containers.gguf.read import TOKENS_KEY, GgufModel
from eosfix.core.findings import Finding, Severity
from eosfix.core.repo import TokenInfo
from eosfix.decide.earlystop import CODES, in_turn_text
from eosfix.decide.stopids import ORDINARY, StopId, VocabBound, classify
from eosfix.runtimes.llamacpp import EOG_LIST, EogSet, key_name

if TYPE_CHECKING:
    from eosfix.containers.gguf.plan import KeyEdit

SLOTS = ("eot", "eom")  # eos stays: it is the template's eos_token and what add_eos appends
FIM_ROLES = ("fim_pad", "fim_rep", "fim_sep")  # llama.cpp stops on these ids too
ORDINARY_TYPES = (1, 6)  # tokenizer.ggml.token_type: normal, byte (3 control, 4 user-defined)


def causes(model: GgufModel, token_id: int) -> tuple[str, ...]:
    """Why llama.cpp stops on ``token_id``: the roles whose id it is, and ``text`` when its
    text is on llama.cpp's end-of-generation list."""
    roles = tuple(r for r in ("eos", "eot", "eom", *FIM_ROLES) if model.specials.get(r) == token_id)
    text = model.token_text(token_id)
    return (*roles, "text") if text in EOG_LIST else roles


def repointable(model: GgufModel, s: StopId, keep: Collection[int]) -> tuple[str, ...]:
    """The slots to point elsewhere so llama.cpp no longer stops on ``s`` (none: it cannot)."""
    why = causes(model, s.id)
    if s.id in keep or not why or not set(why) <= set(SLOTS):
        return ()
    return why


def cutting_ids(
    model: GgufModel, ts: TerminatorSet, eos: TokenInfo | None, eog: EogSet
) -> tuple[StopId, ...]:
    """The ids of llama.cpp's set that cut a reply: written inside a turn, or ordinary text
    (token type normal or byte, ``tokenizer.ggml.token_type``)."""
    types = model.token_types or ()
    ordinary = {i: i < len(types) and types[i] in ORDINARY_TYPES for i in eog.ids}
    bound = VocabBound(model.vocab.n_tokens, None, TOKENS_KEY)
    stops = classify(
        model.repo, ts, eos, sorted(eog.ids), bound=bound, ordinary=ordinary,
        pieces=model.vocab.model,
    )  # fmt: skip
    return tuple(s for s in stops if s.cuts)


def early_findings(
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
        msg = f"llama.cpp stops on {_early_what(s)}; {_cause_text(why)}"
        mine = [e for e in edits if model.specials.get(e.role) == s.id]
        if s.id in fixed and mine:
            fix = ", ".join(f"{e.key} = {e.new} ({e.token})" for e in mine)
            out.append(Finding(CODES[s.kind], key, f"{msg}; fix: {fix}", fixable=True))
            continue
        if s.id in keep:
            msg, severity = f"{msg}; kept: --keep-id {s.id}", Severity.WARNING
        else:
            msg, severity = f"{msg}; {_not_fixable(why)}", _unfixable_severity(s, why)
        out.append(Finding(CODES[s.kind], key, msg, severity))
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


def _cause_text(why: Sequence[str]) -> str:
    keys = [key_name(r) for r in why if r != "text"]
    parts = [f"{' and '.join(keys)} {'point' if len(keys) > 1 else 'points'} at it"] if keys else []
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
