"""Minimal editing of one value in a JSON document, leaving every other byte alone.

One module, over 400 lines: one scanner finds every value's span and the document's style,
and every edit is planned, rendered and verified against that same scan.

Vocabulary:

- *span*: half-open character offsets ``[start, end)`` into the document text.
- *member*: one ``"key": value`` pair of an object; a *gap* is the text between two
  neighbouring members (or array items), e.g. ``",\\n  "`` or ``", "``.
- *key path*: the object keys leading to a value, e.g. ``("text_config", "eos_token_id")``.

A small hand-rolled scanner records the spans; edits are single splices into the original
text, re-checked with :func:`json.loads` before they are returned.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from eosfix.core.errors import VerificationError

_WS_RUN = re.compile(r"[ \t\n\r]*")  # JSON's four whitespace characters, nothing else
_PLAIN_RUN = re.compile(r'[^"\\\x00-\x1f]+')  # string characters needing no attention
_BOM = "\ufeff"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")  # json.loads takes all


@dataclass
class _Node:
    """A scanned JSON value: its span, plus members (objects) or items (arrays)."""

    start: int
    end: int = -1
    members: list[_Member] | None = None
    items: list[_Node] | None = None


@dataclass
class _Member:
    key: str
    key_start: int
    key_end: int
    value: _Node = field(default_factory=lambda: _Node(-1))


class _Style(NamedTuple):
    """How the document is laid out, so inserted text looks like its neighbours."""

    newline: str  # "\n" or "\r\n"; "" when the document has no line break
    indent_unit: str
    item_sep: str  # inline separator between items, "," or ", "
    key_sep: str  # ": " or ":"


class _Scanner:
    """Recursive-descent JSON scanner that records spans instead of building values."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"invalid JSON: {what} at offset {self.pos}")

    def skip_ws(self) -> None:
        run = _WS_RUN.match(self.text, self.pos)
        if run is not None:
            self.pos = run.end()

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def value(self) -> _Node:
        self.skip_ws()
        char = self.peek()
        if char == "{":
            return self.obj()
        if char == "[":
            return self.array()
        node = _Node(self.pos)
        if char == '"':
            self.string()
        elif not self.literal():
            self.number()
        node.end = self.pos
        return node

    def obj(self) -> _Node:
        members: list[_Member] = []
        node = _Node(self.pos, members=members)
        self.pos += 1
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            self.skip_ws()
            if self.peek() != '"':
                raise self.fail("expected a string key")
            key_start = self.pos
            key = self.string()
            member = _Member(key, key_start, self.pos)
            self.skip_ws()
            if self.peek() != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            member.value = self.value()
            members.append(member)
            if self.close_or_comma("}"):
                node.end = self.pos
                return node

    def array(self) -> _Node:
        items: list[_Node] = []
        node = _Node(self.pos, items=items)
        self.pos += 1
        self.skip_ws()
        if self.peek() == "]":
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            items.append(self.value())
            if self.close_or_comma("]"):
                node.end = self.pos
                return node

    def close_or_comma(self, closer: str) -> bool:
        """Consume ``,`` (False) or the closing bracket (True)."""
        self.skip_ws()
        char = self.peek()
        if char not in (",", closer):
            raise self.fail(f"expected ',' or {closer!r}")
        self.pos += 1
        return char == closer

    def string(self) -> str:
        """Consume a string literal and return its decoded value, as json.loads would."""
        self.pos += 1
        out: list[str] = []
        while True:
            # Copy a run of plain characters in one step (as json.decoder's STRINGCHUNK does).
            run = _PLAIN_RUN.match(self.text, self.pos)
            if run is not None:
                out.append(run.group())
                self.pos = run.end()
            char = self.peek()
            if char == "":
                raise self.fail("unterminated string")
            self.pos += 1
            if char == '"':
                return "".join(out)
            if char == "\\":
                out.append(self.escape())
            elif char < " ":
                raise self.fail("control character in string")
            else:
                out.append(char)

    def escape(self) -> str:
        char = self.peek()
        self.pos += 1
        if char in _ESCAPES:
            return _ESCAPES[char]
        if char != "u":
            raise self.fail("invalid escape")
        code = self.hex4()
        # A high surrogate followed by an escaped low one is one character (json does this).
        if 0xD800 <= code < 0xDC00 and self.text.startswith("\\u", self.pos):
            saved = self.pos
            self.pos += 2
            low = self.hex4()
            if 0xDC00 <= low < 0xE000:
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            self.pos = saved
        return chr(code)

    def hex4(self) -> int:
        digits = self.text[self.pos : self.pos + 4]
        if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise self.fail("invalid \\u escape")
        self.pos += 4
        return int(digits, 16)

    def literal(self) -> bool:
        for word in _LITERALS:
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return True
        return False

    def number(self) -> None:
        start = self.pos
        if self.peek() == "-":
            self.pos += 1
        if self.peek() == "0":
            self.pos += 1
        elif not self.digits():
            self.pos = start
            raise self.fail("expected a value")
        if self.peek() == "." and not self.digits(skip=1):
            raise self.fail("expected digits after '.'")
        if self.peek() in ("e", "E"):
            self.pos += 1
            if self.peek() in ("+", "-"):
                self.pos += 1
            if not self.digits():
                raise self.fail("expected exponent digits")

    def digits(self, skip: int = 0) -> bool:
        self.pos += skip
        start = self.pos
        while self.peek().isdigit() and self.peek().isascii():
            self.pos += 1
        return self.pos > start


@functools.lru_cache(maxsize=16)
def _scan_document(text: str) -> _Node:
    """Scan ``text`` (optionally BOM-prefixed) whose top level must be one object.

    Memoized: one check reads and edits the same few documents ~7 times (duplicate keys,
    spans, the planned edits); the tree is never changed once scanned."""
    scanner = _Scanner(text)
    if text.startswith(_BOM):
        scanner.pos = 1
    root = scanner.value()
    scanner.skip_ws()
    if scanner.pos != len(text):
        raise scanner.fail("extra data after the top-level value")
    if root.members is None:
        raise ValueError("invalid JSON document: the top level is not an object")
    return root


def _last_member(obj: _Node, key: str) -> _Member | None:
    """The member json.loads keeps for ``key``: the last one when the key is duplicated."""
    assert obj.members is not None
    found = [member for member in obj.members if member.key == key]
    return found[-1] if found else None


def _walk(root: _Node, keys: tuple[str, ...]) -> _Node | None:
    """The object node at ``keys`` (``()`` is the root); None when a key is absent."""
    node = root
    for depth, key in enumerate(keys):
        member = _last_member(node, key)
        if member is None:
            return None
        node = member.value
        if node.members is None:
            where = ".".join(keys[: depth + 1])
            raise ValueError(f"{where} is not a JSON object; cannot descend into it")
    return node


def find_value_span(text: str, key_path: tuple[str, ...]) -> tuple[int, int] | None:
    """Offsets [start, end) of the JSON value at key_path; None when a key is absent."""
    if not key_path:
        raise ValueError("key_path must name at least one key")
    parent = _walk(_scan_document(text), key_path[:-1])
    member = None if parent is None else _last_member(parent, key_path[-1])
    return None if member is None else (member.value.start, member.value.end)


def duplicate_spans(text: str, key_path: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """Value spans of every member ``key_path`` names, when its last key is repeated in one
    object (``json.loads`` keeps the last one, and so does every edit here); () otherwise."""
    if not key_path:
        raise ValueError("key_path must name at least one key")
    if not _may_repeat(text, key_path[-1]):
        return ()
    try:
        parent = _walk(_scan_document(text), key_path[:-1])
    except ValueError:
        return ()  # the path crosses a non-object: nothing there to be duplicated
    if parent is None or parent.members is None:
        return ()
    found = [(m.value.start, m.value.end) for m in parent.members if m.key == key_path[-1]]
    return tuple(found) if len(found) > 1 else ()


class _Repeated(Exception):
    pass


def _may_repeat(text: str, key: str) -> bool:
    """Whether some object of ``text`` may hold ``key`` more than once: False only when
    json's own (C) parser read it all and no object did; a document it refuses goes to the
    scanner, which says why. A file rarely repeats a key: this spares scanning it."""

    def pairs(members: list[tuple[str, object]]) -> dict[str, object]:
        if sum(1 for k, _ in members if k == key) > 1:
            raise _Repeated
        return dict(members)

    try:
        json.loads(text.removeprefix(_BOM), object_pairs_hook=pairs)
    except (_Repeated, ValueError, RecursionError):
        return True
    return False


def format_value_like(
    value: object,
    old_value_text: str | None,
    *,
    indent_unit: str,
    base_indent: str,
    newline: str,
    item_sep: str = ", ",
) -> str:
    """Render ``value`` as JSON in the layout of the value it replaces.

    A list keeps the old list's style (one item per line, or inline with the same
    separator). Replacing a scalar, ``[]`` or nothing, a list goes one item per line at
    ``base_indent + indent_unit`` unless ``newline`` is ``""`` (a one-line document or
    object), in which case it is inline with ``item_sep``.
    """
    if not isinstance(value, list) or not value:
        return json.dumps(value, ensure_ascii=False)
    items = [json.dumps(item, ensure_ascii=False) for item in value]
    old = _Scanner(old_value_text).value() if old_value_text else None
    if old is not None and old.items and old_value_text is not None:
        if "\n" not in old_value_text:
            return "[" + _inline_gap(old_value_text, old.items, item_sep).join(items) + "]"
        lead = old_value_text[1 : old.items[0].start]
        item_indent = lead.rsplit("\n", 1)[1] if "\n" in lead else base_indent + indent_unit
        newline = newline or _detect_newline(old_value_text)
        return _multiline(items, item_indent, base_indent, newline)
    if not newline:
        return "[" + item_sep.join(items) + "]"
    return _multiline(items, base_indent + indent_unit, base_indent, newline)


def _inline_gap(text: str, items: list[_Node], default: str) -> str:
    return text[items[0].end : items[1].start] if len(items) > 1 else default


def _multiline(items: list[str], item_indent: str, base_indent: str, newline: str) -> str:
    body = ("," + newline + item_indent).join(items)
    return "[" + newline + item_indent + body + newline + base_indent + "]"


def _detect_newline(text: str) -> str:
    index = text.find("\n")
    if index < 0:
        return ""
    return "\r\n" if index > 0 and text[index - 1] == "\r" else "\n"


def _line_indent(text: str, pos: int) -> str:
    """Leading spaces/tabs of the line that holds offset ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    end = start
    while end < pos and text[end] in " \t":
        end += 1
    return text[start:end]


def _iter_nodes(node: _Node) -> list[_Node]:
    """All container nodes in document order."""
    children = [m.value for m in node.members or ()] + list(node.items or ())
    found = [node]
    for child in children:
        if child.members is not None or child.items is not None:
            found.extend(_iter_nodes(child))
    return found


def _gaps(node: _Node) -> list[tuple[int, int]]:
    """Spans between neighbouring members/items of one container."""
    if node.members is not None:
        return [(a.value.end, b.key_start) for a, b in itertools.pairwise(node.members)]
    items = node.items or []
    return [(a.end, b.start) for a, b in itertools.pairwise(items)]


def _detect_style(text: str, root: _Node, parent: _Node) -> _Style:
    """Newline, indent unit and separators, preferring ``parent``'s own layout."""
    containers = [parent, *_iter_nodes(root)]
    inline_gaps = [text[a:b] for node in containers for a, b in _gaps(node)]
    inline_gaps = [gap for gap in inline_gaps if "\n" not in gap]
    members = [m for node in containers for m in node.members or ()]
    key_sep = text[members[0].key_end : members[0].value.start] if members else ": "
    indent_unit = "  "
    if root.members:
        lead = text[root.start + 1 : root.members[0].key_start]
        indent_unit = lead.rsplit("\n", 1)[1] if "\n" in lead else indent_unit
    return _Style(_detect_newline(text), indent_unit, (inline_gaps or [", "])[0], key_sep)


def _is_multiline(text: str, root: _Node, parent: _Node) -> bool:
    """Lay out new text over several lines? Follow the parent (the document if it is empty)."""
    node = parent if parent.members else root
    return "\n" in text[node.start : node.end]


def _render(value: object, old: str | None, style: _Style, base: str, multi: bool) -> str:
    return format_value_like(
        value,
        old,
        indent_unit=style.indent_unit,
        base_indent=base,
        newline=style.newline if multi else "",
        item_sep=style.item_sep,
    )


def _replace_member(text: str, member: _Member, value: object, style: _Style, multi: bool) -> str:
    start, end = member.value.start, member.value.end
    base = _line_indent(text, member.key_start)
    return text[:start] + _render(value, text[start:end], style, base, multi) + text[end:]


def _insert_member(
    text: str, parent: _Node, key: str, value: object, style: _Style, multi: bool
) -> str:
    members = parent.members or []
    if not members:
        return _insert_into_empty(text, parent, key, value, style, multi)
    if len(members) > 1:
        gap = text[members[0].value.end : members[1].key_start]
    else:
        lead = text[parent.start + 1 : members[0].key_start]
        gap = "," + lead if "\n" in lead else style.item_sep
    after = [m for m in members if m.key > key]
    anchor = after[0] if after else members[-1]
    # Only the whitespace of the gap's last line: comma-first files put the "," there too.
    last = gap.rsplit("\n", 1)[-1]
    base = (
        last[: len(last) - len(last.lstrip(" \t"))]
        if "\n" in gap
        else _line_indent(text, anchor.key_start)
    )
    new = json.dumps(key, ensure_ascii=False) + style.key_sep
    new += _render(value, None, style, base, multi)
    if after:
        return text[: anchor.key_start] + new + gap + text[anchor.key_start :]
    return text[: anchor.value.end] + gap + new + text[anchor.value.end :]


def _insert_into_empty(
    text: str, parent: _Node, key: str, value: object, style: _Style, multi: bool
) -> str:
    outer = _line_indent(text, parent.start)
    inner = outer + style.indent_unit if multi else ""
    new = json.dumps(key, ensure_ascii=False) + style.key_sep
    new += _render(value, None, style, inner, multi)
    if multi:
        new = style.newline + inner + new + style.newline + outer
    return text[: parent.start + 1] + new + text[parent.end - 1 :]


def _loads(text: str) -> object:
    return json.loads(text[1:] if text.startswith(_BOM) else text)


def _same(a: object, b: object) -> bool:
    """Deep equality that tells 1, 1.0 and true apart and treats NaN as equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _verify(old_text: str, new_text: str, key_path: tuple[str, ...], value: object) -> None:
    """Raise VerificationError unless only the value at key_path changed, to ``value``."""
    expected = _loads(old_text)  # a new object: changed below, shared with no one
    target = expected
    for key in key_path[:-1]:
        target = target[key]  # type: ignore[index]
    target[key_path[-1]] = value  # type: ignore[index]
    try:
        actual = _loads(new_text)
    except ValueError as exc:
        raise VerificationError(f"edit produced invalid JSON: {exc}") from exc
    if not _same(actual, expected):
        path = ".".join(key_path)
        raise VerificationError(f"edit of {path} changed more than {path}")


def set_json_value(text: str, key_path: tuple[str, ...], value: object) -> str:
    """Return text with the value at key_path replaced (or inserted), touching nothing else."""
    if not key_path:
        raise ValueError("key_path must name at least one key")
    value = json.loads(json.dumps(value))  # tuples become lists, as they read back
    root = _scan_document(text)
    _loads(text)  # anything the scanner lets through, json.loads still rejects
    parent = _walk(root, key_path[:-1])
    if parent is None:
        raise ValueError(f"no object at {'.'.join(key_path[:-1])} to hold {key_path[-1]}")
    member = _last_member(parent, key_path[-1])
    if member is not None and _same(_loads(text[member.value.start : member.value.end]), value):
        return text
    style = _detect_style(text, root, parent)
    multi = _is_multiline(text, root, parent)
    if member is not None:
        new_text = _replace_member(text, member, value, style, multi)
    else:
        new_text = _insert_member(text, parent, key_path[-1], value, style, multi)
    _verify(text, new_text, key_path, value)
    return new_text
