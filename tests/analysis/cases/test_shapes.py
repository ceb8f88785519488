"""Template shapes, one row each: a small template written for these tests, its control tokens,
and what eosfix must find (never call a repo healthy that does not stop).

Each row says which tokens must be stop ids (``ends``: token -> where the template writes
it), which are reported as optional stops (``also``), which may be stop ids without harm
(``ok``), and which must never be proposed (``never``: they are written inside a turn or
open one). From the row, every test below derives its repos: all required ids (healthy),
each one left out (broken, and ``fix`` adds it back), every acceptable id too (still
healthy), and no stop ids at all (``fix`` proposes no forbidden id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from eosfix.analysis.positions import (
    CONVERSATION_END,
    EARLIER_REPLIES,
    EVERY_REPLY,
    IN_TOOL_CALL,
    IN_TURN,
    LAST_REPLY,
    NEXT_TURN,
    PLAIN_TEXT,
    TOOL_CALL,
    WHERE,
)
from eosfix.containers.folder.read import load_repo
from eosfix.decide.check import Status
from eosfix.render.report import placement_text
from tests.conftest import check_repo
from tests.support.invariants import contradictions

FIRST_ID = 100


@dataclass(frozen=True)
class Shape:
    name: str
    template: str
    tokens: tuple[str, ...]  # control tokens, ids FIRST_ID, FIRST_ID + 1, ... in this order
    ends: dict[str, str]  # must be a stop id: token -> where it is written
    also: dict[str, str] = field(default_factory=dict)  # optional stops (conversation end)
    ok: tuple[str, ...] = ()  # may also be a stop id
    never: tuple[str, ...] = ()  # never a terminator, never proposed
    in_turn: tuple[str, ...] = ()  # written inside one assistant turn
    in_call: tuple[str, ...] = ()  # opens a tool call, or closes one of several, inside a turn
    eos: str | None = None  # the tokenizer's eos_token (default: the first token)
    findings: tuple[str, ...] = ()  # finding codes once every required id is a stop id

    def id(self, token: str) -> int:
        return FIRST_ID + self.tokens.index(token)


def _chatml(closer: str = "<|im_end|>") -> str:
    return (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" + closer + "\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


LLAMA3_TURN = "<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>"
LLAMA3_TOKENS = ("<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>")
LLAMA3_NEVER = ("<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>")

SHAPES = [
    Shape(
        "chatml",
        _chatml(),
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>",),
    ),
    Shape(
        "chatml writing content through upper",
        _chatml().replace("{{ m.content }}", "{{ m.content | upper }}"),
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>",),
    ),
    Shape(
        "chatml writing content through title, reasoning through lower",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.reasoning_content %}<think>"
        "{{ m.reasoning_content | lower }}</think>{% endif %}{{ m.content | title }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<think>", "</think>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<think>", "</think>"),
        in_turn=("</think>",),
    ),
    Shape(
        "chatml with a default system message",
        "{% if messages[0].role != 'system' %}<|im_start|>system\nYou are helpful.<|im_end|>\n"
        "{% endif %}" + _chatml(),
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>",),
    ),
    Shape(
        "phi3: end of conversation only in the else of add_generation_prompt",
        "{% for m in messages %}{{ '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
        "{% else %}{{ '<|endoftext|>' }}{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"),
        ends={"<|end|>": EVERY_REPLY},
        also={"<|endoftext|>": CONVERSATION_END},
        never=("<|user|>", "<|assistant|>", "<|system|>"),
    ),
    Shape(
        "phi3 with eos_token written at the end",
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% else %}{{ eos_token }}{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>"),
        ends={"<|end|>": EVERY_REPLY},
        also={"<|endoftext|>": CONVERSATION_END},
        never=("<|user|>", "<|assistant|>"),
    ),
    Shape(
        "eos_token after each reply and a different token at the end",
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}"
        "{% if m.role == 'assistant' %}{{ eos_token }}{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant] {% else %}<|conversation_end|>{% endif %}",
        ("</s>", "<|conversation_end|>"),
        ends={"</s>": EVERY_REPLY},
        also={"<|conversation_end|>": CONVERSATION_END},
    ),
    Shape(
        "end of conversation written before the generation prompt would be",
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
        "{% if not add_generation_prompt %}<|endoftext|>{% endif %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>"),
        ends={"<|end|>": EVERY_REPLY},
        also={"<|endoftext|>": CONVERSATION_END},
        never=("<|user|>", "<|assistant|>"),
    ),
    Shape(
        "gpt-oss-like: the final closer replaces the history one, which is in-turn",
        "{% for m in messages %}{% if m.role == 'user' %}<|start|>user<|message|>{{ m.content }}"
        "<|end|>{% elif m.role == 'assistant' %}"
        "{% if m.reasoning_content %}<|start|>assistant<|channel|>analysis<|message|>"
        "{{ m.reasoning_content }}<|end|>{% endif %}"
        "{% if m.tool_calls %}<|start|>assistant<|channel|>commentary to=functions."
        "{{ m.tool_calls[0].function.name }}<|message|>{{ m.tool_calls[0].function.arguments }}"
        "<|call|>{% else %}<|start|>assistant<|channel|>final<|message|>{{ m.content }}"
        "{% if loop.last and not add_generation_prompt %}<|return|>{% else %}<|end|>{% endif %}"
        "{% endif %}{% elif m.role == 'tool' %}<|start|>functions.{{ m.name }} to=assistant"
        "<|channel|>commentary<|message|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start|>assistant{% endif %}",
        ("<|return|>", "<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|call|>"),
        ends={"<|return|>": LAST_REPLY, "<|call|>": TOOL_CALL},
        never=("<|end|>", "<|start|>", "<|message|>", "<|channel|>"),
        in_turn=("<|end|>", "<|channel|>", "<|message|>", "<|start|>"),
    ),
    Shape(
        "gpt-oss-like without reasoning: the history closer is a stop too",
        "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}"
        "{% if m.role == 'assistant' and loop.last and not add_generation_prompt %}<|return|>"
        "{% else %}<|end|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start|>assistant<|message|>{% endif %}",
        ("<|return|>", "<|end|>", "<|start|>", "<|message|>"),
        ends={"<|return|>": LAST_REPLY, "<|end|>": EARLIER_REPLIES},
        never=("<|start|>", "<|message|>"),
    ),
    Shape(
        "loop.last branch: a different closer for the last message",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% if loop.last %}<|eot|>{% else %}<|sep|>{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|eot|>", "<|sep|>", "<|im_start|>"),
        ends={"<|eot|>": LAST_REPLY, "<|sep|>": EARLIER_REPLIES},
        never=("<|im_start|>",),
    ),
    Shape(
        "closer only when another turn follows",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% if not loop.last %}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_end|>\n<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EARLIER_REPLIES},
        never=("<|im_start|>",),
    ),
    Shape(
        "generation prompt holds the closer of the previous turn",
        "{% for m in messages %}{% if not loop.first %}<|end|>\n{% endif %}"
        "<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|end|>\n<|assistant|>\n{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>"),
        ends={"<|end|>": EARLIER_REPLIES},
        never=("<|user|>", "<|assistant|>"),
    ),
    Shape(
        "generation prompt holds the closer, the conversation end follows it",
        "{% for m in messages %}{% if not loop.first %}<|end|>\n{% endif %}"
        "<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|end|>\n<|assistant|>\n"
        "{% else %}<|end|>\n<|endoftext|>{% endif %}",
        ("<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>"),
        ends={"<|end|>": EVERY_REPLY},
        also={"<|endoftext|>": CONVERSATION_END},
        never=("<|user|>", "<|assistant|>"),
    ),
    Shape(
        "glm-like: replies run into the next turn's opener",
        "[gMASK]<sop>{% for m in messages %}{% if m.role == 'tool' %}<|observation|>\n"
        "{{ m.content }}{% else %}<|{{ m.role }}|>\n{{ m.content }}"
        "{% for tc in m.tool_calls or [] %}{{ tc.function.name }}\n"
        "{{ tc.function.arguments | tojson }}{% endfor %}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
        ("<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|observation|>"),
        ends={"<|user|>": NEXT_TURN, "<|observation|>": NEXT_TURN},
        never=("<|assistant|>", "[gMASK]", "<sop>"),
    ),
    Shape(
        "glm-like with an end-of-text token after the last reply",
        "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% else %}<|endoftext|>{% endif %}",
        ("<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>"),
        ends={"<|user|>": NEXT_TURN, "<|endoftext|>": LAST_REPLY},
        never=("<|assistant|>", "[gMASK]", "<sop>"),
    ),
    Shape(
        "llama3",
        "{{ bos_token }}{% for m in messages %}" + LLAMA3_TURN + "{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}",
        LLAMA3_TOKENS,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA3_NEVER,
    ),
    Shape(
        "llama3 always appending the assistant header",
        "<|begin_of_text|>{% for m in messages %}" + LLAMA3_TURN + "{% endfor %}"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        LLAMA3_TOKENS,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA3_NEVER,
    ),
    Shape(
        "llama3.1-like builtin tools end a call with <|eom_id|>",
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "{% if builtin_tools is defined %}Environment: ipython\n{% endif %}"
        "Cutting Knowledge Date: December 2023<|eot_id|>"
        "{% for m in messages %}{% if m.tool_calls %}"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% set c = m.tool_calls[0].function %}"
        '<|python_tag|>{{ c.name }}.call(q="{{ c.arguments.q }}")'
        "{% if builtin_tools is defined %}<|eom_id|>{% else %}<|eot_id|>{% endif %}"
        "{% elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n"
        "{{ m.content }}<|eot_id|>{% else %}" + LLAMA3_TURN + "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}",
        (*LLAMA3_TOKENS, "<|eom_id|>", "<|python_tag|>"),
        ends={"<|eot_id|>": EVERY_REPLY, "<|eom_id|>": TOOL_CALL},
        never=(*LLAMA3_NEVER, "<|python_tag|>"),
        in_call=("<|python_tag|>",),
    ),
    Shape(
        "llama3.2-like: a tool call ends with <|eot_id|> like a reply",
        "<|begin_of_text|>{% for m in messages %}{% if m.tool_calls %}"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{{ m.tool_calls[0].function | tojson }}<|eot_id|>"
        "{% elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n"
        "{{ m.content }}<|eot_id|>{% else %}" + LLAMA3_TURN + "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}",
        LLAMA3_TOKENS,
        ends={"<|eot_id|>": EVERY_REPLY},
        never=LLAMA3_NEVER,
    ),
    Shape(
        "mistral-like with tool calls and results",
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST]{{ m.content }}"
        "[/INST]{% elif m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | map(attribute='function')"
        " | list | tojson }}{{ eos_token }}{% elif m.role == 'tool' %}[TOOL_RESULTS]"
        "{{ m.content }}[/TOOL_RESULTS]{% else %}{{ m.content }}{{ eos_token }}{% endif %}"
        "{% endfor %}",
        ("</s>", "<s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
        ends={"</s>": EVERY_REPLY},
        never=("<s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
        in_call=("[TOOL_CALLS]",),
    ),
    Shape(
        "llama2-like: [INST] is plain text, <s> opens each exchange",
        "{% for m in messages %}{% if m.role == 'user' %}{{ bos_token }}[INST] {{ m.content }}"
        " [/INST]{% elif m.role == 'assistant' %} {{ m.content }} {{ eos_token }}{% endif %}"
        "{% endfor %}",
        ("</s>", "<s>"),
        ends={"</s>": EVERY_REPLY},
        never=("<s>",),
    ),
    Shape(
        "alpaca: only plain text separates turns",
        "{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}\n\n"
        "{% else %}### Response:\n{{ m.content }}\n\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}### Response:\n{% endif %}",
        ("</s>",),
        ends={"### Instruction:": PLAIN_TEXT},
        findings=("EOS005",),
    ),
    Shape(
        "alpaca with eos after every response",
        "{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}\n\n"
        "{% else %}### Response:\n{{ m.content }}{{ eos_token }}\n\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}### Response:\n{% endif %}",
        ("</s>",),
        ends={"</s>": EVERY_REPLY},
    ),
    Shape(
        "alpaca with eos only when the conversation ends",
        "{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}\n\n"
        "{% else %}### Response:\n{{ m.content }}\n\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}### Response:\n{% else %}{{ eos_token }}{% endif %}",
        ("</s>",),
        ends={"### Instruction:": PLAIN_TEXT, "</s>": LAST_REPLY},
        findings=("EOS005",),
    ),
    Shape(
        "gemma-like: model role, system refused",
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{% set role = 'model' if m.role == 'assistant' else m.role %}"
        "<start_of_turn>{{ role }}\n{{ m.content | trim }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
        ("<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
        ends={"<end_of_turn>": EVERY_REPLY},
        never=("<start_of_turn>", "<bos>"),
    ),
    Shape(
        "deepseek-like: reasoning stripped from history replies",
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}"
        "{% elif m.role == 'assistant' %}<｜Assistant｜>{% if loop.last %}"
        "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
        "{{ m.content }}{% else %}{{ m.content.split('</think>')[-1] }}{% endif %}"
        "<｜end▁of▁sentence｜>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}",
        ("<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"),
        ends={"<｜end▁of▁sentence｜>": EVERY_REPLY},
        never=("<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>"),
    ),
    Shape(
        "chatml with special think tags inside the last reply",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.role == 'assistant' and loop.last and m.reasoning_content %}"
        "<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<think>", "</think>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<think>", "</think>"),
        in_turn=("</think>",),
    ),
    Shape(
        "generation block around the reply and its closer",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}"
        "{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}"
        "<|im_end|>{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>",),
    ),
    Shape(
        "generation block on the last reply only, a closer of its own",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.role == 'assistant' and loop.last %}{% generation %}{{ m.content }}"
        "<|reply_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<|reply_end|>"),
        ends={"<|reply_end|>": LAST_REPLY, "<|im_end|>": EARLIER_REPLIES},
        never=("<|im_start|>",),
    ),
    Shape(
        "qwen-like tool call as text inside the reply",
        "{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
        "{{ m.content }}\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m.role }}\n"
        "{{ m.content or '' }}{% for tc in m.tool_calls or [] %}<tool_call>\n"
        "{{ tc.function | tojson }}\n</tool_call>{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>",),
    ),
    Shape(
        "a call token closes each call inside the turn, the turn closer follows",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
        "{% for tc in m.tool_calls or [] %}<|tool_call_begin|>{{ tc.function | tojson }}"
        "<|tool_call_end|>{% endfor %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<|tool_call_begin|>", "<|tool_call_end|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<|tool_call_begin|>", "<|tool_call_end|>"),
        in_call=("<|tool_call_begin|>", "<|tool_call_end|>"),
    ),
    Shape(
        "deepseek-like tool calls: nested call tokens, then the turn closer",
        "{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}"
        "{% elif m.tool_calls %}<｜Assistant｜><｜tool▁calls▁begin｜>"
        "{% for tc in m.tool_calls %}<｜tool▁call▁begin｜>{{ tc.function.name }}\n"
        "{{ tc.function.arguments | tojson }}<｜tool▁call▁end｜>{% endfor %}"
        "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>{% elif m.role == 'tool' %}"
        "<｜tool▁output▁begin｜>{{ m.content }}<｜tool▁output▁end｜>"
        "{% else %}<｜Assistant｜>{{ m.content }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}",
        (
            "<｜end▁of▁sentence｜>",
            "<｜User｜>",
            "<｜Assistant｜>",
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
            "<｜tool▁output▁begin｜>",
            "<｜tool▁output▁end｜>",
        ),
        ends={"<｜end▁of▁sentence｜>": EVERY_REPLY},
        never=(
            "<｜User｜>",
            "<｜Assistant｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
            "<｜tool▁output▁begin｜>",
        ),
        in_call=(
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
        ),
    ),
    Shape(
        "a call closed by <|call|> when last, by the turn closer when its result follows",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
        "{{ m.tool_calls[0].function | tojson }}{% if loop.last %}<|call|>{% else %}<|im_end|>"
        "{% endif %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<|call|>"),
        ends={"<|im_end|>": EVERY_REPLY, "<|call|>": TOOL_CALL},
        never=("<|im_start|>",),
    ),
    Shape(
        "gemma4-like: a call hands over with the token that opens the tool's response",
        "{% for m in messages %}{% set role = 'model' if m.role == 'assistant' else m.role %}"
        "{% if m.role == 'tool' %}response:{{ m.name }}{{ '{' }}{{ m.content }}{{ '}' }}"
        "<tool_response|>{% else %}<|turn>{{ role }}\n{{ m.content or '' }}"
        "{% for tc in m.tool_calls or [] %}<|tool_call>call:{{ tc.function.name }}"
        "{{ tc.function.arguments | tojson }}<tool_call|>{% endfor %}"
        "{% if m.tool_calls %}<|tool_response>{% else %}<turn|>\n{% endif %}{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}",
        (
            "<turn|>",
            "<|turn>",
            "<|tool_call>",
            "<tool_call|>",
            "<|tool_response>",
            "<tool_response|>",
        ),
        ends={"<turn|>": EVERY_REPLY, "<|tool_response>": TOOL_CALL},
        never=("<|turn>", "<|tool_call>", "<tool_call|>", "<tool_response|>"),
        in_call=("<|tool_call>", "<tool_call|>"),
    ),
    Shape(
        "command-r-like: a system turn is always appended after the conversation",
        "{% for m in messages %}{% if m.tool_calls %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
        "Action: {{ m.tool_calls | map(attribute='function') | list | tojson }}\n"
        "{% elif m.role == 'tool' %}<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{{ m.content }}"
        "<|END_OF_TURN_TOKEN|>{% else %}<|START_OF_TURN_TOKEN|>"
        "{{ '<|USER_TOKEN|>' if m.role == 'user' else '<|CHATBOT_TOKEN|>' }}{{ m.content }}"
        "<|END_OF_TURN_TOKEN|>{% endif %}{% endfor %}"
        "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write 'Action:'<|END_OF_TURN_TOKEN|>"
        "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}",
        (
            "<|END_OF_TURN_TOKEN|>",
            "<|START_OF_TURN_TOKEN|>",
            "<|USER_TOKEN|>",
            "<|CHATBOT_TOKEN|>",
            "<|SYSTEM_TOKEN|>",
        ),
        ends={"<|END_OF_TURN_TOKEN|>": EVERY_REPLY},
        ok=("<|START_OF_TURN_TOKEN|>",),
        never=("<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>"),
    ),
    Shape(
        "a separator token opens every message",
        "{% for m in messages %}<|sep|>{{ m.role }}: {{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|sep|>assistant: {% endif %}",
        ("<|sep|>",),
        ends={"<|sep|>": NEXT_TURN},
    ),
    Shape(
        "no closer: a shared opener, then a role token, starts every message",
        "{% for m in messages %}<|im_start|><|{{ m.role }}|>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|><|assistant|>{% endif %}",
        ("<|endoftext|>", "<|im_start|>", "<|user|>", "<|assistant|>"),
        ends={"<|im_start|>": NEXT_TURN},
        never=("<|user|>", "<|assistant|>"),
    ),
    Shape(
        "a separator token closes every message",
        "{% for m in messages %}{{ m.role }}: {{ m.content }}<|sep|>{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}",
        ("<|sep|>",),
        ends={"<|sep|>": EVERY_REPLY},
    ),
    Shape(
        "a closer of two tokens after every reply: the first is the stop",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
        "<|endoftext|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% endif %}",
        ("<|endoftext|>", "<|im_end|>", "<|im_start|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        ok=("<|endoftext|>",),
        never=("<|im_start|>",),
    ),
    Shape(
        "zephyr-like: eos_token closes every message",
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
        ("</s>", "<|user|>", "<|assistant|>", "<|system|>"),
        ends={"</s>": EVERY_REPLY},
        never=("<|user|>", "<|assistant|>", "<|system|>"),
    ),
    Shape(
        "granite-like role tokens with a text role name",
        "{% for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>{{ m.content }}"
        "<|end_of_text|>\n{% endfor %}{% if add_generation_prompt %}"
        "<|start_of_role|>assistant<|end_of_role|>{% endif %}",
        ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"),
        ends={"<|end_of_text|>": EVERY_REPLY},
        never=("<|start_of_role|>", "<|end_of_role|>"),
    ),
    Shape(
        "reasoning closed by a special token, then the answer, in one turn",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.reasoning_content %}"
        "{{ m.reasoning_content }}<|think_end|>{% endif %}{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|im_end|>", "<|im_start|>", "<|think_end|>"),
        ends={"<|im_end|>": EVERY_REPLY},
        never=("<|im_start|>", "<|think_end|>"),
        in_turn=("<|think_end|>",),
    ),
    Shape(
        "reasoning as its own message: the only closer is also written inside the turn",
        "{% for m in messages %}{% if m.reasoning_content %}<|im_start|>assistant\n"
        "{{ m.reasoning_content }}<|im_end|>\n{% endif %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        ("<|endoftext|>", "<|im_end|>", "<|im_start|>"),
        ends={},
        never=("<|im_end|>", "<|im_start|>"),
        in_turn=("<|im_end|>", "<|im_start|>"),
        findings=("EOS010",),
    ),
]


def _decoder(shape: Shape) -> dict:
    return {
        str(shape.id(c)): {
            "content": c,
            "special": True,
            "normalized": False,
            "lstrip": False,
            "rstrip": False,
            "single_word": False,
        }
        for c in shape.tokens
    }


def _repo(tmp_path, shape: Shape, stop: list[str] | None):
    tok = {
        "eos_token": shape.eos or shape.tokens[0],
        "bos_token": next((t for t in shape.tokens if t in ("<s>", "<bos>")), None),
        "added_tokens_decoder": _decoder(shape),
        "chat_template": shape.template,
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tok))
    gen = {"eos_token_id": [shape.id(t) for t in stop]} if stop is not None else {}
    (tmp_path / "generation_config.json").write_text(json.dumps(gen))
    return check_repo(load_repo(tmp_path))


def _ids(shape: Shape, tokens) -> list[str]:
    return [t for t in tokens if t in shape.tokens]


def _param(shape: Shape):
    return pytest.param(shape, id=shape.name)


SHAPE_PARAMS = [_param(s) for s in SHAPES]


def test_there_are_at_least_thirty_shapes():
    assert len(SHAPES) >= 30
    assert len({s.name for s in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_terminators_and_where_they_are_written(shape, tmp_path):
    check = _repo(tmp_path, shape, _ids(shape, shape.ends))
    ts = check.terminators
    found = {t.content: t for t in ts.terminators}
    assert set(found) == set(shape.ends), ts.terminators
    for content, where in shape.ends.items():
        assert where in {p.where for p in found[content].placements}, found[content]
    additional = {t.content: t for t in ts.additional}
    assert set(additional) == set(shape.also)
    for content, where in shape.also.items():
        assert additional[content].placements[0].where == where
        assert not additional[content].required
    assert set(ts.in_turn) == set(shape.in_turn)
    for content in shape.never:
        assert content not in found
        assert content not in additional
        assert content not in ts.acceptable
    for content in shape.ok:
        assert content in ts.acceptable


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_findings_once_every_required_id_is_a_stop_id(shape, tmp_path):
    stop = _ids(shape, [*shape.ends, shape.eos or shape.tokens[0]])
    check = _repo(tmp_path, shape, stop)
    assert sorted(f.code for f in check.findings) == sorted(shape.findings), check.findings


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_no_report_on_a_shape_contradicts_itself(shape, tmp_path):
    """``tests.support.invariants``: with each id that can be written a stop id."""
    repo, work = tmp_path / "repo", tmp_path / "work"
    repo.mkdir()
    work.mkdir()
    _repo(repo, shape, [t for t in shape.ends if t in shape.tokens])  # plain-text ends: no id
    assert contradictions(repo, work) == []


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_required_ids_make_it_healthy_and_acceptable_ones_do_no_harm(shape, tmp_path):
    required = _ids(shape, shape.ends)
    if not required:  # no id can express the stop: nothing is written
        assert _repo(tmp_path, shape, None).proposed is None
        return
    assert _repo(tmp_path, shape, required).status is Status.OK
    extra = _ids(shape, [*shape.ok, *shape.also])
    assert _repo(tmp_path, shape, required + extra).status is Status.OK


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_leaving_out_any_required_id_is_caught_and_fixed(shape, tmp_path):
    required = _ids(shape, shape.ends)
    others = _ids(shape, [*shape.ok, *shape.also])  # what a broken repo may list instead
    for missing in required:
        stop = [t for t in required if t != missing] + others
        check = _repo(tmp_path, shape, stop or None)
        assert check.status is Status.FIXABLE, f"{missing} left out, yet healthy"
        assert shape.id(missing) in (check.proposed or ())


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_never_proposes_a_forbidden_id(shape, tmp_path):
    check = _repo(tmp_path, shape, None)
    proposed = set(check.proposed or ())
    for content in shape.never:
        assert shape.id(content) not in proposed, f"{content} proposed"


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_positions_place_every_finding(shape, tmp_path):
    """Every template's positions hold each terminator's placement, in-turn tokens and the
    assistant opener (what later rules read to tell a stop inside a turn from one after it)."""
    check = _repo(tmp_path, shape, None)
    positions = check.terminators.positions()
    for content, where in {**shape.ends, **shape.also}.items():
        assert where in positions[content]
    for content in shape.in_turn:
        assert IN_TURN in positions[content]
    for content in shape.in_call:
        assert IN_TOOL_CALL in positions[content], positions
    for content in set(shape.never) - set(shape.in_turn):  # openers, call syntax
        assert not {EVERY_REPLY, LAST_REPLY, CONVERSATION_END} & set(positions.get(content, ()))


@pytest.mark.parametrize("shape", SHAPE_PARAMS)
def test_every_placement_reads_as_words(shape, tmp_path):
    """What `check` prints about a terminator names where it is written in words."""
    ts = _repo(tmp_path, shape, None).terminators
    for t in (*ts.terminators, *ts.additional):
        text = placement_text(t)
        assert text.startswith(("written ", "opens ", "plain text")), text
        assert not any(where in text for where in WHERE), text


# --- the Phi-3-shaped sample repo, end to end ----------------------------------------------

PHI3 = "end-of-conversation-only"


def test_phi3_shape_with_every_stop_id_passes(sample_repo, run_eosfix):
    repo = sample_repo(PHI3)
    gen = repo / "generation_config.json"
    gen.write_text(
        gen.read_text().replace('"eos_token_id": 32000', '"eos_token_id": [32000, 32001, 32007]')
    )
    result = run_eosfix("check", repo)
    assert result.exit_code == 0, result.stdout
    assert "1 repo stops correctly" in result.stdout


def test_phi3_shape_with_the_closer_alone_passes(sample_repo, run_eosfix):
    """<|endoftext|> is an optional stop: a repo stopping on <|end|> alone is healthy.

    Written as a list: TGI ignores an integer there and stops on the tokenizer's eos
    (<|endoftext|>) alone, which EOS015 reports (next test)."""
    repo = sample_repo(PHI3)
    gen = repo / "generation_config.json"
    gen.write_text(gen.read_text().replace('"eos_token_id": 32000', '"eos_token_id": [32007]'))
    assert run_eosfix("check", repo).exit_code == 0


def test_phi3_shape_with_the_closer_as_an_int_is_fixed_for_tgi(sample_repo, run_eosfix):
    """transformers stops on an integer 32007; TGI does not (it takes only a list): EOS015,
    and the fix writes the list with the tokenizer's eos TGI stopped on before."""
    repo = sample_repo(PHI3)
    gen = repo / "generation_config.json"
    gen.write_text(gen.read_text().replace('"eos_token_id": 32000', '"eos_token_id": 32007'))
    result = run_eosfix("check", repo)
    assert result.exit_code == 1
    assert (
        "EOS015 TGI (reads tokenizer eos, or generation_config.json if a list) does not stop "
        "on <|end|> (32007): generation_config.json with eos_token_id [32007, 32000] makes it "
        "stop" in result.stdout
    )
    assert run_eosfix("fix", repo).exit_code == 1
    assert '"eos_token_id": [\n    32007,\n    32000\n  ],\n' in gen.read_text()
    assert run_eosfix("check", repo).exit_code == 0


def test_json_carries_where_each_token_is_written(sample_repo, run_eosfix):
    payload = json.loads(run_eosfix("check", sample_repo(PHI3), "--format", "json").stdout)
    (entry,) = payload["repos"]
    (end,) = entry["terminators"]
    assert (end["content"], end["required"]) == ("<|end|>", True)
    assert end["where"] == [{"where": EVERY_REPLY, "related": []}]
    (eot,) = entry["additional_stops"]
    assert (eot["content"], eot["id"], eot["kind"], eot["required"]) == (
        "<|endoftext|>",
        32000,
        "conversation_end",
        False,
    )
    assert eot["where"] == [{"where": CONVERSATION_END, "related": ["<|end|>"]}]
    assert "<|endoftext|>" in entry["acceptable"]
    assert entry["proposed_eos_token_id"] == [32000, 32007]
    (template,) = entry["templates"]
    assert template["positions"]["<|end|>"] == [EVERY_REPLY]
    assert template["positions"]["<|assistant|>"] == ["turn_opener"]


def test_explain_says_where_and_why(sample_repo, run_eosfix):
    out = run_eosfix("explain", sample_repo(PHI3)).stdout
    assert "<|end|> ends a turn (turn end): written after every reply; seen in probe" in out
    assert (
        "<|endoftext|> is an optional stop: written once, when the whole conversation ends, "
        "after <|end|>; seen in probe default/final"
    ) in out
