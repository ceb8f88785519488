"""JSON numbers too long for Python's int: more than ``sys.int_info.default_max_str_digits``
(4,300) digits, which ``int()`` and ``json.loads`` refuse."""

from __future__ import annotations

import sys

DIGITS = 5000
assert sys.int_info.default_max_str_digits < DIGITS


def long_member(data: bytes | str) -> bytes:
    """The JSON object ``data`` with a first member whose value is a 5,000-digit integer."""
    text = data.decode() if isinstance(data, bytes) else data
    at = text.index("{") + 1
    return (text[:at] + '"long": ' + "9" * DIGITS + ", " + text[at:]).encode()


def long_added_token_id(data: bytes | str) -> bytes:
    """tokenizer.json with its first added token's id 5,000 digits long (the part eosfix
    decodes without parsing the vocabulary)."""
    text = data.decode() if isinstance(data, bytes) else data
    at = text.index('"id"', text.index('"added_tokens"'))
    end = text.index(",", at)
    return (text[:at] + '"id": ' + "9" * DIGITS + text[end:]).encode()
