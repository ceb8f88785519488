"""What every runtime rule reads (``StopInputs``) and how a rule is described (``Runtime``).

A runtime's rule drifts between versions. ``Runtime`` holds its current rule (the fields
``reads``/``source``/``derive``/``note``, for versions from ``since`` on) and the rules of
older versions (``older``, each a ``Rule`` with its own range). ``since`` is ``None`` when the
first version a rule holds for is not established. ``executed`` names the runtime version the
conformance tests (tests/conformance/) ran the current rule against; ``cited`` the commit and
lines of the runtime's source a rule that cannot run here was read from, whose behaviour the
conformance tests hold as data; every other rule is modelled from the runtime's source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from packaging.version import InvalidVersion, Version

from eosfix.runtimes.config_defaults import Default


@dataclass(frozen=True)
class StopInputs:
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
    added_tokens: Mapping[str, int] = field(default_factory=dict)
    # config.json as the runtimes that build transformers' config *object* read it (vLLM,
    # SGLang): its ``model_type`` names the config class, whose default ``eos_token_id`` holds
    # where the file has no such key (eosfix.runtimes.config_defaults). The same for the
    # ``text_config`` object of a vision-language model (``text_config_present``).
    config_model_type: str | None = None
    config_has_eos_key: bool = False
    text_config_present: bool = False
    text_config_model_type: str | None = None
    text_config_has_eos_key: bool = False

    @property
    def generation_eos_key(self) -> bool:
        return self.generation_config_has_eos_key or self.generation_config_eos is not None


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

    @cached_property
    def current(self) -> Rule:
        """Made once: the verdicts ask for it ~40 times a check."""
        return Rule(self.derive, self.reads, self.source, self.note, self.since)

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
