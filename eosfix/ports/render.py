"""Render one conversation exactly as ``apply_chat_template`` does, with its ids and stop ids.

Vocabulary:

- **conversation**: what a port passes to ``apply_chat_template``: messages, tools,
  ``add_generation_prompt`` and a template name (``None``: the one transformers picks).
- **prompt**: the rendered string (``tokenize=False``); **prompt ids**: that string encoded
  with tokenizer.json and ``add_special_tokens=False``, which is what ``tokenize=True`` does
  (the template writes its own BOS).
- **stop ids**: what a generation loop compares each sampled id with: eosfix's proposed list
  when the repo needs a fix, else what the files say today.

Pure: no printing, no writing, no network. tokenizer.json is loaded on first use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eosfix.analysis.probes import RENDER_ERRORS
from eosfix.analysis.template import TemplateRefusal, render_chat
from eosfix.core.errors import EosfixError
from eosfix.core.limits import RenderLimitExceeded, SandboxEscape
from eosfix.core.models import MAX_TOKEN_ID
from eosfix.core.repo import TOKENIZER_JSON, ChatTemplate, ModelRepo
from eosfix.decide.check import RepoCheck


class PortInputError(EosfixError):
    """Messages, tools, ids or a template name given by the user are not usable."""


class ConversationRefused(EosfixError):
    """The chat template refused (``raise_exception``) or failed to render the conversation."""

    def __init__(self, message: str, *, template: str, refused: bool) -> None:
        super().__init__(message)
        self.template = template
        self.refused = refused  # True: raise_exception; False: an error inside the template


@dataclass(frozen=True)
class LoopStops:
    """The ids a hand-written loop must stop on, and where they come from."""

    ids: tuple[int, ...]
    source: str
    needs_fix: bool  # the repo's files miss a terminator: ``ids`` is eosfix's proposed list
    current: tuple[int, ...]  # what transformers stops on today
    current_source: str
    strings: tuple[str, ...]  # plain-text turn ends: no id can express them
    tokens: dict[int, str]  # stop id -> token text, where eosfix can name it
    ends: tuple[tuple[str, int | None], ...]  # the repo's turn terminators: (text, id)
    fix: str = "eosfix fix"  # the command that writes the repo's fix, as typed (with its path)

    def name(self, token_id: int) -> str:
        """``<|im_end|> (2)``, or just the id when its text is unknown."""
        text = self.tokens.get(token_id)
        return f"{text} ({token_id})" if text is not None else str(token_id)

    def named_ends(self) -> str:
        """``<|im_end|> (2)``, ``<|call|> (200012)``: the turn terminators, for messages."""
        return ", ".join(f"{c} ({i})" if i is not None else c for c, i in self.ends)


def id_names(repo: ModelRepo) -> dict[int, str]:
    """Token id -> text for every added token the small files list."""
    return {info.id: c for c, info in repo.added_tokens.items() if info.id is not None}


def loop_stops(check: RepoCheck) -> LoopStops:
    """The stop ids of a hand-written loop: the proposed list when the repo needs a fix."""
    current = tuple(check.stop.ids or ())
    if check.proposed is not None:
        ids, source = check.proposed, check.stop.after
    else:
        ids, source = current, check.stop.source
    names = id_names(check.repo)
    for t in check.terminators.terminators:
        if t.id is not None:
            names.setdefault(t.id, t.content)
    eos = check.tokenizer_eos
    if eos is not None and eos.id is not None:
        names.setdefault(eos.id, eos.content)
    tokens = {i: names[i] for i in ids if i in names}
    ends = tuple((t.content, t.id) for t in check.id_terminators)
    return LoopStops(
        tuple(ids), source, check.proposed is not None, current, check.stop.source,
        check.stop_strings, tokens, ends,
    )  # fmt: skip


@dataclass(frozen=True)
class Conversation:
    """The arguments of one ``apply_chat_template`` call."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] | None = None
    add_generation_prompt: bool = True
    template: str | None = None  # a template name; None: the one transformers picks
    variables: Mapping[str, Any] = field(default_factory=dict)  # documents, builtin_tools...

    def tool_list(self) -> list[dict[str, Any]] | None:
        return None if self.tools is None else [dict(t) for t in self.tools]


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string"}
    return next((n for t, n in names.items() if type(value) is t), repr(value))


def parse_messages(data: Any, where: str) -> tuple[dict[str, Any], ...]:
    """Check that ``data`` is a non-empty list of ``{"role", "content"}`` objects."""
    shape = 'a JSON list of {"role": ..., "content": ...} objects'
    if not isinstance(data, list) or not data:
        got = "an empty list" if data == [] else _kind(data)
        raise PortInputError(f"messages must be {shape}, got {got}", path=where)
    for n, msg in enumerate(data, 1):
        if not isinstance(msg, dict):
            raise PortInputError(f"message {n} must be an object, got {_kind(msg)}", path=where)
        if not isinstance(msg.get("role"), str):
            raise PortInputError(f'message {n} has no "role" string', path=where)
        if "content" not in msg and "tool_calls" not in msg:
            raise PortInputError(f'message {n} has no "content" (nor "tool_calls")', path=where)
        content = msg.get("content")
        parts_ok = isinstance(content, list) and all(isinstance(p, dict) for p in content)
        if not (content is None or isinstance(content, str) or parts_ok):
            raise PortInputError(
                f'message {n}: "content" must be a string, a list of part objects or null, '
                f"got {_kind(content)}",
                path=where,
            )
    return tuple(data)


def parse_tools(data: Any, where: str) -> tuple[dict[str, Any], ...]:
    """Check that ``data`` is a list of tool objects (JSON schemas)."""
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise PortInputError(f"tools must be a JSON list of objects, got {_kind(data)}", path=where)
    return tuple(data)


_ID_SEP = re.compile(r"[\s,]+")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: "²" and fullwidth digits are not ids


def parse_ids(text: str, where: str) -> tuple[int, ...]:
    """Token ids written ``1,2,3``, ``1 2 3`` or ``[1, 2, 3]``; at least one."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    out = []
    for piece in _ID_SEP.split(body.strip()):
        if not piece:
            continue
        if not _DIGITS.fullmatch(piece):
            raise PortInputError(
                f"{piece!r} is not a token id (a non-negative integer)", path=where
            )
        digits = piece.lstrip("0") or "0"  # bounded before int(): no 10^6-digit parse
        if len(digits) > len(str(MAX_TOKEN_ID)) or int(digits) > MAX_TOKEN_ID:
            shown = piece if len(piece) <= 32 else f"{piece[:12]}...({len(piece)} digits)"
            raise PortInputError(
                f"{shown} is not a token id (token ids are 32-bit: at most {MAX_TOKEN_ID})",
                path=where,
            )
        out.append(int(digits))
    if not out:
        raise PortInputError("no token ids given: nothing to diagnose", path=where)
    return tuple(out)


def select_template(repo: ModelRepo, name: str | None, tools: object) -> ChatTemplate:
    """The template ``apply_chat_template`` uses (transformers' ``get_chat_template``)."""
    by_name = {t.name: t for t in repo.templates}
    if not by_name:
        raise PortInputError("no chat template: this repo cannot render a conversation")
    if name is not None:
        if name not in by_name:
            have = ", ".join(sorted(by_name))
            raise PortInputError(f"no template named {name!r}; this repo has: {have}")
        return by_name[name]
    if tools is not None and "tool_use" in by_name:
        return by_name["tool_use"]
    if "default" in by_name:
        return by_name["default"]
    raise PortInputError(
        "several chat templates and no default: choose one of "
        f"{', '.join(sorted(by_name))} with --template"
    )


def render_with(repo: ModelRepo, template: ChatTemplate, conv: Conversation) -> str:
    """Render ``conv`` with ``template``; ``ConversationRefused`` when the template will not."""
    try:
        return render_chat(
            template.source,
            [dict(m) for m in conv.messages],
            special_tokens=repo.special_tokens,
            add_generation_prompt=conv.add_generation_prompt,
            tools=conv.tool_list(),
            **dict(conv.variables),
        )
    except TemplateRefusal as exc:
        raise ConversationRefused(
            f"template {template.name!r} refuses this conversation: {exc}",
            template=template.name,
            refused=True,
        ) from None
    except (RenderLimitExceeded, SandboxEscape, *RENDER_ERRORS) as exc:
        raise ConversationRefused(
            f"template {template.name!r} fails on this conversation: {type(exc).__name__}: {exc}",
            template=template.name,
            refused=False,
        ) from None


def encode(repo: ModelRepo, text: str) -> tuple[int, ...] | None:
    """``text``'s ids from tokenizer.json, as ``apply_chat_template(tokenize=True)`` gives."""
    tok = repo.tokenizer()
    if tok is None:
        return None
    return tuple(tok.encode(text, add_special_tokens=False).ids)


def decode(repo: ModelRepo, ids: Sequence[int]) -> str | None:
    """``ids`` as text with special tokens kept: tokenizer.json's decoder, or a GGUF's token
    pieces as llama.cpp writes them; None when neither can tell."""
    vocab = repo.vocabulary
    return None if vocab is None else vocab.decode(ids)


def can_decode(repo: ModelRepo) -> bool:
    """Whether ``decode`` can turn this repo's ids into text."""
    return decode(repo, ()) is not None


NO_TOKENIZER = f"no {TOKENIZER_JSON} in this repo"
NO_GGUF_TOKENIZER = (
    "a GGUF file: eosfix reads its token list but does not run its tokenizer (the runtime "
    "that loads it encodes the prompt: llama.cpp's llama_tokenize with parse_special)"
)


def no_ids_note(repo: ModelRepo) -> str:
    """Why a repo's text cannot be turned into ids here: no tokenizer.json in a folder, a GGUF
    file (whose tokenizer eosfix does not run)."""
    vocab = repo.vocabulary
    if vocab is not None and vocab.available and vocab.source != TOKENIZER_JSON:
        return NO_GGUF_TOKENIZER
    return NO_TOKENIZER


@dataclass(frozen=True)
class RenderedPrompt:
    conversation: Conversation
    template: str  # the name of the template used
    template_file: str
    text: str
    ids: tuple[int, ...] | None
    ids_note: str | None  # why ``ids`` is None
    stops: LoopStops
    uses_clock: bool  # the template calls strftime_now: the text holds today's date


def render_conversation(check: RepoCheck, conv: Conversation) -> RenderedPrompt:
    """The prompt of ``conv``, its ids and the stop ids, as a port must reproduce them."""
    template = select_template(check.repo, conv.template, conv.tools)
    text = render_with(check.repo, template, conv)
    ids = encode(check.repo, text)
    return RenderedPrompt(
        conv, template.name, template.file, text, ids,
        None if ids is not None else no_ids_note(check.repo), loop_stops(check),
        "strftime_now" in template.source,
    )  # fmt: skip


def rendered_dict(r: RenderedPrompt) -> dict[str, Any]:
    """``eosfix render --format json``."""
    return {
        "template": r.template,
        "template_file": r.template_file,
        "messages": list(r.conversation.messages),
        "tools": r.conversation.tool_list(),
        "add_generation_prompt": r.conversation.add_generation_prompt,
        "text": r.text,
        "prompt_ids": None if r.ids is None else list(r.ids),
        "prompt_ids_note": r.ids_note,
        "stop_ids": list(r.stops.ids),
        "stop_ids_source": r.stops.source,
        "stop_ids_need_fix": r.stops.needs_fix,
        "current_stop_ids": list(r.stops.current),
        "stop_strings": list(r.stops.strings),
        "uses_clock": r.uses_clock,
    }


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The first index where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def stop_tokens(stops: LoopStops) -> Mapping[str, int]:
    """Text of each nameable stop id -> id (to find a stop in decoded or rendered text)."""
    return {text: i for i, text in stops.tokens.items()}
