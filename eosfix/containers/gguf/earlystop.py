"""A GGUF key that makes llama.cpp stop too early: which ids of its end-of-generation set cut
a reply, and why llama.cpp stops there.

An id llama.cpp stops on cuts a reply when the chat template writes it inside an assistant
turn, or when it is an ordinary text token (``tokenizer.ggml.token_type`` normal or byte).
Why it is in the set decides the remedy: an ``eot``/``eom`` key can point elsewhere
(``eosfix.containers.gguf.plan`` plans that); ``eos`` is never changed (templates render it as
``eos_token`` and ``add_eos`` appends it); llama.cpp's own list of token texts cannot be
changed by any key. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from eosfix.analysis.terminators import TerminatorSet
from eosfix.containers.gguf.format import BYTE, NORMAL, TOKENS_KEY
from eosfix.containers.gguf.read import GgufModel
from eosfix.core.repo import TokenInfo
from eosfix.decide.stopids import StopId, VocabBound, classify
from eosfix.runtimes.llamacpp import EOG_LIST, EogSet

SLOTS = ("eot", "eom")  # eos stays: it is the template's eos_token and what add_eos appends
FIM_ROLES = ("fim_pad", "fim_rep", "fim_sep")  # llama.cpp stops on these ids too
ORDINARY_TYPES = (NORMAL, BYTE)  # tokenizer.ggml.token_type (not control, not user-defined)


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


def classify_ids(
    model: GgufModel, ts: TerminatorSet, eos: TokenInfo | None, ids: Iterable[int]
) -> tuple[StopId, ...]:
    """Each id as a ``StopId``: those that cut a reply are written inside a turn, or ordinary
    text (token type normal or byte, ``tokenizer.ggml.token_type``); an id past the token
    list is no token."""
    types = model.token_types or ()
    wanted = list(ids)
    ordinary = {i: 0 <= i < len(types) and types[i] in ORDINARY_TYPES for i in wanted}
    bound = VocabBound(model.vocab.n_tokens, None, TOKENS_KEY)
    return classify(
        model.repo, ts, eos, wanted, bound=bound, ordinary=ordinary, pieces=model.vocab.model
    )


def classify_eog(
    model: GgufModel, ts: TerminatorSet, eos: TokenInfo | None, eog: EogSet
) -> tuple[StopId, ...]:
    """Every id of llama.cpp's set as a ``StopId`` (``classify_ids``)."""
    return classify_ids(model, ts, eos, sorted(eog.ids))
