"""Goldens: a fixed set of conversations rendered, tokenized and cut where a loop must stop.

A port (candle, a C++ loop on llama.cpp, JavaScript) renders each conversation with its own
code and compares the string and the ids with the golden, line by line. Every case is run on
every named template of the repo. Each JSONL line (one case on one template) holds:

- ``case``, ``template``, ``selected_by_default`` (``apply_chat_template`` without a template
  name picks this template for this case), ``messages``, ``tools``, ``add_generation_prompt``;
- ``status``: ``ok``; ``refused`` (the template called ``raise_exception``); ``failed`` (the
  template raised an error); ``unsupported`` (it rendered, but wrote no tool call or no tool
  result, so the case tests nothing a port needs). ``reason`` says why;
- ``text`` (the prompt, byte for byte), ``prompt_ids`` (``null`` without tokenizer.json);
- ``stop_ids``, ``stop_ids_source``, ``stop_ids_need_fix``;
- ``reply`` for cases with a generation prompt: the assistant message a model answers with
  (``message``), the text the template writes for it after the prompt (``text``), its ids,
  and where a correct loop stops: ``stop_at`` (index into the reply's ids of the first stop
  id), ``stop_position`` (the same, counted from the start of the prompt) and ``until_stop``
  (the reply up to and including the stop token);
- ``rendered_on``: the date, when the template calls ``strftime_now`` (the text holds it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from eosfix.core.repo import ChatTemplate
from eosfix.decide.check import RepoCheck
from eosfix.ports.loop import split_reply
from eosfix.ports.render import (
    Conversation,
    ConversationRefused,
    LoopStops,
    PortInputError,
    encode,
    first_difference,
    loop_stops,
    render_with,
    select_template,
    stop_tokens,
)

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
SYSTEM_PROMPT = "You are a helpful assistant. Answer in one sentence."
FOLLOW_UP = "And of Italy?"
FOLLOW_UP_ANSWER = "The capital of Italy is Rome."
WEATHER_QUESTION = "What is the weather in Paris?"
WEATHER_RESULT = '{"temperature_c": 18, "sky": "sunny"}'
WEATHER_ANSWER = "It is 18 °C and sunny in Paris."
CALL_ID = "call12345"  # nine alphanumerics: Mistral templates refuse other tool-call ids
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
    },
}
TOOL_CALL = {
    "role": "assistant",
    "content": "",  # a missing content fails templates that read it (Qwen3), in transformers too
    "tool_calls": [
        {
            "id": CALL_ID,
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        }
    ],
}
TOOL_RESULT = {
    "role": "tool",
    "tool_call_id": CALL_ID,
    "name": "get_weather",
    "content": WEATHER_RESULT,
}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@dataclass(frozen=True)
class GoldenCase:
    """One conversation of the set."""

    name: str
    messages: tuple[dict[str, Any], ...]
    add_generation_prompt: bool = True
    tools: tuple[dict[str, Any], ...] | None = None
    reply: dict[str, Any] | None = None  # the assistant message after the prompt
    must_show: tuple[str, ...] = ()  # what a template that supports the case writes


GOLDEN_CASES = (
    GoldenCase("single_turn", (_user(QUESTION),), reply=_assistant(ANSWER)),
    GoldenCase("single_turn_no_generation_prompt", (_user(QUESTION),), add_generation_prompt=False),
    GoldenCase(
        "with_system",
        ({"role": "system", "content": SYSTEM_PROMPT}, _user(QUESTION)),
        reply=_assistant(ANSWER),
    ),
    GoldenCase(
        "three_turns",
        (_user(QUESTION), _assistant(ANSWER), _user(FOLLOW_UP)),
        reply=_assistant(FOLLOW_UP_ANSWER),
    ),
    GoldenCase(
        "three_turns_no_generation_prompt",
        (_user(QUESTION), _assistant(ANSWER), _user(FOLLOW_UP)),
        add_generation_prompt=False,
    ),
    GoldenCase(
        "tool_call",
        (_user(WEATHER_QUESTION),),
        tools=(WEATHER_TOOL,),
        reply=TOOL_CALL,
        must_show=("get_weather",),
    ),
    GoldenCase(
        "tool_result",
        (_user(WEATHER_QUESTION), TOOL_CALL, TOOL_RESULT),
        tools=(WEATHER_TOOL,),
        reply=_assistant(WEATHER_ANSWER),
        must_show=("get_weather", "sunny"),
    ),
)


def _until_stop_text(reply: str, stops: LoopStops) -> str | None:
    """Without tokenizer.json: the reply up to the first stop token's text."""
    texts = [*stop_tokens(stops), *(c for c, _ in stops.ends), *stops.strings]
    found = [(reply.find(t), t) for t in texts if t in reply]
    if not found:
        return None
    pos, token = min(found)
    return reply[: pos + len(token)]


def _reply(
    check: RepoCheck, chat: ChatTemplate, case: GoldenCase, prompt: str, stops: LoopStops
) -> dict[str, Any] | None:
    if case.reply is None:
        return None
    out: dict[str, Any] = {"message": case.reply, "status": "ok", "reason": None}
    out.update(dict.fromkeys(("text", "ids", "stop_at", "stop_position", "stop_id", "until_stop")))
    conv = Conversation((*case.messages, case.reply), case.tools, False, chat.name)
    try:
        full = render_with(check.repo, chat, conv)
    except ConversationRefused as exc:
        return {**out, "status": "refused" if exc.refused else "failed", "reason": exc.message}
    if not full.startswith(prompt):
        at = first_difference(prompt, full)
        reason = (
            "rendered with the reply, the conversation does not start with this prompt: they "
            f"part at character {at} (prompt {prompt[at : at + 20]!r}, "
            f"with the reply {full[at : at + 20]!r})"
        )
        return {**out, "status": "differs", "reason": reason}
    text = full[len(prompt) :]
    out.update(text=text, until_stop=_until_stop_text(text, stops))
    rt = split_reply(check.repo, prompt, text, stops.ids)
    if rt is not None:
        out.update(ids=list(rt.reply_ids), stop_at=rt.stop_at, until_stop=rt.decoded_reply)
        if rt.stop_at is not None:
            out.update(
                stop_position=len(rt.prompt_ids) + rt.stop_at, stop_id=rt.reply_ids[rt.stop_at]
            )
        else:
            out["until_stop"] = None
    return out


def golden_case(check: RepoCheck, chat: ChatTemplate, case: GoldenCase) -> dict[str, Any]:
    """One JSONL record: ``case`` rendered with ``chat`` (see the module docstring)."""
    stops = loop_stops(check)
    try:
        default: ChatTemplate | None = select_template(check.repo, None, case.tools)
    except PortInputError:  # several templates, none named default: a port must name one
        default = None
    record: dict[str, Any] = {
        "case": case.name,
        "template": chat.name,
        "selected_by_default": default is not None and default.name == chat.name,
        "messages": list(case.messages),
        "tools": None if case.tools is None else list(case.tools),
        "add_generation_prompt": case.add_generation_prompt,
        "status": "ok",
        "reason": None,
        "text": None,
        "prompt_ids": None,
        "stop_ids": list(stops.ids),
        "stop_ids_source": stops.source,
        "stop_ids_need_fix": stops.needs_fix,
        "reply": None,
    }
    conv = Conversation(case.messages, case.tools, case.add_generation_prompt, chat.name)
    try:
        text = render_with(check.repo, chat, conv)
    except ConversationRefused as exc:
        return {**record, "status": "refused" if exc.refused else "failed", "reason": exc.message}
    reply = _reply(check, chat, case, text, stops)
    written = text + ((reply or {}).get("text") or "")
    missing = [s for s in case.must_show if s not in written]
    if missing:
        why = f"the template does not write the tool call or its result (no {missing[0]!r})"
        return {**record, "status": "unsupported", "reason": why}
    ids = encode(check.repo, text)
    record.update(text=text, prompt_ids=None if ids is None else list(ids), reply=reply)
    if "strftime_now" in chat.source:
        record["rendered_on"] = date.today().isoformat()
    return record


def iter_goldens(check: RepoCheck) -> Iterator[dict[str, Any]]:
    """Every case on every named template of the repo, in a fixed order."""
    for chat in check.repo.templates:
        for case in GOLDEN_CASES:
            yield golden_case(check, chat, case)


def goldens_jsonl(check: RepoCheck) -> str:
    """The goldens file: one JSON object per line, UTF-8 kept as is."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in iter_goldens(check))
