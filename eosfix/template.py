"""Compile and render chat templates exactly as transformers' ``apply_chat_template`` does.

The environment mirrors ``transformers.utils.chat_template_utils._cached_compile_jinja_template``:
an ``ImmutableSandboxedEnvironment`` with ``trim_blocks``/``lstrip_blocks``, ``loopcontrols``,
a ``{% generation %}`` tag that renders its body, ``raise_exception``, ``strftime_now`` and a
``tojson`` that is plain ``json.dumps(ensure_ascii=False)``. Every other Jinja default stays
(one trailing newline of the template dropped, undefined names render as "").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from eosfix.errors import TemplateError

_MIN_JINJA = (3, 1, 6)


class TemplateRefusal(Exception):
    """The template called ``raise_exception``: it refuses this input shape."""


class _GenerationTag(Extension):
    """``{% generation %}...{% endgeneration %}`` marks assistant tokens; it renders its body."""

    tags = frozenset({"generation"})

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Callable[[], str]) -> str:
        return caller()


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: str) -> None:
    raise TemplateRefusal(message)


def _jinja_version() -> tuple[int, ...]:
    parts = []
    for piece in jinja2.__version__.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def make_environment(now: Callable[[], datetime] = datetime.now) -> ImmutableSandboxedEnvironment:
    """Build the sandboxed environment transformers uses (``now`` feeds ``strftime_now``)."""
    if _jinja_version() < _MIN_JINJA:  # older releases have known sandbox escapes
        raise TemplateError(f"jinja2 {jinja2.__version__} is too old: eosfix needs >= 3.1.6")
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, "jinja2.ext.loopcontrols"],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    return env


_ENV = make_environment()


@lru_cache(maxsize=256)
def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template; raise ``TemplateError`` when it is not valid Jinja."""
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"not a valid Jinja template: line {exc.lineno}: {exc.message}") from exc


def normalize_messages(messages: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop ``None``-valued keys and alias reasoning fields, as transformers 5.24 does."""
    out = []
    for message in messages:
        msg = {k: v for k, v in message.items() if v is not None}
        for field in ("reasoning_content", "thinking", "reasoning"):
            if field in msg:
                reasoning = msg[field]
                msg = {"thinking": reasoning, **msg, "reasoning_content": reasoning}
                break
        out.append(msg)
    return out


def render(source: str, context: Mapping[str, Any]) -> str:
    """Render ``source`` with exactly ``context`` as its variables.

    Raises ``TemplateRefusal`` when the template calls ``raise_exception`` and
    ``jinja2.TemplateError`` (or a Python error from inside the sandbox) when it fails.
    """
    return compile_template(source).render(**context)


def render_chat(
    source: str,
    messages: list[Mapping[str, Any]],
    *,
    special_tokens: Mapping[str, str],
    add_generation_prompt: bool = False,
    tools: list[dict[str, Any]] | None = None,
    documents: list[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> str:
    """Render a conversation the way ``tokenizer.apply_chat_template(tokenize=False)`` does."""
    context: dict[str, Any] = {
        "messages": normalize_messages(messages),
        "tools": tools,
        "documents": documents,
        "add_generation_prompt": add_generation_prompt,
        **special_tokens,
        **kwargs,
    }
    return render(source, context)
