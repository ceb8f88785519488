"""Where a hand-written generation loop stops: a rendered conversation cut into the prompt
(``add_generation_prompt=True``) and the reply a model trained on the template writes.

- ``split_reply`` cuts a rendered conversation at its prompt and tokenizes both sides;
- ``split_probe`` / ``tokenize_probe`` do it for one of the analysis' probes (``explain``).

Pure: no printing, no writing. tokenizer.json is loaded on first use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eosfix.analysis.shapes import Probe
from eosfix.core.repo import ModelRepo
from eosfix.decide.check import RepoCheck
from eosfix.ports.render import Conversation, ConversationRefused, render_with


@dataclass(frozen=True)
class ReplyTokens:
    """A reply's ids after the prompt's, and where a loop comparing with stop ids stops."""

    prompt_ids: tuple[int, ...]  # like apply_chat_template(tokenize=True, add_generation_prompt)
    reply_ids: tuple[int, ...]
    stop_at: int | None  # index into reply_ids of the first stop id (None: never stops)
    decoded_reply: str  # reply up to and including the stop, special tokens kept


def split_reply(
    repo: ModelRepo, prompt: str, reply: str, stop_ids: Sequence[int]
) -> ReplyTokens | None:
    """Tokenize ``prompt + reply`` (``add_special_tokens=False``) and find the first stop.

    None without tokenizer.json, or when a token spans the boundary (then no position in the
    reply is the one a loop sees after the prompt).
    """
    tok = repo.tokenizer()
    if tok is None:
        return None
    prompt_ids = tuple(tok.encode(prompt, add_special_tokens=False).ids)
    full = tuple(tok.encode(prompt + reply, add_special_tokens=False).ids)
    if full[: len(prompt_ids)] != prompt_ids:
        return None
    reply_ids = full[len(prompt_ids) :]
    stops = set(stop_ids)
    stop_at = next((i for i, t in enumerate(reply_ids) if t in stops), None)
    shown = reply_ids if stop_at is None else reply_ids[: stop_at + 1]
    decoded = tok.decode(list(shown), skip_special_tokens=False)
    return ReplyTokens(prompt_ids, reply_ids, stop_at, decoded)


@dataclass(frozen=True)
class ProbeSplit:
    """A rendered probe cut where generation starts: the prompt, then what the model writes."""

    template: str
    probe: str
    messages: tuple[dict[str, Any], ...]  # the prompt's messages (before the reply)
    kwargs: dict[str, Any]
    prompt: str  # render(messages, add_generation_prompt=True)
    reply: str  # the rest of the probe: what a model trained on it generates


def _prompt_messages(probe: Probe) -> tuple[dict[str, Any], ...]:
    """The messages before the assistant message whose tail the probe reads."""
    msgs = probe.spec.messages
    for i, m in enumerate(msgs):
        if m.get("role") == "assistant" and probe.spec.end_marker in json.dumps(m):
            return tuple(dict(x) for x in msgs[:i])
    return tuple(dict(x) for x in msgs[:-1])


def split_probe(
    check: RepoCheck, probe_name: str = "final", template: str | None = None
) -> ProbeSplit | None:
    """Cut a probe into prompt and reply text, from ``template`` or the first that renders it.

    The prompt is what ``apply_chat_template(messages, add_generation_prompt=True)`` gives for
    the messages before the probed assistant turn; the reply is the rest of the probe.
    """
    for ta in check.terminators.templates:
        if template is not None and ta.name != template:
            continue
        chat = next(t for t in check.repo.templates if t.name == ta.name)
        for probe in ta.rendered:
            if probe.spec.name != probe_name or probe.text is None:
                continue
            messages, kwargs = _prompt_messages(probe), dict(probe.spec.kwargs)
            tools = kwargs.pop("tools", None)
            conv = Conversation(
                messages, None if tools is None else tuple(tools), True, ta.name, kwargs
            )
            try:
                prompt = render_with(check.repo, chat, conv)
            except ConversationRefused:
                continue  # a template may refuse the prompt alone: try the next one
            if probe.text.startswith(prompt):
                reply = probe.text[len(prompt) :]
                return ProbeSplit(
                    ta.name, probe_name, messages, dict(probe.spec.kwargs), prompt, reply
                )
    return None


@dataclass(frozen=True)
class TokenizedProbe:
    split: ProbeSplit
    prompt_ids: tuple[int, ...]  # like apply_chat_template(tokenize=True, add_generation_prompt)
    reply_ids: tuple[int, ...]
    stop_ids: tuple[int, ...]
    stop_at: int | None  # index into reply_ids of the first stop id (None: never stops)
    decoded_reply: str  # reply up to and including the stop, special tokens kept


def tokenize_probe(
    check: RepoCheck,
    stop_ids: Sequence[int],
    probe_name: str = "final",
    template: str | None = None,
) -> TokenizedProbe | None:
    """Tokenize a probe with tokenizer.json (``add_special_tokens=False``, as chat templates
    add their own), and find where a loop comparing against ``stop_ids`` stops."""
    if check.repo.tokenizer() is None:
        return None
    split = split_probe(check, probe_name, template)
    if split is None:
        return None
    rt = split_reply(check.repo, split.prompt, split.reply, stop_ids)
    if rt is None:
        return None
    return TokenizedProbe(
        split, rt.prompt_ids, rt.reply_ids, tuple(stop_ids), rt.stop_at, rt.decoded_reply
    )
