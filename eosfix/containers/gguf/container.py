"""A GGUF file as a container: its repo, its stop keys, its plan, llama.cpp's verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eosfix.containers.gguf.plan import KeyEdit
from eosfix.containers.gguf.read import GgufModel, load_gguf
from eosfix.containers.gguf.stops import GgufStops
from eosfix.core.repo import ModelRepo
from eosfix.decide.check import RepoCheck
from eosfix.decide.verdicts import RowInputs, RuntimeTable, build_table
from eosfix.runtimes import Pins, llamacpp

# llama.cpp reading a GGUF (not a folder a converter would turn into one).
GGUF_READER = dataclasses.replace(
    llamacpp.RUNTIME,
    reads="tokenizer.ggml eos/eot/eom + token texts",
    note="LM Studio, llama-cpp-python and ollama run it",
    remedy="",
)


@dataclass(frozen=True)
class Gguf:
    """A GGUF file read from its header; ``keys`` decide llama.cpp's end-of-generation set."""

    model: GgufModel
    kind = "gguf"

    @property
    def repo(self) -> ModelRepo:
        return self.model.repo

    @property
    def keys(self) -> GgufStops:
        return GgufStops(self.model)

    def plan(self, check: RepoCheck, *, config_json: bool = False) -> tuple[KeyEdit, ...]:
        """The ``tokenizer.ggml.*_token_id`` values ``fix`` writes (config_json: no such file)."""
        plan, _, _ = self.keys.plan(check.terminators, check.review, check.keep_ids)
        return plan.edits if plan is not None else ()

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[KeyEdit], pins: Pins | None
    ) -> RuntimeTable:
        """llama.cpp's set now and once the planned keys are written."""
        now = frozenset(check.stop.ids or ())
        after = now if check.proposed is None else frozenset(check.proposed)
        spec = RowInputs(GGUF_READER, GGUF_READER.current, (now, after, after))
        return build_table(check, [spec])


def open_gguf(path: Path) -> Gguf:
    """Read the GGUF's header (a later shard is read from the first)."""
    return Gguf(load_gguf(path))
