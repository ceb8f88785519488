"""Chat templates that would hang a render, eat gigabytes or escape the sandbox without
eosfix's guards, and a repo folder around one."""

from __future__ import annotations

import json
from pathlib import Path

# (id, template, finding code). Each would hang, eat gigabytes or escape without the guards.
HOSTILE = [
    (
        "nested-range",
        ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
        "EOS101",
    ),
    (
        "nested-range-silent",
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
        "EOS101",
    ),
    ("string-times-huge", "{{ 'a' * 10**10 }}", "EOS101"),
    ("list-times-huge", "{{ ([1] * 10**9)|length }}", "EOS101"),
    (
        "doubling-tilde",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"
        ),
        "EOS101",
    ),
    (
        "doubling-plus",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set ns.s = ns.s + ns.s %}{% endfor %}"
        ),
        "EOS101",
    ),
    (
        "doubling-set-block",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}{% endfor %}"
        ),
        "EOS101",
    ),
    ("huge-output", "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "EOS101"),
    (
        "huge-macro-output",
        (
            "{% macro m() %}{% for i in range(100000) %}{{ 'y' * 99999 }}"
            "{% endfor %}{% endmacro %}{% set s = m() %}"
        ),
        "EOS101",
    ),
    ("deep-recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "EOS101"),
    (
        "exponential-macro",
        (
            "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
            "{% endmacro %}{{ f(64) }}"
        ),
        "EOS101",
    ),
    (
        "recursive-loop",
        ("{% for x in range(1000) recursive %}{{ loop(range(1000)) }}{% endfor %}"),
        "EOS101",
    ),
    ("center-width", "{{ 'a'.center(10**9) }}", "EOS101"),
    ("format-width", "{{ '{:>999999999}'.format(1) }}", "EOS101"),
    ("percent-width", "{{ '%999999999d' % 1 }}", "EOS101"),
    ("format-repeat", "{{ ('{0}' * 200000).format('z' * 200000) }}", "EOS101"),
    ("join-amplify", "{{ ([1] * 100000)|join('s' * 100000) }}", "EOS101"),
    ("str-join-amplify", "{{ ('s' * 100000).join('x' * 100000) }}", "EOS101"),
    ("replace-amplify", "{{ ('a' * 100000).replace('a', 'b' * 100000) }}", "EOS101"),
    ("indent-amplify", "{{ ('\\n' * 100000)|indent('x' * 100000) }}", "EOS101"),
    ("int-power", "{{ (2 ** 100000000)|string|length }}", "EOS101"),
    ("lipsum", "{{ lipsum(1000000) }}", "EOS101"),
    (
        "slow-filter-loop",
        ("{% for i in range(100000) %}{{ ('a' * 90000)|list|sort|length }}{% endfor %}"),
        "EOS101",
    ),
    ("tojson-amplify", "{{ [['x' * 1000] * 1000] * 1000 }}", "EOS101"),
    ("class-mro-subclasses", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "EOS102"),
    ("globals", "{{ raise_exception.__globals__['os'] }}", "EOS102"),
    ("getitem-class", "{{ ''['__class__'] }}", "EOS102"),
    ("cycler-init-globals", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "EOS102"),
    ("format-escape", "{{ '{0.__class__.__mro__}'.format('') }}", "EOS102"),
]


def hostile_files(template: str, terminator: str = "<|im_end|>") -> dict[str, bytes]:
    """A repo whose chat template is ``template`` and whose turn end ``terminator`` (id 2) is
    not its stop id (1): the files, by their path in the repo."""
    tok = {
        "eos_token": terminator,
        "added_tokens_decoder": {"2": {"content": terminator, "special": True}},
    }
    return {
        "chat_template.jinja": template.encode(),
        "tokenizer_config.json": (json.dumps(tok, indent=2) + "\n").encode(),
        "generation_config.json": b'{\n  "eos_token_id": 1\n}\n',
    }


def hostile_repo(tmp_path: Path, name: str, template: str) -> Path:
    """``hostile_files(template)`` written to the folder ``tmp_path/name``."""
    root = tmp_path / name
    root.mkdir()
    for path, data in hostile_files(template).items():
        (root / path).write_bytes(data)
    return root
