"""What every runtime rule reads (``StopInputs``) and how a rule is described (``Runtime``).

A runtime's rule drifts between versions. ``Runtime`` holds its current rule (the fields
``reads``/``source``/``derive``/``note``, for versions from ``since`` on) and the rules of
older versions (``older``, each a ``Rule`` with its own range). ``since`` is ``None`` when the
first version a rule holds for is not established. ``executed`` names the runtime version the
conformance tests (tests/conformance/) ran the current rule against; every other rule is
modelled from the runtime's source, not executed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


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

    @property
    def generation_eos_key(self) -> bool:
        return self.generation_config_has_eos_key or self.generation_config_eos is not None


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
    older: tuple[Rule, ...] = ()  # the rules of earlier versions, newest first
    floor: str = ""  # why versions below the oldest rule are not modelled

    @property
    def current(self) -> Rule:
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


def model_config_eos(x: StopInputs) -> tuple[int, ...] | None:
    # transformers generation/configuration_utils.py from_model_config: falls back to text_config
    return x.config_eos if x.config_eos is not None else x.text_config_eos
