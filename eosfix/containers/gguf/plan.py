"""Plan the GGUF keys that make llama.cpp stop at every terminator and nowhere inside a reply.

A GGUF has no list of stop ids: llama.cpp stops on its EOG set (eos, eot, eom, FIM ids and
token texts, ``eosfix.runtimes.llamacpp``). A terminator already in that set needs nothing
(ChatML's ``<|im_end|>`` is EOG by its text whatever the eos says). A missing one is written
into a free ``tokenizer.ggml.eot_token_id`` / ``eom_token_id``, as llama.cpp's own converter
does for GLM (eot ``<|user|>``, eom ``<|observation|>``). eos is never changed: templates
render it as ``eos_token`` and llama.cpp appends it where ``add_eos`` is set. A slot is free
when writing it removes no id from the EOG set. An id that cuts a reply and is in the set
only because eot/eom point at it is taken out by pointing the key at a terminator. When the
missing terminators outnumber the free slots, nothing is planned. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from eosfix.analysis.terminators import (
    NEXT_TURN,
    STOP_STRING,
    TOOL_CALL,
    TURN_END,
    Terminator,
    TerminatorSet,
)
from eosfix.containers.gguf.earlystop import SLOTS, repointable
from eosfix.containers.gguf.format import ValueType, key_name
from eosfix.containers.gguf.read import GgufModel
from eosfix.decide.stopids import StopId
from eosfix.runtimes.llamacpp import EogSet, GgufVocab, end_of_generation

INT32 = ValueType.INT32.name

_KIND_ORDER = {TURN_END: 0, NEXT_TURN: 1, TOOL_CALL: 2}


def _how(in_place: bool) -> str:
    """How a GGUF edit is written: the same words for a key and for an array."""
    if in_place:
        return "in place: only those 4-byte values"
    return "rewrite: new header, tensor data copied and hash-checked"


@dataclass(frozen=True)
class KeyEdit:
    """One ``tokenizer.ggml.*_token_id`` value to write."""

    role: str  # eot | eom
    key: str
    old: int | None  # the value in the file (None: the key is absent)
    new: int
    token: str
    in_place: bool = True  # every planned key exists as UINT32: only those bytes change

    @property
    def file(self) -> str:
        """What the edit changes (the key: a GGUF's findings name keys as files)."""
        return self.key

    @property
    def value(self) -> int:
        return self.new

    @property
    def old_str(self) -> str:
        return "(unset)" if self.old is None else str(self.old)

    @property
    def summary(self) -> str:
        return f"{self.key} -> {self.new} {self.token}"

    @property
    def how(self) -> str:
        return _how(self.in_place)

    def diff(self, name: str = "") -> str:
        """The key edit as a unified-diff-like block (the file is binary)."""
        return (
            f"--- a/{name} (GGUF metadata)\n+++ b/{name} (GGUF metadata)\n"
            f"-{self.key}: {self.old_str}\n+{self.key}: {self.new}  # {self.token}\n"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key, "old": self.old, "new": self.new, "token": self.token,
            "in_place": self.in_place,
        }  # fmt: skip


@dataclass(frozen=True)
class ArrayEdit:
    """A ``tokenizer.ggml.eos_token_ids`` list to write, as an ARRAY of INT32: the only type
    ollama's Go engine reads (``eosfix.containers.gguf.eos_ids``)."""

    key: str
    old: tuple[int, ...] | None  # the items in the file (None: the key is absent)
    old_type: str  # its item type name ("" when absent)
    new: tuple[int, ...]
    tokens: tuple[str, ...]  # the token text of each new item
    in_place: bool = False  # the key exists as an INT32 array of the same length

    @property
    def file(self) -> str:
        return self.key

    @property
    def value(self) -> tuple[int, ...]:
        return self.new

    @property
    def old_str(self) -> str:
        if self.old is None:
            return "(unset)"
        items = "[" + ", ".join(str(i) for i in self.old) + "]"
        return items if self.old_type == INT32 else f"{items} ({self.old_type})"

    @property
    def summary(self) -> str:
        return f"{self.key} -> [{', '.join(str(i) for i in self.new)}] (INT32)"

    @property
    def how(self) -> str:
        return _how(self.in_place)

    def diff(self, name: str = "") -> str:
        new = ", ".join(f"{i} {t}" for i, t in zip(self.new, self.tokens, strict=True))
        return (
            f"--- a/{name} (GGUF metadata)\n+++ b/{name} (GGUF metadata)\n"
            f"-{self.key}: {self.old_str}\n+{self.key}: [{', '.join(map(str, self.new))}]"
            f"  # INT32: {new}\n"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key, "old": None if self.old is None else list(self.old),
            "old_type": self.old_type or None, "new": list(self.new), "type": f"ARRAY of {INT32}",
            "tokens": list(self.tokens), "in_place": self.in_place,
        }  # fmt: skip


GgufEdit = KeyEdit | ArrayEdit
GgufValue = int | tuple[int, ...]  # a UINT32 value, or an ARRAY of INT32


@dataclass(frozen=True)
class GgufPlan:
    edits: tuple[GgufEdit, ...]
    eog_after: EogSet
    in_place: bool  # every edit rewrites existing bytes of the same size: nothing else moves

    @property
    def key_edits(self) -> tuple[KeyEdit, ...]:
        """The ``*_token_id`` edits (llama.cpp's slots)."""
        return tuple(e for e in self.edits if isinstance(e, KeyEdit))

    @property
    def values(self) -> dict[str, GgufValue]:
        """key -> the value to write."""
        return {e.key: e.value for e in self.edits}


def _with_key(vocab: GgufVocab, role: str, token_id: int) -> GgufVocab:
    keys = {**vocab.key_ids, role: token_id}
    return vocab._replace(key_ids=keys)


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
    fields = model.header.fields
    keys = [key_name(role) for role, _ in placed]
    in_place = all(k in fields and fields[k].type is ValueType.UINT32 for k in keys)
    edits = tuple(
        KeyEdit(role, key, model.vocab.key_ids.get(role), t.id or 0, t.content, in_place)
        for key, (role, t) in zip(keys, placed, strict=True)
    )
    return GgufPlan(edits, end_of_generation(vocab), in_place), (), frozenset(fixed)
