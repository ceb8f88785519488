"""Compile and render chat templates exactly as transformers' ``apply_chat_template`` does.

The environment mirrors ``transformers.utils.chat_template_utils._cached_compile_jinja_template``:
an ``ImmutableSandboxedEnvironment`` with ``trim_blocks``/``lstrip_blocks``, ``loopcontrols``,
a ``{% generation %}`` tag that renders its body, ``raise_exception``, ``strftime_now`` and a
``tojson`` that is plain ``json.dumps(ensure_ascii=False)``. Every other Jinja default stays
(one trailing newline of the template dropped, undefined names render as "").

The sandbox is :class:`eosfix.core.limits.GuardedSandbox`: the same text for every real template,
but each render is bounded in size and work by counts (``RenderLimitExceeded``), with a
wall-clock backstop (``RenderDeadline``), and an attempt to reach a hidden attribute raises
``SandboxEscape``.

Inside a :func:`strike_scope` (one repo's analysis), a template that hit a bound is refused
at once on its later renders, so a hostile template costs one render's budget, not one per
probe. Nothing outlives the scope: the same repo gets the same probes, in the same order,
whatever this process analyzed before, so its verdict never depends on what came earlier
(or on how busy the machine was then).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser

from eosfix.core import limits as _limits
from eosfix.core.errors import TemplateError
from eosfix.core.limits import (
    GuardedSandbox,
    RenderDeadline,
    RenderLimitExceeded,
    RenderLimits,
    SandboxEscape,
    budgeted_json,
    guarded_finalize,
    render_budget,
)

_MIN_JINJA = (3, 1, 6)
# Real chat templates are a few kB (the largest known are ~100 kB); compiling megabytes of
# Jinja takes seconds and memory, so a bigger template is refused before it is compiled.
MAX_TEMPLATE_CHARS = 1_000_000
E = TypeVar("E", bound=BaseException)
_scope = threading.local()  # .struck: the open strike_scope's {(source, limits): refusal}
_refused = threading.local()  # .count: this thread's renders refused by a bound or the sandbox


class TemplateRefusal(Exception):
    """The template called ``raise_exception``: it refuses this input shape."""


class _GenerationTag(Extension):
    """``{% generation %}...{% endgeneration %}`` marks assistant tokens; it renders its body."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 declares it a plain set)

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
    return budgeted_json(
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


def make_environment(now: Callable[[], datetime] = datetime.now) -> GuardedSandbox:
    """Build the sandboxed environment transformers uses (``now`` feeds ``strftime_now``)."""
    if _jinja_version() < _MIN_JINJA:  # older releases have known sandbox escapes
        raise TemplateError(f"jinja2 {jinja2.__version__} is too old: eosfix needs >= 3.1.6")
    env = GuardedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, "jinja2.ext.loopcontrols"],
        finalize=guarded_finalize,
    )
    env.add_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    return env


_ENV = make_environment()


@contextlib.contextmanager
def _compile_errors() -> Iterator[None]:
    """Turn Jinja's and Python's compile failures into one-line ``TemplateError``s."""
    try:
        yield
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"not a valid Jinja template: line {exc.lineno}: {exc.message}"
        ) from exc
    except (RecursionError, MemoryError, SyntaxError, ValueError, OverflowError) as exc:
        # Deeply nested expressions overflow the parser or Python's own compiler.
        raise TemplateError(f"chat template cannot be compiled: {type(exc).__name__}") from None


@lru_cache(maxsize=256)
def parse_template(source: str) -> nodes.Template:
    """Parse a chat template once (analysis reads its literals, rendering compiles it)."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(
            f"chat template too large ({len(source)} characters, limit {MAX_TEMPLATE_CHARS})"
        )
    with _compile_errors():
        return _ENV.parse(source)


@lru_cache(maxsize=256)
def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template; raise ``TemplateError`` when it is not valid Jinja."""
    ast = parse_template(source)
    with _compile_errors():
        code = _ENV.compile(ast)
    return _ENV.template_class.from_code(_ENV, code, _ENV.make_globals(None), None)


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


def render(source: str, context: Mapping[str, Any], limits: RenderLimits | None = None) -> str:
    """Render ``source`` with exactly ``context`` as its variables, within ``limits``
    (``DEFAULT_LIMITS`` when None, read at call time).

    Raises ``TemplateRefusal`` when the template calls ``raise_exception``,
    ``RenderLimitExceeded`` when it goes over ``limits`` (recursion and memory included),
    ``SandboxEscape`` when it reaches for a hidden attribute, and ``jinja2.TemplateError``
    (or a Python error from inside the sandbox) when it fails.
    """
    try:
        return _render(source, context, _limits.DEFAULT_LIMITS if limits is None else limits)
    except (RenderLimitExceeded, SandboxEscape):
        _refused.count = refused_renders() + 1
        raise


def refused_renders() -> int:
    """How many renders this thread has had refused by a render bound, the wall-clock
    backstop or the sandbox, ever: compared before and after a piece of work, it says whether
    any of its renders was (its callers may swallow the refusal, as the generation prompt does)."""
    return getattr(_refused, "count", 0)


def current_limits() -> RenderLimits:
    """The limits a render without explicit ones gets (``DEFAULT_LIMITS``, read now)."""
    return _limits.DEFAULT_LIMITS


def is_struck(source: str, limits: RenderLimits) -> bool:
    """Whether the open :func:`strike_scope` already refuses ``source`` under ``limits``."""
    struck = getattr(_scope, "struck", None)
    return struck is not None and (source, limits) in struck


def _render(source: str, context: Mapping[str, Any], limits: RenderLimits) -> str:
    struck: dict[tuple[str, RenderLimits], RenderLimitExceeded] | None = getattr(
        _scope, "struck", None
    )
    earlier = struck.get((source, limits)) if struck is not None else None
    if isinstance(earlier, RenderDeadline):
        raise RenderDeadline(earlier.seconds)  # no time spent: still "this machine, retry"
    if earlier is not None:
        raise RenderLimitExceeded(earlier.limit, "exceeded in an earlier render")
    template = compile_template(source)
    try:
        with render_budget(limits):
            return _render_template(template, context)
    except RenderLimitExceeded as exc:
        refused = exc
    except RecursionError:
        refused = RenderLimitExceeded("recursion depth", "too deep")
    except MemoryError:
        refused = RenderLimitExceeded("memory", "the process ran out of memory")
    if struck is not None:
        struck[source, limits] = refused
    try:
        raise refused
    finally:  # this frame, in the error's traceback, must not hold the error (a cycle)
        del refused, struck


def _render_template(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    try:
        return template.render(**context)
    except BaseException as exc:
        _release_frames(exc)
        raise


def without_traceback(exc: E) -> E:
    """``exc`` (and the errors it chains) with no traceback: an error kept after it was caught,
    as evidence, must not hold the frames it went through (the caller's own among them: a
    reference cycle)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__
    return exc


def _release_frames(exc: BaseException) -> None:
    """Clear the locals of the finished frames ``exc`` (and the errors it chains) went through,
    and of the finished frames they were called from, and take the error out of the frames
    jinja2 makes up for a template's lines. jinja2 rewrites a render error's traceback through
    such frames, in reference cycles (the error in their globals; the frames in the list the
    rewriting kept) that would hold every frame of the call, and all its callers hold (a whole
    check's data), until the garbage collector happens to run."""
    seen: set[int] = set()
    errors: list[BaseException] = [exc]
    while errors:
        error = errors.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        tb = error.__traceback__
        while tb is not None:
            frame: Any = tb.tb_frame
            while frame is not None and id(frame) not in seen:
                seen.add(id(frame))
                frame.f_globals.pop("__jinja_exception__", None)  # only a made-up frame's
                try:
                    frame.clear()
                except RuntimeError:  # still running: this function's, and its callers'
                    break
                frame = frame.f_back
            tb = tb.tb_next
        errors += [e for e in (error.__cause__, error.__context__) if e is not None]


@contextlib.contextmanager
def strike_scope() -> Iterator[None]:
    """Within the block, a template that hit a render bound is refused at once on its later
    renders with the same limits (the first refusal is the evidence; the rest cost nothing).

    Open it around one repo's analysis: the repo's probes run in a fixed order, so what is
    refused is the same on every run. A nested scope shares the outermost one; the strikes
    are dropped when it closes, so nothing carries over to the next repo.
    """
    if getattr(_scope, "struck", None) is not None:
        yield
        return
    _scope.struck = {}
    try:
        yield
    finally:
        _scope.struck = None


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
