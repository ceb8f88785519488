"""Probes: renders of a chat template in the sandbox with the shapes of
``eosfix.analysis.shapes``, each kept as evidence (text or refusal). A render that failed on
a variable no probe passes is tried once more with placeholders (``run_probe``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jinja2

from eosfix.analysis.reads import placeholders, undeclared_names
from eosfix.analysis.shapes import (
    TOOL_SCHEMA,
    USER1,
    Probe,
    ProbeSpec,
    find_marker,
    user_message,
)
from eosfix.analysis.template import TemplateRefusal, render_chat, without_traceback
from eosfix.core.limits import RenderLimitExceeded, SandboxEscape

# What a template can raise from inside the sandbox (besides raise_exception).
RENDER_ERRORS = (
    jinja2.TemplateError,
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    ZeroDivisionError,
    OverflowError,
    RecursionError,
)


def run_probe(
    source: str, template_name: str, spec: ProbeSpec, special_tokens: Mapping[str, str]
) -> Probe:
    """Render one probe; a refusal or error is kept as evidence, never raised.

    A render that failed only because the template reads a variable no probe passes
    (``'datetime' + ...``, ``functions | tojson``) is tried once more with a harmless
    placeholder for each such variable (``eosfix.analysis.reads.placeholders``); the probe
    records which (``placeholders``), and its spec carries them as variables.
    """
    probe, error = _render_probe(source, template_name, spec, special_tokens)
    values = _placeholders_for(source, error, spec.kwargs, special_tokens)
    if not values:
        return probe
    retry = spec._replace(kwargs={**spec.kwargs, **values})
    again, _ = _render_probe(source, template_name, retry, special_tokens)
    if again.text is not None:
        return again._replace(placeholders=tuple(values))
    refusal = f"{probe.refusal}; again with placeholders for {', '.join(values)}: {again.refusal}"
    return probe._replace(refusal=refusal, limit=again.limit)


def _placeholders_for(
    source: str,
    error: Exception | None,
    kwargs: Mapping[str, Any],
    special_tokens: Mapping[str, str],
) -> dict[str, Any]:
    """Placeholders for the variables a render failed on (none: it did not fail so).

    The error says whether an undefined value failed (cheap); only then are the template's
    undeclared names looked up (``jinja2.meta`` generates the template's code: costly)."""
    if not _undefined_failure(error):
        return {}
    given = {"messages", "tools", "documents", "add_generation_prompt", *special_tokens}
    missing = undeclared_names(source) - given - set(kwargs)
    named = _UNDEFINED.match(str(error))
    if not missing or (named is not None and named.group(1) not in missing):
        return {}
    return placeholders(source, missing)


_UNDEFINED = re.compile(r"'(\w+)' is undefined$")


def _undefined_failure(error: Exception | None) -> bool:
    """An undefined variable failed: jinja2 names it, ``tojson`` names its type."""
    if isinstance(error, jinja2.UndefinedError):
        return _UNDEFINED.match(str(error)) is not None
    return isinstance(error, TypeError) and "Undefined" in str(error)


def _render_probe(
    source: str, template_name: str, spec: ProbeSpec, special_tokens: Mapping[str, str]
) -> tuple[Probe, Exception | None]:
    """The probe, and the error a failed render raised (not a refusal or a limit)."""
    try:
        text = render_chat(
            source,
            [dict(m) for m in spec.messages],
            special_tokens=special_tokens,
            add_generation_prompt=False,
            **dict(spec.kwargs),
        )
    except TemplateRefusal as exc:
        return Probe(spec, template_name, refusal=f"raise_exception: {exc}"), None
    except (RenderLimitExceeded, SandboxEscape) as exc:
        return Probe(spec, template_name, refusal=str(exc), limit=exc.limit), None
    except RENDER_ERRORS as exc:
        kept = without_traceback(exc)
        return Probe(spec, template_name, refusal=f"{type(exc).__name__}: {exc}"), kept
    return Probe(spec, template_name, text=text), None


def run_generation_prompt(
    source: str, template_name: str, special_tokens: Mapping[str, str]
) -> tuple[str | None, Probe | None]:
    """What ``add_generation_prompt=True`` appends after a user turn (the assistant opener),
    and that whole render as a probe (``prompt``, ``prompt+tools``, ``prompt+parts``: the
    reply position is its end; the first that shows the user's text), with placeholders for
    variables no probe passes, when the render fails on them."""
    user: list[Mapping[str, Any]] = [user_message(USER1)]
    shapes: tuple[tuple[str, list[Mapping[str, Any]], dict[str, Any]], ...] = (
        ("prompt", user, {}),
        ("prompt+tools", user, {"tools": [TOOL_SCHEMA]}),
        ("prompt+parts", [user_message(USER1, parts=True)], {}),
    )
    first: tuple[str, Probe] | None = None
    for name, messages, extra in shapes:
        if name == "prompt+parts" and first is None:
            break  # content parts only show the user's text: never the generation prompt
        for _ in range(2):  # once as given, once more with placeholders
            try:
                without, with_prompt = (
                    render_chat(
                        source,
                        messages,
                        special_tokens=special_tokens,
                        add_generation_prompt=flag,
                        **extra,
                    )
                    for flag in (False, True)
                )
            except TemplateRefusal:
                break
            except RENDER_ERRORS as exc:
                values = _placeholders_for(source, exc, extra, special_tokens)
                if not values:
                    break
                extra = {**extra, **values}
                continue
            spec = ProbeSpec(name, "prompt", tuple(dict(m) for m in messages), extra, USER1)
            found = (
                with_prompt[_divergence(without, with_prompt) :],
                Probe(spec, template_name, text=with_prompt),
            )
            if find_marker(with_prompt, USER1) >= 0:
                return found if first is None else (first[0], found[1])
            first = first or found
            break
    return first if first is not None else (None, None)


def _divergence(without: str, with_prompt: str) -> int:
    """Where the generation prompt starts: after the common prefix of both renders.

    A template may write something *instead of* the prompt (Phi-3 writes ``<|endoftext|>``
    in the ``else`` of ``add_generation_prompt``): the renders then part inside a token
    (``<|end|>\n<|`` + ``assistant|>`` / ``endoftext|>``), so back up to a token boundary.
    """
    n = 0
    while n < min(len(without), len(with_prompt)) and without[n] == with_prompt[n]:
        n += 1
    if n < len(without):
        while n > 0 and not with_prompt[n - 1].isspace() and with_prompt[n - 1] not in ">]":
            n -= 1
    return n
