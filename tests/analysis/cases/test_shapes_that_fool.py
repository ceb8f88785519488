"""Template shapes, several spellings each, and for each rule a template built to
fool it (a healthy verdict that should not be).

1. Several tool calls in one assistant message: what a template writes between two calls of
   one message, or two arguments of one call, is inside the turn; when nothing but that
   follows the last call, the next turn's opener ends it. The tokenizer's ``special`` flag
   never decides it.
2. Reasoning under other names (``reasoning``, ``thinking``, ``thought``, a content part of
   type ``thinking`` / ``reasoning`` / ``thoughts``): a reasoning block closed by the reply's
   own closer makes that closer in-turn (EOS010).
3. A reply that makes tool calls writes the reply's closer, then more of its own text (EOS016).
4. Variables no probe passes (``datetime``, ``functions``...) that fail on ``Undefined``: the
   probes are tried again with placeholders, recorded in the JSON.

Every expectation is read off the template text (the comment above each row says where);
each row is checked the way ``tests/analysis/cases/test_shapes.py`` checks its rows: the required
ids make the repo healthy, leaving any one out is caught and fixed, a forbidden id is never
proposed, and a forbidden id listed as a stop id is taken out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from eosfix.analysis.positions import (
    EVERY_REPLY,
    IN_TOOL_CALL,
    IN_TURN,
    NEXT_TURN,
    TOOL_CALL,
)
from eosfix.analysis.shapes import CALL_ARGS, THINK1
from eosfix.containers.folder.read import load_repo
from eosfix.decide.check import Status
from tests.conftest import check_repo
from tests.support.invariants import contradictions

FIRST_ID = 100


@dataclass(frozen=True)
class Shape:
    name: str
    template: str
    tokens: tuple[str, ...]  # control tokens, ids FIRST_ID, FIRST_ID + 1, ... in this order
    ends: dict[str, str]  # must be a stop id: token -> where it is written
    never: tuple[str, ...] = ()  # never a terminator, never proposed
    ok: tuple[str, ...] = ()  # may be a stop id: written only after a complete reply
    in_turn: tuple[str, ...] = ()  # written between a reply's reasoning and its answer
    in_call: tuple[str, ...] = ()  # written by a reply that makes calls, before its last argument
    cuts: tuple[str, ...] = ()  # listed as a stop id: EOS011, and fix takes it out
    plain: tuple[str, ...] = ()  # added tokens the tokenizer does not mark special
    eos: str | None = None  # the tokenizer's eos_token (default: the first token)
    findings: tuple[str, ...] = ()  # finding codes once every required id is a stop id
    placeholders: dict[str, object] = field(default_factory=dict)  # recorded for the template

    def id(self, token: str) -> int:
        return FIRST_ID + self.tokens.index(token)


def _write(tmp_path, shape: Shape, stop: list[str] | None):
    decoder = {
        str(shape.id(c)): {
            "content": c,
            "special": c not in shape.plain,
            "normalized": False,
            "lstrip": False,
            "rstrip": False,
            "single_word": False,
        }
        for c in shape.tokens
    }
    tok = {
        "eos_token": shape.eos or shape.tokens[0],
        "added_tokens_decoder": decoder,
        "chat_template": shape.template,
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tok))
    gen = {"eos_token_id": [shape.id(t) for t in stop]} if stop is not None else {}
    (tmp_path / "generation_config.json").write_text(json.dumps(gen))
    return tmp_path


def _check(tmp_path, shape: Shape, stop: list[str] | None):
    return check_repo(load_repo(_write(tmp_path, shape, stop)))


# --- 1. several tool calls in one message --------------------------------------------------

GLM_TOKENS = (
    "<|endoftext|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
)
GLM_TAGS = GLM_TOKENS[4:]
# Each call: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>; after
# the loop the template writes nothing: the reply runs into <|observation|> (a tool result) or
# <|user|>. </arg_value> and </tool_call> sit between two arguments / two calls of one reply.
GLM_CALLS = (
    "[gMASK]{% for m in messages %}{% if m.role == 'user' %}<|user|>\n{{ m.content }}"
    "{% elif m.role == 'assistant' %}<|assistant|>\n{{ m.content or '' }}"
    "{% for tc in m.tool_calls or [] %}<tool_call>{{ tc.function.name }}"
    "{% for k, v in tc.function.arguments.items() %}<arg_key>{{ k }}</arg_key>"
    "<arg_value>{{ v }}</arg_value>{% endfor %}</tool_call>{% endfor %}"
    "{% elif m.role == 'tool' %}<|observation|>\n{{ m.content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _glm(name: str, plain: tuple[str, ...]) -> Shape:
    return Shape(
        f"several calls, nothing after the loop: {name}",
        GLM_CALLS,
        GLM_TOKENS,
        ends={"<|user|>": NEXT_TURN, "<|observation|>": NEXT_TURN},
        never=("<|assistant|>", *GLM_TAGS),
        in_call=GLM_TAGS,
        cuts=("</tool_call>", "</arg_value>", "<tool_call>"),
        plain=plain,
    )


def _chatml_calls(call: str, after_loop: str = "<|im_end|>") -> str:
    return (
        "{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
        "{{ m.content }}\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m.role }}\n"
        "{{ m.content or '' }}{% for tc in m.tool_calls or [] %}" + call + "{% endfor %}"
        "{{ '" + after_loop + "' if m.tool_calls else '<|im_end|>' }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


CHATML = ("<|endoftext|>", "<|im_end|>", "<|im_start|>")
CALL_END = ("<|call_end|>",)
HERMES_CALL = "\n<tool_call>\n{{ tc.function | tojson }}\n</tool_call>"

SEVERAL_CALLS = [
    _glm("every tag special", ()),
    _glm("</tool_call> plain", ("</tool_call>",)),
    _glm("<tool_call> and </tool_call> plain", ("<tool_call>", "</tool_call>")),
    _glm("every tag plain", GLM_TAGS),
    # Calls as JSON in <tool_call> tags, the turn closed by <|im_end|> after the loop: only
    # <|im_end|> ends the reply; </tool_call> ends one call of several (Qwen, Hermes).
    Shape(
        "several JSON calls in tags, then the turn closer",
        _chatml_calls(HERMES_CALL),
        (*CHATML, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<tool_call>", "</tool_call>"),
        in_call=("<tool_call>", "</tool_call>"),
        cuts=("</tool_call>", "<tool_call>"),
        plain=("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
    ),
    # XML parameters (<parameter=k>v</parameter>, one per argument) in <tool_call> tags.
    Shape(
        "several calls with XML parameters, then the turn closer",
        _chatml_calls(
            "\n<tool_call>\n<function={{ tc.function.name }}>\n"
            "{% for k, v in tc.function.arguments | items %}<parameter={{ k }}>\n{{ v }}\n"
            "</parameter>\n{% endfor %}</function>\n</tool_call>"
        ),
        (*CHATML, "<tool_call>", "</tool_call>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<tool_call>", "</tool_call>"),
        in_call=("<tool_call>", "</tool_call>"),
        cuts=("</tool_call>",),
    ),
    # A closer after each call inside the loop, nothing after it: <|call_end|> sits between
    # two calls, so the tool turn's opener <|tool|> is what follows a complete reply.
    Shape(
        "a closer after each call, nothing after the loop",
        "{% for m in messages %}{% if m.role == 'tool' %}<|tool|>{{ m.content }}<|end|>"
        "{% elif m.tool_calls %}<|assistant|>{% for tc in m.tool_calls %}<|call|>"
        "{{ tc.function | tojson }}<|call_end|>{% endfor %}"
        "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        (
            "<|endoftext|>",
            "<|end|>",
            "<|user|>",
            "<|assistant|>",
            "<|tool|>",
            "<|call|>",
            *CALL_END,
        ),
        ends={"<|end|>": EVERY_REPLY, "<|tool|>": NEXT_TURN},
        never=("<|user|>", "<|assistant|>", "<|call|>", "<|call_end|>"),
        in_call=("<|call|>", "<|call_end|>"),
        cuts=("<|call_end|>", "<|call|>"),
    ),
    # One call per message (several refused), two arguments each behind <|arg|>: <|call|>
    # after the arguments ends the call, <|arg|> is written between two of them.
    Shape(
        "one call per message, arguments behind a token",
        "{% for m in messages %}{% if m.tool_calls %}"
        "{% if m.tool_calls | length > 1 %}{{ raise_exception('one call per message') }}"
        "{% endif %}{% set f = m.tool_calls[0].function %}<|start|>assistant to={{ f.name }}"
        "<|message|>{% for k, v in f.arguments | items %}<|arg|>{{ k }}={{ v }}{% endfor %}"
        "<|call|>{% else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|start|>", "<|message|>", "<|arg|>", "<|call|>"),
        ends={"<|end|>": EVERY_REPLY, "<|call|>": TOOL_CALL},
        never=("<|start|>", "<|message|>", "<|arg|>"),
        in_call=("<|arg|>", "<|message|>"),
        cuts=("<|arg|>",),
    ),
]

# Built to fool rule 1: a probe of one call sees each of these tokens after a complete call.
SEVERAL_CALLS_FOOLS = [
    # Each call of a message written as its own closed turn: <|im_end|> is written between two
    # calls of one reply, and it is all that closes a plain reply: no id can end both.
    Shape(
        "fool: each call of one message closed like a reply",
        "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}"
        "<|im_start|>assistant\n<tool_call>{{ tc.function | tojson }}</tool_call><|im_end|>\n"
        "{% endfor %}{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        (*CHATML, "<tool_call>", "</tool_call>"),
        ends={},
        never=("<|im_end|>", "<|im_start|>", "<tool_call>", "</tool_call>"),
        in_call=("<|im_end|>", "</tool_call>"),
        findings=("EOS016",),
    ),
    # </tool_call> only between two calls, <|calls_end|> after the last one: a stop list
    # holding </tool_call> cuts the second call; <|calls_end|> ends a call.
    Shape(
        "fool: a call closer written only between calls",
        _chatml_calls(
            "<tool_call>{{ tc.function | tojson }}{% if not loop.last %}</tool_call>{% endif %}",
            after_loop="<|calls_end|>",
        ),
        (*CHATML, "<tool_call>", "</tool_call>", "<|calls_end|>"),
        ends={"<|im_end|>": EVERY_REPLY, "<|calls_end|>": TOOL_CALL},
        never=("<|im_start|>", "<tool_call>", "</tool_call>"),
        in_call=("<tool_call>", "</tool_call>"),
        cuts=("</tool_call>", "<tool_call>"),
    ),
    # Arguments written in reverse key order: what lies between two arguments is found
    # whatever their order (</arg> after each value, <|im_end|> after the loop).
    Shape(
        "fool: arguments in reverse order",
        _chatml_calls(
            "<tool_call>{% for k, v in tc.function.arguments | dictsort(reverse=true) %}"
            "<arg>{{ k }}={{ v }}</arg>{% endfor %}</tool_call>"
        ),
        (*CHATML, "<tool_call>", "</tool_call>", "<arg>", "</arg>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<tool_call>", "</tool_call>", "<arg>", "</arg>"),
        in_call=("</arg>", "<arg>", "</tool_call>"),
        cuts=("</arg>", "</tool_call>"),
    ),
]

# --- 2. reasoning under other field names -------------------------------------------------

THINK_TOKENS = ("<|endoftext|>", "<|end|>", "<|start|>", "<|think|>", "<|content|>")
REPLY_TEXT = (
    "{{ m.content if m.content is string else "
    "(m.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join) }}"
)


def _reasoning(block: str, closer: str = "<|end|>") -> str:
    """``<|think|>reasoning<closer>`` (from ``block``), then ``<|content|>answer<|end|>``."""
    return (
        "{% for m in messages %}<|start|>{{ m.role }}\n"
        + block.replace("CLOSE", closer)
        + "<|content|>"
        + REPLY_TEXT
        + "<|end|>\n{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
    )


FIELDS = {
    "message.reasoning": "{% if m.reasoning %}<|think|>{{ m.reasoning }}CLOSE{% endif %}",
    "message.thinking": "{% if m.thinking %}<|think|>{{ m.thinking }}CLOSE{% endif %}",
    "message['thought']": "{% if m['thought'] %}<|think|>{{ m['thought'] }}CLOSE{% endif %}",
    "a content part of type thinking": (
        "{% if m.content is not string %}{% for p in m.content %}{% if p.type == 'thinking' %}"
        "<|think|>{{ p.thinking }}CLOSE{% endif %}{% endfor %}{% endif %}"
    ),
    "a content part of type reasoning": (
        "{% if m.content is not string %}"
        "{% for p in m.content if p['type'] == 'reasoning' %}<|think|>{{ p.text }}CLOSE"
        "{% endfor %}{% endif %}"
    ),
    "a content part of type thoughts": (
        "{% if m.content is not string %}{% for p in m.content %}"
        "{% if p.type in ['thoughts'] %}<|think|>{{ p.text }}CLOSE{% endif %}{% endfor %}"
        "{% endif %}"
    ),
}

# <|end|> closes the reasoning block and the answer of one reply: it is written between the
# reasoning and the answer (with <|content|>) and closes the reply, and nothing else does.
REASONING = [
    Shape(
        f"reasoning in {name}, closed by the reply's closer",
        _reasoning(block),
        THINK_TOKENS,
        ends={},
        never=THINK_TOKENS[1:],
        in_turn=("<|end|>", "<|content|>"),
        findings=("EOS010",),
    )
    for name, block in FIELDS.items()
] + [
    # The same block closed by a token of its own: <|end|> only closes the reply.
    Shape(
        f"reasoning in {name}, closed by a token of its own",
        _reasoning(block, "<|think_end|>"),
        (*THINK_TOKENS, "<|think_end|>"),
        ends={"<|end|>": EVERY_REPLY},
        never=("<|start|>", "<|think|>", "<|content|>", "<|think_end|>"),
        in_turn=("<|think_end|>", "<|content|>"),
        cuts=("<|think_end|>", "<|content|>"),
    )
    for name, block in list(FIELDS.items())[::2]
]

REASONING_FOOLS = [
    # The block is written only when a variable no probe passes is true.
    Shape(
        "fool: reasoning written only when a flag no probe passes is set",
        _reasoning(
            "{% if enable_thinking and m.reasoning_content %}<|think|>"
            "{{ m.reasoning_content }}CLOSE{% endif %}"
        ),
        THINK_TOKENS,
        ends={},
        never=THINK_TOKENS[1:],
        in_turn=("<|end|>", "<|content|>"),
        findings=("EOS010",),
    ),
    # ... or unless one is set.
    Shape(
        "fool: reasoning hidden when a flag no probe passes is set",
        _reasoning(
            "{% if not (hide_reasoning is true) and m.thought is defined %}<|think|>"
            "{{ m.thought }}CLOSE{% endif %}"
        ),
        THINK_TOKENS,
        ends={},
        never=THINK_TOKENS[1:],
        in_turn=("<|end|>", "<|content|>"),
        findings=("EOS010",),
    ),
]

# --- 3. the reply's closer, then more of the model's own text -----------------------------

SEP = ("<|endoftext|>", "<msg_sep>", "<sep>")

WRITES_ON = [
    # assistant<sep>\n<msg_sep>\n\nfunction call<sep>{...}<msg_sep>: <msg_sep> closes every
    # message, and a tool-calling reply writes it before the call the model goes on to write.
    Shape(
        "a separator after the content, then the call",
        "{% for m in messages %}{{ m.role }}<sep>{{ m.content or '' }}{% if m.tool_calls %}\n"
        "<msg_sep>\n\nfunction call<sep>{{ m.tool_calls[0].function | tojson }}{% endif %}"
        "<msg_sep>{% endfor %}{% if add_generation_prompt %}assistant<sep>{% endif %}",
        SEP,
        ends={},
        never=("<msg_sep>", "<sep>"),
        in_call=("<msg_sep>",),
        findings=("EOS016",),
    ),
    # ChatML: the content closed by <|im_end|>, then the calls, then <|im_end|> again. The
    # next turn's <|im_start|> follows complete replies only: a stop there does no harm, but
    # after a call the template writes <|im_end|> first, so it is not required.
    Shape(
        "the turn closer after the content, then the calls",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n"
        "{% for tc in m.tool_calls or [] %}<tool_call>{{ tc.function | tojson }}</tool_call>"
        "{% endfor %}{{ '<|im_end|>\n' if m.tool_calls else '' }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        (*CHATML, "<tool_call>", "</tool_call>"),
        ends={},
        never=("<|im_end|>", "<tool_call>", "</tool_call>"),
        ok=("<|im_start|>",),
        in_call=("<|im_end|>",),
        findings=("EOS016",),
    ),
    # Llama-like: the content closed by <|eot_id|>, then a second header and the call closed
    # by <|eom_id|>: <|eom_id|> ends a call, <|eot_id|> is written before one.
    Shape(
        "<|eot_id|> after the content, then a header and the call",
        "<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m.role }}"
        "<|end_header_id|>\n\n{{ m.content or '' }}<|eot_id|>{% if m.tool_calls %}"
        "<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>"
        "{{ m.tool_calls[0].function | tojson }}<|eom_id|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}",
        (
            "<|eot_id|>",
            "<|begin_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|python_tag|>",
            "<|eom_id|>",
        ),
        ends={"<|eom_id|>": TOOL_CALL},
        never=("<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|python_tag|>"),
        in_call=("<|eot_id|>", "<|python_tag|>"),
        eos="<|begin_of_text|>",
        findings=("EOS016",),
    ),
    # The same separator, but every message also ends with <|endoftext|>: that ends a reply,
    # and nothing is wrong.
    Shape(
        "a separator before the call, another token after every message",
        "{% for m in messages %}{{ m.role }}<sep>{{ m.content or '' }}{% if m.tool_calls %}"
        "<msg_sep>function call<sep>{{ m.tool_calls[0].function | tojson }}{% endif %}"
        "<msg_sep><|endoftext|>{% endfor %}{% if add_generation_prompt %}assistant<sep>"
        "{% endif %}",
        SEP,
        ends={"<|endoftext|>": EVERY_REPLY},
        never=("<msg_sep>", "<sep>"),
        in_call=("<msg_sep>",),
        cuts=("<msg_sep>",),
    ),
]

WRITES_ON_FOOLS = [
    # The closer is written before the call only when the reply has text: probes of calls
    # without content never see it.
    Shape(
        "fool: the turn closer before the calls only when the reply has text",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
        "{% if m.content %}{{ m.content }}<|im_end|>\n<|im_start|>assistant\n{% endif %}"
        "{% for tc in m.tool_calls %}<tool_call>{{ tc.function | tojson }}</tool_call>"
        "{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        (*CHATML, "<tool_call>", "</tool_call>"),
        ends={},
        never=("<|im_end|>", "<|im_start|>", "<tool_call>", "</tool_call>"),
        in_call=("<|im_end|>",),
        findings=("EOS016",),
    ),
]

# --- 4. variables no probe passes --------------------------------------------------------

LLAMA = ("<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>")
LLAMA_NEVER = LLAMA[1:]


def _llama(system: str) -> str:
    """A Llama-3 conversation whose system turn is written by ``system``: every message ends
    with <|eot_id|>."""
    return (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        + system
        + "<|eot_id|>{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
        "\n\n{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
        "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
    )


UNDECLARED = [
    Shape(
        "a date concatenated into the system turn",
        _llama("{{ 'Today Date: ' + datetime }}"),
        LLAMA,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA_NEVER,
        placeholders={"datetime": ""},
    ),
    Shape(
        "functions serialised into the system turn",
        _llama("Functions: {{ functions | tojson }}"),
        LLAMA,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA_NEVER,
        placeholders={"functions": []},
    ),
    Shape(
        "a count used in arithmetic, a flag read as an object",
        _llama(
            "{% if tools_in_user_message.enabled %}Tools below.{% endif %}"
            "At most {{ max_calls - 1 }} calls. {{ custom_tools | length }} tools."
        ),
        LLAMA,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA_NEVER,
        placeholders={"max_calls": 1, "tools_in_user_message": {}},
    ),
    Shape(
        "a variable given a default is never given a placeholder",
        "{% if not date_string is defined %}{% set date_string = '26 Jul 2024' %}{% endif %}"
        + _llama("{{ 'Today Date: ' + date_string }}"),
        LLAMA,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA_NEVER,
    ),
]

SHAPES = [
    *SEVERAL_CALLS,
    *SEVERAL_CALLS_FOOLS,
    *REASONING,
    *REASONING_FOOLS,
    *WRITES_ON,
    *WRITES_ON_FOOLS,
    *UNDECLARED,
]
SHAPE_PARAMS = [pytest.param(s, id=s.name) for s in SHAPES]


def _ids(shape: Shape, tokens) -> list[str]:
    return [t for t in tokens if t in shape.tokens]


def test_three_spellings_or_more_of_each_shape():
    assert len({s.template for s in SEVERAL_CALLS}) >= 3
    assert len({s.plain for s in SEVERAL_CALLS if s.template == GLM_CALLS}) >= 3
    assert len(REASONING) >= 6
    assert len(WRITES_ON) >= 3
    assert len(UNDECLARED) >= 3
    assert len({s.name for s in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_terminators_and_where_they_are_written(shape, tmp_path):
    check = _check(tmp_path, shape, _ids(shape, shape.ends))
    ts = check.terminators
    found = {t.content: t for t in ts.terminators}
    assert set(found) == set(shape.ends), ts.terminators
    for content, where in shape.ends.items():
        assert where in {p.where for p in found[content].placements}, found[content]
    assert set(ts.in_turn) == set(shape.in_turn)
    assert set(shape.in_call) <= set(ts.in_call), ts.in_call
    positions = ts.positions()
    for content in shape.in_call:
        assert IN_TOOL_CALL in positions[content], positions
    for content in shape.in_turn:
        assert IN_TURN in positions[content], positions
    for content in shape.never:
        assert content not in found
        assert content not in {t.content for t in ts.additional}
        assert content not in ts.acceptable
    for content in shape.ok:
        assert content in ts.acceptable


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_no_report_on_a_shape_contradicts_itself(shape, tmp_path):
    """``tests.support.invariants``: with each id that can be written a stop id."""
    repo, work = tmp_path / "repo", tmp_path / "work"
    repo.mkdir()
    work.mkdir()
    _write(repo, shape, [t for t in shape.ends if t in shape.tokens])
    assert contradictions(repo, work) == []


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_findings_once_every_required_id_is_a_stop_id(shape, tmp_path):
    stop = _ids(shape, [*shape.ends, shape.eos or shape.tokens[0]])
    check = _check(tmp_path, shape, stop)
    assert sorted(f.code for f in check.findings) == sorted(shape.findings), check.findings
    if shape.findings:  # an error no stop id fixes
        assert check.status is Status.PROBLEMS


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_required_ids_make_it_healthy(shape, tmp_path):
    required = _ids(shape, shape.ends)
    if shape.findings or not required:
        return
    assert _check(tmp_path, shape, required).status is Status.OK


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_leaving_out_any_required_id_is_caught_and_fixed(shape, tmp_path):
    required = _ids(shape, shape.ends)
    for missing in required:
        check = _check(tmp_path, shape, [t for t in required if t != missing] or None)
        assert check.status is not Status.OK, f"{missing} left out, yet healthy"
        assert shape.id(missing) in (check.proposed or ())


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_never_proposes_a_forbidden_id(shape, tmp_path):
    proposed = set(_check(tmp_path, shape, None).proposed or ())
    for content in shape.never:
        assert shape.id(content) not in proposed, f"{content} proposed"


@pytest.mark.parametrize("shape", [s for s in SHAPE_PARAMS if s.values[0].cuts])
def test_a_stop_id_written_inside_the_turn_is_taken_out(shape, tmp_path):
    required = _ids(shape, shape.ends)
    for content in shape.cuts:
        check = _check(tmp_path, shape, [*required, content])
        cut = [f for f in check.findings if f.code == "EOS011"]
        assert cut, check.findings
        assert content in cut[0].message
        assert check.status is Status.FIXABLE
        assert shape.id(content) not in (check.proposed or ())


@pytest.mark.parametrize("shape", [s for s in SHAPE_PARAMS if s.values[0] in UNDECLARED])
def test_placeholders_are_recorded_only_where_a_render_needed_them(shape, tmp_path):
    (ta,) = _check(tmp_path, shape, None).terminators.templates
    assert ta.placeholders == shape.placeholders
    assert all(p.placeholders == () for p in ta.rendered) == (not shape.placeholders)


# --- the special flag never decides (rule 1) -----------------------------------------------


def test_the_special_flag_of_a_call_tag_never_changes_the_verdict(tmp_path):
    verdicts = set()
    for i, shape in enumerate(s for s in SEVERAL_CALLS if s.template == GLM_CALLS):
        folder = tmp_path / str(i)
        folder.mkdir()
        check = _check(folder, shape, None)
        found = tuple(sorted(t.content for t in check.terminators.terminators))
        verdicts.add((found, check.proposed))
    assert len(verdicts) == 1, verdicts


def test_several_calls_are_probed_with_two_arguments_each(tmp_path):
    (shape,) = [s for s in SEVERAL_CALLS if s.name.endswith("every tag special")]
    (ta,) = _check(tmp_path, shape, None).terminators.templates
    (two,) = [p for p in ta.rendered if p.spec.name == "tool_calls+two"]
    assert two.text is not None
    assert all(arg in two.text for arg in CALL_ARGS)
    assert "</arg_value><arg_key>" in two.text  # between two arguments of one call
    assert "</tool_call><tool_call>" in two.text  # between two calls of one message


def test_a_template_refusing_several_calls_is_probed_with_one_call_of_two_arguments(tmp_path):
    (shape,) = [s for s in SEVERAL_CALLS if s.name.startswith("one call per message")]
    (ta,) = _check(tmp_path, shape, None).terminators.templates
    names = {p.spec.name: p for p in ta.probes}
    assert "one call per message" in (names["tool_calls+two"].refusal or "")
    assert names["tool_call+two_args"].text is not None


def test_templates_without_calls_or_reasoning_parts_get_no_extra_probe(tmp_path):
    (ta,) = _check(tmp_path, UNDECLARED[0], None).terminators.templates
    names = {p.spec.name for p in ta.probes}
    assert not {n for n in names if n.startswith("tool_calls") or n.endswith("_part")}
    assert "final+reasoning+flags" not in names


# --- reasoning probes (rule 2) -----------------------------------------------------------


@pytest.mark.parametrize("name", list(FIELDS))
def test_the_reasoning_block_is_rendered_for_every_field_name(name, tmp_path):
    shape = next(s for s in REASONING if name in s.name)
    (ta,) = _check(tmp_path, shape, None).terminators.templates
    shown = [p for p in ta.rendered if p.spec.kind == "reasoning" and THINK1 in (p.text or "")]
    assert shown, [p.spec.name for p in ta.probes]
    assert f"<|think|>{THINK1}<|end|><|content|>" in (shown[0].text or "")


def test_the_closer_written_inside_a_reasoning_reply_is_not_removed(tmp_path):
    """EOS010: removing the only closer would stop nothing, so fix leaves it."""
    shape = REASONING[0]
    check = _check(tmp_path, shape, ["<|end|>"])
    assert "EOS010" in [f.code for f in check.findings]
    assert "EOS011" not in [f.code for f in check.findings]
    assert check.proposed is None


# --- the closer before more of the reply (rule 3) ----------------------------------------


def test_eos016_names_the_token_and_fix_changes_nothing(tmp_path):
    shape = WRITES_ON[0]
    check = _check(tmp_path, shape, ["<msg_sep>", "<|endoftext|>"])
    (f,) = [f for f in check.findings if f.code == "EOS016"]
    assert f.message.startswith("<msg_sep> closes the last reply but a reply that makes tool")
    assert not f.fixable
    assert check.proposed is None  # <msg_sep> is not taken out: nothing else ends a reply
    assert check.status is Status.PROBLEMS


# --- placeholders (rule 4) ---------------------------------------------------------------


def test_json_records_the_placeholders_and_in_call_tokens(tmp_path, run_eosfix):
    _write(tmp_path, UNDECLARED[0], ["<|eot_id|>"])
    payload = json.loads(run_eosfix("check", tmp_path, "--format", "json").stdout)
    (entry,) = payload["repos"]
    assert entry["status"] == "ok"
    assert entry["templates"][0]["placeholders"] == {"datetime": ""}
    assert entry["in_call"] == []
    calls = tmp_path / "calls"
    calls.mkdir()
    _write(calls, SEVERAL_CALLS[0], None)
    (entry,) = json.loads(run_eosfix("check", calls, "--format", "json").stdout)["repos"]
    assert set(entry["in_call"]) == set(GLM_TAGS)
    assert entry["templates"][0]["placeholders"] == {}


# Built to fool rule 4: placeholders must not turn a template that cannot render into a
# healthy one.
REFUSES = Shape(
    "fool: refuses outside its app",
    "{% if app_context is not defined %}{{ raise_exception('run me inside my app') }}{% endif %}"
    + _llama("{{ 'Today Date: ' + datetime }}"),
    LLAMA,
    ends={},
)
FAILS = Shape(
    "fool: fails for a reason a placeholder cannot fix",
    _llama("{{ messages[7].content + datetime }}"),
    LLAMA,
    ends={},
)


@pytest.mark.parametrize("shape", [REFUSES, FAILS], ids=lambda s: s.name)
def test_a_template_that_cannot_render_stays_eos100(shape, tmp_path):
    check = _check(tmp_path, shape, ["<|eot_id|>"])
    assert [f.code for f in check.findings] == ["EOS100"]
    (ta,) = check.terminators.templates
    assert not ta.rendered
    assert ta.placeholders == {}
    # "possible" holds what the template text writes after model text, nothing it opens
    # turns with
    assert [tok for tok, _ in ta.unreached_literals] == ["<|eot_id|>"]


def test_a_retry_that_fails_too_says_so(tmp_path):
    shape = Shape(
        "fails with and without placeholders",
        _llama("{{ datetime.strftime('%d %b %Y') }}"),
        LLAMA,
        ends={},
    )
    check = _check(tmp_path, shape, ["<|eot_id|>"])
    (f,) = [f for f in check.findings if f.code == "EOS100"]
    assert "'datetime' is undefined; again with placeholders for datetime:" in f.message
