'''How a ``PARAMETER stop`` value is written so ollama's Modelfile parser reads it back exactly.

Read at ollama/ollama@fb3076099, ``parser/parser.go``: a value runs to the end of its line;
``unquote`` (line 656) strips one pair of ``"""`` or ``"`` around it and processes no escape,
so ``\\`` and ``"`` inside are kept as they are (JSON's ``"a\\"b"`` would read back as
``a\\"b``). A quoted value may span lines: it ends at the first line break where the text so
far, trimmed, is a complete quoted value (lines 526-533). A rune that is not printable
(``strconv.IsPrint``) other than space, tab and line breaks is dropped (line 549), so a text
holding one cannot be written at all. ``api.FormatParams`` then keeps the value as the stop
string, unchanged (``api/types.go:1320``).
'''

from __future__ import annotations

_SPACE = " \t"
_NEWLINE = "\r\n"


def _unquote(text: str) -> tuple[str, bool]:
    """parser.go ``unquote``: a triple-quoted or quoted value, or the text as it is."""
    if text[:3] == '"""':
        return (text[3:-3], True) if len(text) >= 6 and text.endswith('"""') else ("", False)
    if text[:1] == '"':
        return (text[1:-1], True) if len(text) >= 2 and text.endswith('"') else ("", False)
    return text, True


def read_value(text: str) -> str | None:
    """What ollama's parser reads as the value ``text`` written after ``PARAMETER stop`` (and
    a line break); None when the value would end before ``text`` does, or never."""
    buf = ""
    source = text + "\n"
    for i, r in enumerate(source):
        if r in _SPACE or r in _NEWLINE:
            value, ok = _unquote(buf.strip(_SPACE + _NEWLINE))
            if not ok or r in _SPACE:
                buf += r
                continue
            return value if i == len(source) - 1 else None  # the value ended early
        if r.isprintable():
            buf += r
    return None


def quote_stop(text: str) -> str | None:
    """``text`` quoted so ollama reads back exactly ``text``; None when no quoting can (a
    non-printable character, or a text that starts with ``""`` and holds a line break)."""
    for quoted in (f'"{text}"', f'"""{text}"""'):
        if read_value(quoted) == text:
            return quoted
    return None


def stop_line(text: str) -> str:
    """The Modelfile line that adds ``text`` as a stop string, or a comment saying it cannot."""
    quoted = quote_stop(text)
    if quoted is not None:
        return f"PARAMETER stop {quoted}"
    return f"# no Modelfile can hold the stop string {text!r} (ollama's parser would change it)"
