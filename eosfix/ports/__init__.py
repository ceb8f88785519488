"""Porting a model: the kit for a hand-written prompt and generation loop.

- ``render``: one conversation rendered exactly as ``apply_chat_template`` does, with its ids
  and the stop ids a loop compares (``render_conversation``);
- ``goldens``: a fixed set of conversations, rendered, tokenized and cut where a correct loop
  stops, for a port's tests (``iter_goldens``);
- ``diagnose``: what went wrong in what a loop produced (``diagnose``);
- ``loop``: a probe of the analysis cut into prompt and reply (``explain`` shows it).
"""

from __future__ import annotations

from eosfix.ports.diagnose import Diagnosis, Problem, diagnose
from eosfix.ports.goldens import GOLDEN_CASES, goldens_jsonl, iter_goldens
from eosfix.ports.loop import ProbeSplit, TokenizedProbe, split_probe, tokenize_probe
from eosfix.ports.render import (
    Conversation,
    ConversationRefused,
    LoopStops,
    PortInputError,
    RenderedPrompt,
    loop_stops,
    render_conversation,
)

__all__ = [
    "GOLDEN_CASES",
    "Conversation",
    "ConversationRefused",
    "Diagnosis",
    "LoopStops",
    "PortInputError",
    "ProbeSplit",
    "Problem",
    "RenderedPrompt",
    "TokenizedProbe",
    "diagnose",
    "goldens_jsonl",
    "iter_goldens",
    "loop_stops",
    "render_conversation",
    "split_probe",
    "tokenize_probe",
]
