"""EOS015: runtimes that read generation_config.json, miss a terminator, and would stop on it
once the file holds the list.

transformers may stop while other runtimes that read generation_config.json do not: a
vision-language repo without the file whose eos sits only under config.json's
``text_config`` (transformers falls back to it; mlx-lm and mlx-vlm read only the top level),
a repo with only config.json's eos (TGI then stops on the tokenizer's eos alone), an integer
in the file (TGI ignores it). When writing generation_config.json's ``eos_token_id`` as a
list would make such a runtime stop, that is a fixable finding, not a caveat. Runtimes that
never read the file (candle, ExLlamaV2, llama.cpp) are not counted: ``--config-json`` and the
GGUF fix are their remedies. Each runtime is judged by its current rule. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.analysis.terminators import STOP_STRING, Terminator, TerminatorSet
from eosfix.containers.folder.inputs import inputs_from_files
from eosfix.containers.folder.stopconfig import propose_eos
from eosfix.core.codes import Finding, finding
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, ModelRepo, TokenInfo
from eosfix.decide.stops import StopConfig
from eosfix.runtimes import RUNTIMES, Runtime, apply_generation_config_eos


@dataclass(frozen=True)
class ReaderMiss:
    """A runtime that misses ``missed`` now and stops on them once the list is written."""

    runtime: Runtime
    missed: tuple[Terminator, ...]


def readers_fixed_by_list(
    repo: ModelRepo, ts: TerminatorSet, eos: TokenInfo | None, stop: StopConfig
) -> tuple[tuple[int, ...], tuple[ReaderMiss, ...]]:
    """The list to write and the runtimes it would make stop (none: nothing to write)."""
    terms = [t for t in ts.terminators if t.kind != STOP_STRING and t.id is not None]
    target = propose_eos(stop.ids, eos, ts.terminators, always=True)
    if not terms or not target:
        return (), ()
    gen, cfg = repo.files.get(GENERATION_CONFIG), repo.files.get(CONFIG)
    known = {t.content: t.id for t in ts.terminators}
    now = inputs_from_files(gen.data if gen else None, cfg.data if cfg else None, repo, known, eos)
    after = apply_generation_config_eos(now, target)
    misses = []
    for rt in RUNTIMES:
        before_ids, after_ids = rt.derive(now), rt.derive(after)
        fixed = tuple(t for t in terms if t.id not in before_ids and t.id in after_ids)
        if fixed:
            misses.append(ReaderMiss(rt, fixed))
    return (target, tuple(misses)) if misses else ((), ())


def reader_finding(target: Sequence[int], misses: Sequence[ReaderMiss]) -> Finding:
    """EOS015, naming each runtime, what it reads, and the terminators it misses."""
    names = [f"{m.runtime.name} (reads {m.runtime.reads})" for m in misses]
    who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    tokens = sorted({f"{t.content} ({t.id})" for m in misses for t in m.missed})
    verb = ("does" if len(names) == 1 else "do") + " not stop on"
    them = "it" if len(names) == 1 else "them"
    listed = "[" + ", ".join(str(i) for i in target) + "]"
    msg = (
        f"{who} {verb} {', '.join(tokens)}: generation_config.json with eos_token_id "
        f"{listed} makes {them} stop"
    )
    return finding("EOS015", GENERATION_CONFIG, msg)
