"""Stop ids as tokens: which token each stop id is, and whether stopping there cuts a reply.

Vocabulary (each stop id gets one ``kind``):

- ``terminator``: it ends a turn, a tool call or the whole conversation (``eosfix.analysis.terminators``);
- ``eos``: the tokenizer's ``eos_token``;
- ``special``: a special or added token the template never writes inside a turn (a pad
  token, an unwritten ``<|eom_id|>``...): stopping there ends nothing early;
- ``in_turn``: a token the template writes *inside* an assistant turn (between reasoning
  and answer, or inside a tool call): the model emits it before its reply is complete, so
  stopping there cuts the reply (gpt-oss ``<|end|>``);
- ``ordinary``: an ordinary text token of the vocabulary (not a special or added token), e.g.
  ``#``: the model writes it inside replies, and stopping there cuts them;
- ``out_of_vocab``: no token has this id, so the model never emits it (a dead stop id);
- ``unchecked``: no tokenizer file names the id (no tokenizer.json): eosfix cannot tell.

What counts as the vocabulary: the tokens of tokenizer.json (its model's vocabulary plus its
added tokens; holes between them are not tokens), or a GGUF's token list. config.json's
``vocab_size`` is often padded beyond the tokenizer (Qwen2.5: 151936 rows, 151665 tokens): a
padded row has an embedding but no token, was never a training target, and cannot be
decoded, so an id there is out of the vocabulary too. Without tokenizer.json only an id at or
beyond ``vocab_size`` is known to be out; any other id the added tokens do not name is
``unchecked``, never guessed.

Pure; tokenizer.json is loaded (lazily) only for an id the added tokens do not name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from eosfix.analysis.inturn import closers_inside_a_turn, in_turn_sighting
from eosfix.analysis.positions import IN_TOOL_CALL, IN_TURN
from eosfix.analysis.terminators import STOP_STRING, TerminatorSet
from eosfix.core.codes import CODES, Code
from eosfix.core.errors import RepoLoadError
from eosfix.core.repo import CONFIG, ModelRepo, TokenInfo
from eosfix.decide.tokentext import cut_clause, decode_piece, shown

TERMINATOR = "terminator"
EOS = "eos"
SPECIAL = "special"
IN_TURN_KIND = "in_turn"
ORDINARY = "ordinary"
OUT_OF_VOCAB = "out_of_vocab"
UNCHECKED = "unchecked"
CUTTING = (IN_TURN_KIND, ORDINARY)  # the model emits it before its reply is complete
REMOVABLE = (IN_TURN_KIND, ORDINARY, OUT_OF_VOCAB)  # what ``fix`` takes out of a list
# The finding of a stop id of each kind, whatever holds it (a file's list, a GGUF key): the
# registry's entries say which kind each reports.
CODE_BY_KIND: dict[str, Code] = {c.stop_id_kind: c for c in CODES.values() if c.stop_id_kind}


class StopId(NamedTuple):
    """One stop id, what token it is, and why it is (or is not) a good place to stop.

    ``token`` is the token as the tokenizer stores it (None: unknown); ``text`` what the
    model writes when it emits it (decoded); ``reason`` a clause saying where it is written
    or where it would cut; ``evidence`` the rendered probe text around it (in-turn tokens).
    """

    id: int
    kind: str
    token: str | None = None
    text: str | None = None
    reason: str = ""
    evidence: str = ""
    # The reply's only closer, also written inside a turn (EOS010, EOS016): kept where it is,
    # since nothing else ends the reply, but a finding says it cuts one: never added.
    closes_inside: bool = False

    @property
    def cuts(self) -> bool:
        return self.kind in CUTTING

    @property
    def label(self) -> str:
        """``<|end|> (200007)``, ``'#' (2)``, or the bare id when the token is unknown."""
        if self.token is None:
            return str(self.id)
        if self.kind == ORDINARY:
            return f"{shown(self.text or self.token)} ({self.id})"
        return f"{self.token} ({self.id})"


class VocabBound(NamedTuple):
    """How many ids are tokens: tokenizer.json's count, and config.json's ``vocab_size``."""

    tokenizer_size: int | None  # tokens of tokenizer.json / the GGUF list (None: unknown)
    config_size: int | None  # config.json vocab_size (text_config's for a VLM)
    source: str = "tokenizer.json"

    def describe(self, token_id: int) -> str:
        """Why ``token_id`` is no token, as a clause."""
        cfg = self.config_size
        if cfg is not None and token_id >= cfg:
            return f"it is beyond {CONFIG}'s vocab_size {cfg}, so the model has no output for it"
        if self.tokenizer_size is None:
            return "the tokenizer has no token with this id"
        tokens = f"{self.source} has {self.tokenizer_size} tokens and none with this id"
        if cfg is not None and cfg > self.tokenizer_size:
            return (
                f"{tokens}; {CONFIG}'s vocab_size {cfg} only pads the embedding, and a "
                "padded row was never a training target: the model never emits it"
            )
        return f"{tokens}: the model never emits it"


def config_vocab_size(repo: ModelRepo) -> int | None:
    """config.json's ``vocab_size`` (text_config's for a vision-language model)."""
    cfg = repo.config
    if cfg is None:
        return None
    size = _int(getattr(cfg, "vocab_size", None))
    if size is None and cfg.text_config is not None:
        size = _int(getattr(cfg.text_config, "vocab_size", None))
    return size


def _tokenizer_size(repo: ModelRepo) -> int | None:
    """How many tokens tokenizer.json has (loads it: call only for an unresolved id)."""
    tok = repo.tokenizer() if repo.has_tokenizer_json else None
    return None if tok is None else int(tok.get_vocab_size(with_added_tokens=True))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def classify(
    repo: ModelRepo,
    ts: TerminatorSet,
    eos: TokenInfo | None,
    ids: Iterable[int],
    *,
    bound: VocabBound | None = None,
    ordinary: Mapping[int, bool] | None = None,
    pieces: str = "",
) -> tuple[StopId, ...]:
    """Each id of ``ids`` (order kept, duplicates dropped) as a ``StopId``.

    ``ordinary`` overrides which ids are ordinary text tokens (a GGUF's token types); by
    default an id is ordinary when tokenizer.json has it in its model's vocabulary and not
    among its added tokens. ``pieces``: how raw pieces decode without tokenizer.json (a
    GGUF's ``tokenizer.ggml.model``: ``gpt2`` byte-level, else SentencePiece).
    """
    bound = bound or VocabBound(None, config_vocab_size(repo))
    ctx = _Context(repo, ts, eos, bound, ordinary, pieces)
    return tuple(ctx.classify(i) for i in dict.fromkeys(ids))


class _Context:
    """What classifying needs, computed once for all the ids of one repo."""

    def __init__(
        self,
        repo: ModelRepo,
        ts: TerminatorSet,
        eos: TokenInfo | None,
        bound: VocabBound,
        ordinary: Mapping[int, bool] | None,
        pieces: str,
    ) -> None:
        self.repo, self.ts, self.eos, self.bound = repo, ts, eos, bound
        self.ordinary, self.pieces = ordinary, pieces
        ends = (*ts.terminators, *ts.additional)
        self.ends = {t.id: t for t in ends if t.id is not None}
        self.positions = ts.positions()
        self.named = set(repo.special_tokens.values())
        self.added = {i.id for i in repo.added_tokens.values() if i.id is not None}
        self.stop_strings = [t.content for t in ts.terminators if t.kind == STOP_STRING]
        self.unsure = set(closers_inside_a_turn(ts))  # EOS010: removing them stops nothing

    def classify(self, token_id: int) -> StopId:
        found = self._classify(token_id)
        if found.token is not None and found.token in self.unsure:
            return found._replace(closes_inside=True)
        return found

    def _classify(self, token_id: int) -> StopId:
        if token_id in self.ends:
            t = self.ends[token_id]
            return StopId(token_id, TERMINATOR, t.content, t.content)
        try:
            info = self.repo.token_at(token_id)
        except RepoLoadError as exc:  # a tokenizer.json no tokenizer loads: cannot tell
            return StopId(token_id, UNCHECKED, reason=f"{self.bound.source}: {exc.message}")
        if info is None:
            return self._unknown(token_id)
        place = self._written_in_turn(info)
        if place is not None:
            where, evidence = place
            return StopId(token_id, IN_TURN_KIND, info.content, info.content, where, evidence)
        if self.eos is not None and token_id == self.eos.id:
            return StopId(token_id, EOS, info.content, info.content)
        if self._is_ordinary(info):
            text = self._decoded(token_id, info.content)
            if not any(s.startswith(text.strip() or text) for s in self.stop_strings):
                return StopId(token_id, ORDINARY, info.content, text, cut_clause(text))
        return StopId(token_id, SPECIAL, info.content, info.content)

    def _unknown(self, token_id: int) -> StopId:
        b = self.bound
        if b.tokenizer_size is None and self.repo.has_tokenizer_json:
            b = self.bound = b._replace(tokenizer_size=_tokenizer_size(self.repo))
        known = b.tokenizer_size is not None
        beyond = b.config_size is not None and token_id >= b.config_size
        if known or beyond or token_id < 0:
            return StopId(token_id, OUT_OF_VOCAB, reason=b.describe(token_id))
        why = f"no tokenizer file names it (no {b.source} here)"
        return StopId(token_id, UNCHECKED, reason=why)

    def _written_in_turn(self, info: TokenInfo) -> tuple[str, str] | None:
        """(where, evidence) when a template writes the token inside an assistant turn."""
        token = info.content
        if token in self.unsure:
            return None
        wheres = self.positions.get(token)
        if wheres is not None:  # a control token: eosfix.analysis.positions placed it
            if IN_TURN not in wheres and IN_TOOL_CALL not in wheres:
                return None
        elif info.special or info.id not in self.added:
            # A control token no probe placed inside a turn, or an ordinary vocabulary
            # entry (the ordinary rule places it). Only a plain added token (``</think>``,
            # ``<tool_call>``: text to the scanner) is looked for in the probes here.
            return None
        for ta in self.ts.templates:
            found = in_turn_sighting(ta, token, whole_call=wheres is not None)
            if found is not None:
                return found
        return None

    def _is_ordinary(self, info: TokenInfo) -> bool:
        if self.ordinary is not None:
            return bool(info.id is not None and self.ordinary.get(info.id, False))
        if info.content in self.named or info.id in self.added:
            return False  # an added token, or one the tokenizer names (eos, pad...)
        tok = self.repo.tokenizer()  # loaded already: token_at found the id in it
        added = tok.get_added_tokens_decoder() if tok is not None else {}
        return info.id not in added

    def _decoded(self, token_id: int, piece: str) -> str:
        tok = self.repo.tokenizer()
        if tok is not None:
            return str(tok.decode([token_id], skip_special_tokens=False))
        return decode_piece(piece, self.pieces)


def in_turn_text(s: StopId) -> str:
    """An in-turn stop id, where the template writes it, and what stopping there does (every
    container's EOS011)."""
    evidence = s.evidence.replace("\n", "\\n")
    return (
        f"{s.label}, which the template writes inside an assistant turn ({s.reason}: "
        f"{evidence}): generation stops there and the rest of the reply never comes"
    )


def what_it_is(s: StopId) -> str:
    """What a stop id that cuts a reply or never fires is, and why, as a clause."""
    if s.kind == IN_TURN_KIND:
        return in_turn_text(s)
    if s.kind == ORDINARY:
        return f"{s.label}, an ordinary text token, not a special or added token: {s.reason}"
    return f"{s.id}, which is no token: {s.reason}"
