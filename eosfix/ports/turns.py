"""Turn headers of a chat template, and a generated transcript cut into control tokens and text.

Vocabulary:

- **turn header**: what the template writes to open a turn of one role, found by rendering
  sentinel conversations: ``<|im_start|>user\\n`` (ChatML), ``<|start_header_id|>user
  <|end_header_id|>\\n\\n`` (Llama 3), ``<start_of_turn>user\\n`` (Gemma). A model whose loop
  does not stop writes one after its answer: an invented turn.
- **plain header**: the same gap between two turns with every control token removed, which
  is what a reply decoded with ``skip_special_tokens=True`` shows (``\\nuser\\n``).
- **transcript**: what a loop generated, as pieces: control tokens (with their id when known)
  and text. Positions count tokens for ids and characters for text.

Pure: no printing, no writing. tokenizer.json is loaded on first use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from eosfix.analysis.shapes import ASSISTANT0, ASSISTANT1, SYSTEM, USER1, USER2
from eosfix.analysis.terminators import NEXT_TURN, SpecialScanner
from eosfix.core.repo import ChatTemplate
from eosfix.decide.check import RepoCheck
from eosfix.ports.render import (
    Conversation,
    ConversationRefused,
    LoopStops,
    can_decode,
    decode,
    id_names,
    render_with,
)


@dataclass(frozen=True)
class TurnHeader:
    role: str
    text: str  # control tokens kept: "<|im_start|>user\n"
    plain: str  # the gap before it, control tokens removed: "\nuser\n" ("" if no line break)
    opener: str  # its first control token: "<|im_start|>"


def scanner_for(check: RepoCheck) -> SpecialScanner:
    """Finds the repo's control tokens (special added tokens and named ones) in text."""
    return SpecialScanner(check.repo.iter_special_strings())


def _strip_specials(text: str, scanner: SpecialScanner) -> str:
    out, last = [], 0
    for tok, pos in scanner.find(text):
        out.append(text[last:pos])
        last = pos + len(tok)
    out.append(text[last:])
    return "".join(out)


USER3 = "Eosfixuser3"

# role -> (messages, the sentinel before the gap, the sentinel after it). The assistant turn
# is read from history (a user turn follows it), where templates write no reasoning block.
_GAPS: tuple[tuple[str, tuple[dict[str, str], ...], str, str], ...] = (
    (
        "user",
        ({"role": "user", "content": USER1}, {"role": "assistant", "content": ASSISTANT0},
         {"role": "user", "content": USER2}),
        ASSISTANT0, USER2,
    ),
    (
        "system",
        ({"role": "user", "content": USER1}, {"role": "assistant", "content": ASSISTANT0},
         {"role": "system", "content": SYSTEM}, {"role": "user", "content": USER2}),
        ASSISTANT0, SYSTEM,
    ),
    (
        "assistant",
        ({"role": "user", "content": USER1}, {"role": "assistant", "content": ASSISTANT0},
         {"role": "user", "content": USER2}, {"role": "assistant", "content": ASSISTANT1},
         {"role": "user", "content": USER3}),
        USER2, ASSISTANT1,
    ),
)  # fmt: skip


def _gap(
    check: RepoCheck, chat: ChatTemplate, messages: Sequence[dict[str, str]], a: str, b: str
) -> str | None:
    """The text a template writes between sentinel ``a`` and sentinel ``b``.

    Some templates iterate ``tools`` unconditionally (Command R): an empty list is tried next.
    """
    for tools in (None, ()):
        conv = Conversation(tuple(messages), tools, False, chat.name)
        try:
            text = render_with(check.repo, chat, conv)
        except ConversationRefused:
            continue
        start = text.find(a)
        end = text.find(b, start + len(a)) if start >= 0 else -1
        return text[start + len(a) : end] if end >= 0 else None
    return None


def _header(
    role: str, gap: str, scanner: SpecialScanner, openers: frozenset[str], closers: set[str]
) -> TurnHeader | None:
    """The header in a gap: from its first turn opener, or its first control token that does
    not close the previous turn (GLM's ``<|user|>``)."""
    for tok, pos in scanner.find(gap):
        if tok in openers or tok not in closers:
            plain = _strip_specials(gap, scanner)
            # A plain header without a line break ("user") would match ordinary words.
            keep = "\n" in plain and any(c.isalpha() for c in plain)
            return TurnHeader(role, gap[pos:], plain if keep else "", tok)
    return None


def _closers(check: RepoCheck) -> set[str]:
    """Control tokens that close a turn or sit inside one: never where a header starts."""
    ts = check.terminators
    out = {t.content for t in ts.terminators if t.kind != NEXT_TURN}
    return out | set(ts.acceptable) | set(ts.in_turn)


def turn_headers(check: RepoCheck) -> tuple[TurnHeader, ...]:
    """The turn headers of every template (one per distinct text; user first)."""
    scanner = scanner_for(check)
    closers = _closers(check)
    out: dict[str, TurnHeader] = {}
    for chat in check.repo.templates:
        ta = next(a for a in check.terminators.templates if a.name == chat.name)
        gp = (ta.generation_prompt or "").lstrip()
        openers = frozenset(tok for tok, _ in scanner.find(gp))
        for role, messages, a, b in _GAPS:
            gap = _gap(check, chat, messages, a, b)
            header = None if gap is None else _header(role, gap, scanner, openers, closers)
            if header is not None:
                out.setdefault(header.text, header)
        if openers and gp not in out:  # the generation prompt opens an assistant turn too
            out[gp] = TurnHeader("assistant", gp, "", scanner.find(gp)[0][0])
    return tuple(out.values())


@dataclass(frozen=True)
class Piece:
    text: str | None  # None: an id whose text is unknown (no tokenizer.json)
    token_id: int | None
    control: bool  # a control token (special added token, or a stop id)
    pos: int  # token index (ids) or character offset (text)


@dataclass(frozen=True)
class Transcript:
    kind: str  # "ids" | "text"
    pieces: tuple[Piece, ...]
    length: int  # ids or characters
    decoded: bool  # ids decoded (tokenizer.json, a GGUF's pieces): text known for every piece

    @property
    def unit(self) -> str:
        return "token" if self.kind == "ids" else "character"

    def text(self) -> str:
        return "".join(p.text or "\ufffd" for p in self.pieces)


def _control_ids(check: RepoCheck, stops: LoopStops) -> dict[int, str]:
    """Ids that are control tokens, with their text."""
    out = {
        info.id: c
        for c, info in check.repo.added_tokens.items()
        if info.special and info.id is not None
    }
    tok = check.repo.tokenizer()
    if tok is not None:
        for i, added in tok.get_added_tokens_decoder().items():
            if added.special:
                out[i] = added.content
    names = id_names(check.repo)
    for i in stops.ids:
        if i in stops.tokens or i in names:
            out.setdefault(i, stops.tokens.get(i) or names[i])
    return out


def transcript_from_ids(
    check: RepoCheck, ids: Sequence[int], stops: LoopStops, no_token: Iterable[int] = ()
) -> Transcript:
    """Control ids as their own pieces; runs of other ids decoded together (when possible);
    ``no_token`` ids (no token has them) as their own pieces, text unknown."""
    control = _control_ids(check, stops)
    dead = frozenset(no_token)
    readable = can_decode(check.repo)
    pieces: list[Piece] = []
    run: list[int] = []

    def flush(end: int) -> None:
        if not run:
            return
        start = end - len(run)
        if not readable:
            pieces.extend(Piece(None, i, False, start + k) for k, i in enumerate(run))
        else:
            pieces.append(Piece(decode(check.repo, run), None, False, start))
        run.clear()

    for pos, token_id in enumerate(ids):
        if token_id in control or (token_id in stops.ids):
            flush(pos)
            pieces.append(Piece(control.get(token_id), token_id, True, pos))
        elif token_id in dead:
            flush(pos)
            pieces.append(Piece(None, token_id, False, pos))
        else:
            run.append(token_id)
    flush(len(ids))
    return Transcript("ids", tuple(pieces), len(ids), readable)


def transcript_from_text(check: RepoCheck, text: str, stops: LoopStops) -> Transcript:
    """Control tokens found in the text (longest first); plain-text stop strings too."""
    ids = {**_ids_by_text(check), **{t: i for i, t in stops.tokens.items()}}
    # Terminators not marked special (EOS008) are control tokens here all the same.
    extra = [*stops.tokens.values(), *(c for c, _ in stops.ends)]
    scanner = SpecialScanner([*check.repo.iter_special_strings(), *extra])
    found = list(scanner.find(text))
    for s in stops.strings:
        start = text.find(s)
        while start >= 0:
            if not any(p <= start < p + len(t) for t, p in found):
                found.append((s, start))
            start = text.find(s, start + len(s))
    pieces: list[Piece] = []
    last = 0
    for tok, pos in sorted(found, key=lambda tp: tp[1]):
        if pos < last:
            continue
        if pos > last:
            pieces.append(Piece(text[last:pos], None, False, last))
        pieces.append(Piece(tok, ids.get(tok), True, pos))
        last = pos + len(tok)
    if last < len(text):
        pieces.append(Piece(text[last:], None, False, last))
    return Transcript("text", tuple(pieces), len(text), True)


def _ids_by_text(check: RepoCheck) -> Mapping[str, int]:
    return {c: info.id for c, info in check.repo.added_tokens.items() if info.id is not None}


@dataclass(frozen=True)
class TurnFound:
    header: TurnHeader
    piece: int  # index of the piece where the header starts
    pos: int  # its position (tokens or characters)
    content: str | None  # what the turn says, up to the next control token (shortened);
    # None: unknown (ids without tokenizer.json)


def find_turns(t: Transcript, headers: Iterable[TurnHeader]) -> list[TurnFound]:
    """Every place a turn header starts at a control token of the transcript.

    Without tokenizer.json the text after a control id is unknown: a turn's first control
    token (``<|im_start|>``) is then enough, and its role is left empty.
    """
    by_length = sorted(headers, key=lambda h: len(h.text), reverse=True)
    out = []
    for i, piece in enumerate(t.pieces):
        if not piece.control or piece.text is None:
            continue
        rest = "".join(p.text or "\ufffd" for p in t.pieces[i : i + 12])
        match = next((h for h in by_length if rest.startswith(h.text)), None)
        if match is not None:
            body = _until_control(rest[len(match.text) :], t, i)
            out.append(TurnFound(match, i, piece.pos, _shorten(body)))
        elif not t.decoded and any(h.opener == piece.text for h in by_length):
            out.append(TurnFound(TurnHeader("", piece.text, "", piece.text), i, piece.pos, None))
    return out


def _until_control(body: str, t: Transcript, i: int) -> str:
    specials = [p.text for p in t.pieces[i + 1 :] if p.control and p.text]
    cut = min((body.find(s) for s in specials if s in body), default=len(body))
    return body[:cut]


def _shorten(text: str, limit: int = 48) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def find_plain_turns(text: str, headers: Iterable[TurnHeader]) -> list[TurnFound]:
    """Plain headers in text without control tokens, each with the text of its turn.

    A plain header that starts with a letter (Llama 3: ``user\\n\\n``) counts only when glued
    to the text before it, where the skipped control tokens were. At the very start of the
    text, a plain header that starts with a line break (ChatML: ``\\nassistant\\n``) counts
    without it too: a reply decoded with ``skip_special_tokens=True`` that opens a turn itself
    starts ``assistant\\n``, the line break having followed the skipped closer.
    """
    found: dict[int, tuple[TurnHeader, int]] = {}  # start -> (header, length matched)
    plain = sorted((h for h in headers if h.plain), key=lambda h: len(h.plain), reverse=True)
    for h in plain:
        start = text.find(h.plain)
        while start >= 0:
            glued = start == 0 or not h.plain[0].isalpha() or not text[start - 1].isspace()
            if glued and not any(p <= start < p + n for p, (_, n) in found.items()):
                found[start] = (h, len(h.plain))
            start = text.find(h.plain, start + 1)
    if 0 not in found:
        for h in plain:
            bare = h.plain.lstrip("\n")
            if bare != h.plain and "\n" in bare and text.startswith(bare):
                found[0] = (h, len(bare))
                break
    starts = sorted(found)
    out = []
    for k, pos in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        header, length = found[pos]
        out.append(TurnFound(header, -1, pos, _shorten(text[pos + length : end])))
    return out
