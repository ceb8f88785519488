"""What every runtime rule reads (``StopInputs``) and how a rule is described (``Runtime``).

One module, over 400 lines: the inputs, what a runtime does with the files its JSON reader
refuses (``Refusals``, ``as_read``) and the rule that derives a stop set from them are one
contract, read together.

A runtime's rule drifts between versions. ``Runtime`` holds its current rule (the fields
``reads``/``source``/``derive``/``note``, for versions from ``since`` on) and the rules of
older versions (``older``, each a ``Rule`` with its own range). ``since`` is ``None`` when the
first version a rule holds for is not established. ``executed`` names the runtime version the
conformance tests (tests/conformance/) ran the current rule against; ``cited`` the commit and
lines of the runtime's source a rule that cannot run here was read from, whose behaviour the
conformance tests hold as data; every other rule is modelled from the runtime's source.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

from packaging.version import InvalidVersion, Version

from eosfix.core.repo import (
    ADDED_TOKENS_JSON,
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
)
from eosfix.runtimes.config_defaults import Default


class Layout(NamedTuple):
    """What in a folder decides whether a runtime opens one of its files at all:
    ``added_tokens_decoder``, tokenizer_config.json lists its added tokens (transformers'
    AutoTokenizer then never opens special_tokens_map.json)."""

    added_tokens_decoder: bool = False


class StopInputs(NamedTuple):
    """What the repo's files say about end-of-sequence, already resolved to ids."""

    tokenizer_eos_id: int | None
    tokenizer_eos_content: str | None
    generation_config_exists: bool
    generation_config_eos: tuple[int, ...] | None
    generation_config_eos_is_list: bool
    config_eos: tuple[int, ...] | None
    config_eos_is_list: bool
    text_config_eos: tuple[int, ...] | None
    vocab: Mapping[str, int]
    # generation_config.json has the key, whatever its value (``null`` included): mlx-vlm
    # >= 0.6.3 copies the key over config.json's value even when it is null.
    generation_config_has_eos_key: bool = False
    # The special-token ids llama.cpp's converter would write for this folder (role -> id,
    # e.g. {"eos": 2}); None when not derived from the folder (llama.cpp then falls back to
    # the tokenizer eos and config.json's integer eos).
    gguf_special_ids: Mapping[str, int] | None = None
    # The tokenizer's added tokens, text -> id (``get_added_vocab()``: special or not; never a
    # token only in the model's vocabulary).
    added_tokens: Mapping[str, int] = {}
    # config.json as the runtimes that build transformers' config *object* read it (vLLM,
    # SGLang): its ``model_type`` names the config class, whose default ``eos_token_id`` holds
    # where the file has no such key (eosfix.runtimes.config_defaults). The same for the
    # ``text_config`` object of a vision-language model (``text_config_present``).
    config_model_type: str | None = None
    config_has_eos_key: bool = False
    text_config_present: bool = False
    text_config_model_type: str | None = None
    text_config_has_eos_key: bool = False
    # What JSON readers refuse (``Refusals`` says what each runtime does with it): the files
    # read that start with a UTF-8 byte-order mark, and generation_config.json's
    # ``eos_token_id`` when it is not ids (``"2"``, ``2.0``, ``true``, ``[2, null]``), as
    # written; the fields above then hold no ids of it. A rule never sees either: ``Rule``
    # and ``Runtime`` give it the inputs as that runtime reads them.
    bom: frozenset[str] = frozenset()
    # The files read that no JSON reader parses at all (empty, NUL bytes, cut short): the
    # fields above then hold nothing of them, as for a missing file.
    unreadable: frozenset[str] = frozenset()
    # What decides whether a runtime opens a file at all (``Refusals.only_if``).
    layout: Layout = Layout()
    generation_config_eos_malformed: Malformed | None = None
    # Python's truthiness of generation_config.json's value where the ids do not say it (a
    # value read from one that is not ids); None: from the ids, as ``truthy_generation_eos``.
    generation_config_eos_truthy: bool | None = None

    @property
    def generation_eos_key(self) -> bool:
        return self.generation_config_has_eos_key or self.generation_config_eos is not None


class Malformed(NamedTuple):
    """generation_config.json's ``eos_token_id`` as the file holds it, when it is not ids."""

    value: Any


# --- what a runtime does with what JSON readers refuse -------------------------------------

IGNORES = "ignores the file (as if it were missing)"
FAILS = "cannot load the model"
# What transformers' AutoTokenizer parses with json (every runtime that loads the tokenizer
# with it: transformers, vLLM, SGLang, TGI, mlx-lm, mlx-vlm), all refused with a mark.
TOKENIZER_FILES = (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, ADDED_TOKENS_JSON, TOKENIZER_JSON)
# Why a JSON reader refuses a file, as a runtime's note says it.
BOM_WHY, UNREADABLE_WHY = "starts with a byte-order mark", "is not valid JSON"


def refusing(*names: str) -> dict[str, str]:
    """``Refusals.files`` of a runtime that cannot load the model when its JSON reader refuses
    any of ``names`` (and, when ``generation_config.json`` is not among them, loads that with
    a fallback: IGNORES)."""
    return dict.fromkeys(names, FAILS)


def _legacy_tokenizer_config(layout: Layout) -> bool:
    return not layout.added_tokens_decoder


# transformers' AutoTokenizer opens special_tokens_map.json only when tokenizer_config.json has
# no ``added_tokens_decoder`` (tokenization_utils_base.py ``_from_pretrained``: 5.24 lines
# 1888-1904, 5.19 lines 1851-1866, 4.51 lines 2222-2237): for the runtimes that load their
# tokenizer with it.
AUTOTOKENIZER_READS = {SPECIAL_TOKENS_MAP: _legacy_tokenizer_config}


class EosRead(NamedTuple):
    """How a runtime holds generation_config.json's ``eos_token_id`` when it is not ids:
    ``ids`` the token ids that equal what it holds (None: it ignores the value, as if the key
    were absent; ``()``: it holds the value, and no token equals it), whether it holds a list
    and whether the value is truthy to Python; ``fails``: why it cannot run at all."""

    ids: tuple[int, ...] | None = None
    is_list: bool = False
    truthy: bool = False
    fails: str = ""


EosReader = Callable[[Any], EosRead]


class Refusals(NamedTuple):
    """What a runtime does where JSON readers refuse: ``files`` a file it reads that its JSON
    reader refuses, because it starts with a byte-order mark (none of Python's ``json``, Go's
    ``encoding/json`` or Rust's ``serde_json`` skips the mark) or is not JSON at all (empty,
    NUL bytes, cut short): name -> IGNORES or FAILS; ``only_if`` a file it reads only when
    the folder's inputs say so (absent: whenever it is there); ``eos`` how it holds
    generation_config.json's ``eos_token_id`` when that is not ids (None: it never uses that
    value for stopping, or does not read the file)."""

    files: Mapping[str, str] = {}
    eos: EosReader | None = None
    only_if: Mapping[str, Callable[[Layout], bool]] = {}

    def effect(self, name: str, layout: Layout) -> str | None:
        """IGNORES or FAILS when its reader refuses ``name`` in a folder laid out so; None
        when it does not open that file there."""
        reads = self.only_if.get(name)
        return self.files.get(name) if reads is None or reads(layout) else None


def _numbers(items: Iterable[Any]) -> tuple[int, ...]:
    """The ids Python's ``==`` finds equal to ``items`` (``2.0`` is 2, ``True`` is 1)."""
    return tuple(
        int(i)
        for i in items
        if type(i) in (int, bool) or (type(i) is float and math.isfinite(i) and i.is_integer())
    )


def read_as_tensor(value: Any) -> EosRead:
    """``torch.tensor(value, dtype=torch.long)`` (transformers ``_prepare_special_tokens``):
    numbers become ids (a float truncated, a bool 0 or 1); a string or null raises; a nested
    list builds a tensor generate() then fails on."""
    items = value if type(value) is list else [value]
    if any(type(i) is list for i in items):
        return EosRead(fails="generate() fails on a nested list")
    if any(i is None or type(i) is str for i in items):
        return EosRead(fails="generate() raises TypeError")
    ids = tuple(int(i) for i in items if type(i) is not float or math.isfinite(i))
    return EosRead(ids, type(value) is list, bool(value))


def read_as_set(value: Any) -> EosRead:
    """``{value} if isinstance(value, int) else set(value)``, then ``token in ...`` (vLLM,
    SGLang, mlx-lm): a string is a set of its characters, which no id equals; a float is
    not iterable; a list inside the list is not hashable."""
    if type(value) in (int, bool):
        return EosRead((int(value),), False, bool(value))
    if type(value) is float:
        return EosRead(fails="TypeError: 'float' object is not iterable")
    if type(value) is str:
        return EosRead((), False, bool(value))
    if any(type(i) is list for i in value):
        return EosRead(fails="TypeError: unhashable type: 'list'")
    return EosRead(_numbers(value), True, bool(value))


# --- a rule applied to the inputs as its runtime reads them ---------------------------------


def refused_files(x: StopInputs) -> list[tuple[str, str]]:
    """(name, why) of each file read that JSON readers refuse, by name."""
    marked = [(name, BOM_WHY) for name in x.bom]
    return sorted([*marked, *((name, UNREADABLE_WHY) for name in x.unreadable)])


def as_read(refusals: Refusals, x: StopInputs) -> StopInputs | str:
    """``x`` as a runtime with ``refusals`` reads it, or why it cannot load or generate."""
    if not (x.bom or x.unreadable or x.generation_config_eos_malformed):
        return x
    for name, why in refused_files(x):
        effect = refusals.effect(name, x.layout)
        if effect == FAILS:
            return f"{FAILS}: {name} {why}"
        if effect == IGNORES:  # only generation_config.json is ever ignored
            x = x._replace(generation_config_exists=False, generation_config_eos=None,
                generation_config_eos_is_list=False, generation_config_has_eos_key=False,
                generation_config_eos_malformed=None,
            )  # fmt: skip
    malformed = x.generation_config_eos_malformed
    x = x._replace(bom=frozenset(), unreadable=frozenset(), generation_config_eos_malformed=None)
    if malformed is None or not x.generation_config_exists:
        return x
    if refusals.eos is None:  # the value plays no part in its stop set
        return x
    read = refusals.eos(malformed.value)
    if read.fails:
        return f"cannot generate: {read.fails}"
    if read.ids is None:  # ignored, as if the key were absent
        return x._replace(generation_config_eos=None, generation_config_has_eos_key=False)
    return x._replace(generation_config_eos=read.ids, generation_config_eos_is_list=read.is_list,
        generation_config_eos_truthy=read.truthy,
    )  # fmt: skip


def _reading(
    derive: Callable[[StopInputs], frozenset[int]], refusals: Refusals
) -> Callable[[StopInputs], frozenset[int]]:
    """``derive`` over the inputs as read (``as_read``); no id at all when it cannot run."""

    def read_then_derive(x: StopInputs) -> frozenset[int]:
        read = as_read(refusals, x)
        return frozenset() if isinstance(read, str) else derive(read)

    read_then_derive.__wrapped__ = derive  # type: ignore[attr-defined]
    return read_then_derive


@lru_cache(maxsize=512)  # the rules compare a few dozen fixed bounds ~180 times a check
def parse_version(text: str) -> Version:
    """A PEP 440 version (``"0.32.2"``, ``"4.57.0.dev0"``, ``"2.13.0+cpu"``); ValueError for
    anything else."""
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a version like 0.32.2") from None


def _cmp(a: str, b: str) -> int:
    x, y = parse_version(a), parse_version(b)
    return (x > y) - (x < y)


@dataclass(frozen=True)
class Rule:
    """How a runtime derives its stop set, for versions ``since <= v < until``."""

    derive: Callable[[StopInputs], frozenset[int]]
    reads: str
    source: str
    note: str = ""
    since: str | None = None  # first version (inclusive); None: not established
    until: str | None = None  # first version it no longer holds for; None: the latest
    # What its runtime does where JSON readers refuse (set from its ``Runtime``): ``derive``
    # then takes the inputs as that runtime reads them.
    refusals: Refusals = field(default_factory=Refusals, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.refusals.files or self.refusals.eos is not None:
            raw = getattr(self.derive, "__wrapped__", self.derive)
            object.__setattr__(self, "derive", _reading(raw, self.refusals))

    def holds_for(self, version: str) -> bool:
        low = self.since is None or _cmp(version, self.since) >= 0
        return low and (self.until is None or _cmp(version, self.until) < 0)

    @property
    def versions_str(self) -> str:
        if self.since is None:
            return "not established"
        if self.until is None:
            return f">= {self.since}"
        return f"{self.since} to < {self.until}"


@dataclass(frozen=True)
class Runtime:
    """A runtime: its current rule (the fields up to ``since``) and its older versions' rules."""

    name: str
    reads: str
    source: str
    derive: Callable[[StopInputs], frozenset[int]]
    note: str = ""
    since: str | None = None  # first version the current rule holds for; None: not established
    executed: str | None = None  # the version tests/conformance/ runs the current rule against
    cited: str | None = None  # the commit and lines the current rule was read at, when not run
    older: tuple[Rule, ...] = ()  # the rules of earlier versions, newest first
    floor: str = ""  # why versions below the oldest rule are not modelled
    # Facts the verdict text needs, so no caller branches on a runtime's name:
    config_only: bool = False  # reads config.json's eos and nothing else (--config-json helps)
    first_id_only: bool = False  # keeps only the first id of a list
    remedy: str = ""  # what makes it stop when no file of the folder can (llama.cpp: the GGUF)
    # What it does where JSON readers refuse, for every version (executed where ``executed``
    # is set: tests/conformance/); its rules then derive from the inputs as it reads them.
    refusals: Refusals = field(default_factory=Refusals)

    def __post_init__(self) -> None:
        if self.refusals.files or self.refusals.eos is not None:
            raw = getattr(self.derive, "__wrapped__", self.derive)
            object.__setattr__(self, "derive", _reading(raw, self.refusals))
            older = tuple(dataclasses.replace(r, refusals=self.refusals) for r in self.older)
            object.__setattr__(self, "older", older)

    def refused(self, x: StopInputs) -> str:
        """Why it cannot load (or generate with) the inputs as they are; "" when it can."""
        read = as_read(self.refusals, x)
        return read if isinstance(read, str) else ""

    def ignored(self, x: StopInputs) -> str:
        """The file it reads as if missing, for what its JSON reader refuses ("" when none)."""
        refused = refused_files(x)
        found = [(n, why) for n, why in refused if self.refusals.effect(n, x.layout) == IGNORES]
        return f"ignores {found[0][0]}: it {found[0][1]}" if found else ""

    @cached_property
    def current(self) -> Rule:
        """Made once: the verdicts ask for it ~40 times a check."""
        return Rule(
            self.derive, self.reads, self.source, self.note, self.since, refusals=self.refusals
        )

    @property
    def rules(self) -> tuple[Rule, ...]:
        return (self.current, *self.older)

    @property
    def versioned(self) -> bool:
        """Whether a version can be pinned: the current rule's first version is established."""
        return self.since is not None

    def rule_for(self, version: str | None) -> Rule:
        """The rule for ``version`` (None: the current rule); ValueError when none models it."""
        if version is None:
            return self.current
        if not self.versioned:
            raise ValueError(
                f"{self.name}'s rule is not versioned: it was read from {self.source}, and the "
                "versions it holds for are not established"
            )
        parse_version(version)
        for rule in self.rules:
            if rule.holds_for(version):
                return rule
        lowest = self.rules[-1].since
        reason = f": {self.floor}" if self.floor else ""
        raise ValueError(f"eosfix models {self.name} {lowest} and later{reason}")


def ids_of(*parts: Iterable[int] | None) -> frozenset[int]:
    return frozenset(i for part in parts if part is not None for i in part)


def one(token_id: int | None) -> frozenset[int]:
    return frozenset() if token_id is None else frozenset({token_id})


def truthy_generation_eos(x: StopInputs) -> tuple[int, ...] | None:
    """generation_config.json's eos when Python finds the value truthy, as loaders that read
    ``if eos_token_id := generation_config.get("eos_token_id")`` do: ``0``, ``[]`` and
    ``null`` are not; ``[0]`` is."""
    gen = x.generation_config_eos if x.generation_config_exists else None
    truthy = bool(gen) and (x.generation_config_eos_is_list or gen != (0,))
    if x.generation_config_eos_truthy is not None and gen is not None:  # read from a value
        truthy = x.generation_config_eos_truthy  # that is not ids ("2": truthy, no id)
    return gen if truthy else None


def truthy_over_config(x: StopInputs) -> tuple[int, ...] | None:
    """config.json's eos, replaced by a truthy generation_config.json value (mlx-lm's and
    mlx-vlm's ``load_config``: ``if eos_token_id := generation_config.get("eos_token_id")``)."""
    gen = truthy_generation_eos(x)
    return gen if gen is not None else x.config_eos


def else_tokenizer_eos(eos: tuple[int, ...] | None, x: StopInputs) -> frozenset[int]:
    """The configured ids, replacing the tokenizer's eos; the tokenizer's eos when none are
    configured (``None``)."""
    return ids_of(eos) if eos is not None else one(x.tokenizer_eos_id)


def model_config_eos(x: StopInputs) -> tuple[int, ...] | None:
    # transformers generation/configuration_utils.py from_model_config: falls back to text_config
    return x.config_eos if x.config_eos is not None else x.text_config_eos


def object_eos(
    x: StopInputs, defaults: Mapping[str, Default], *, text_config: bool = False
) -> tuple[bool, tuple[int, ...] | None]:
    """(has the attribute, its ids) of the config object transformers builds from config.json
    (``text_config``: from its ``text_config``): the file's value where it has the key, else
    the default of the class ``defaults`` names for its ``model_type``."""
    if text_config:
        value, model_type = x.text_config_eos, x.text_config_model_type
        has_key = x.text_config_has_eos_key or value is not None
        if not (x.text_config_present or has_key):
            return False, None
    else:
        value, model_type = x.config_eos, x.config_model_type
        has_key = x.config_has_eos_key or value is not None
    if has_key:
        return True, value
    if model_type is None or model_type not in defaults:
        return False, None
    default = defaults[model_type]
    return True, (default,) if isinstance(default, int) else default
