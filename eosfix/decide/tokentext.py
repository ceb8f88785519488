"""A token's text, as a person reads it: what it writes, and where a reply that writes it is
cut when it is a stop id (derived from the text: a word, a number, a line break, or what a
punctuation mark starts in markdown, code and prose). Pure.
"""

from __future__ import annotations


def shown(text: str) -> str:
    """A token's text as a person reads it in a message: quoted, escapes visible."""
    return repr(text)


# What a character starts or marks in the text a chat model writes (markdown, code, prose).
_ROLES = {
    "#": "starts markdown headers and code comments",
    "*": "marks markdown emphasis and bullet lists",
    "-": "starts markdown bullet lists and joins hyphenated words",
    "`": "opens inline code and code blocks",
    ">": "starts markdown quotes and closes HTML tags",
    "<": "opens HTML and XML tags",
    "|": "draws markdown tables",
    ".": "ends sentences",
    ",": "separates clauses and list items",
    ":": "introduces lists, code and JSON values",
    ";": "ends statements in many programming languages",
    "!": "ends exclamations",
    "?": "ends questions",
    "(": "opens parentheses",
    ")": "closes parentheses",
    "[": "opens markdown links and arrays",
    "]": "closes markdown links and arrays",
    "{": "opens JSON objects and code blocks",
    "}": "closes JSON objects and code blocks",
    '"': "quotes JSON strings and speech",
    "'": "writes apostrophes and quotes strings",
    "=": "assigns values in code",
    "/": "separates paths and URLs",
    "_": "marks markdown emphasis and joins names in code",
}


def cut_clause(text: str) -> str:
    """Where a reply that may contain ``text`` (an ordinary token) is cut, as a clause."""
    if not text:
        return "an empty piece"
    stripped = text.strip()
    if not stripped:
        what = "a line break" if "\n" in text else "whitespace"
        return f"a reply is cut wherever the model writes it ({what})"
    return f"a reply is cut wherever the model writes it ({_piece_kind(stripped)})"


def _piece_kind(stripped: str) -> str:
    if stripped.isalpha():
        return f"the word or word piece {shown(stripped)}"
    if stripped.isdigit():
        return f"the number piece {shown(stripped)}"
    first = stripped[0]
    whole = len(stripped) == 1 or set(stripped) == {first}  # '#', '###'
    role = _ROLES.get(first)
    if role is not None:
        return (
            f"{shown(first)} {role}"
            if whole
            else (f"{shown(stripped)} starts with {shown(first)}, which {role}")
        )
    import unicodedata  # only a piece that starts with a symbol needs its name

    try:
        name = unicodedata.name(first).lower()
    except ValueError:
        name = f"U+{ord(first):04X}"
    head = shown(first) if whole else f"{shown(stripped)} starts with {shown(first)}"
    return f"{head} ({name})"


# --- decoding a raw piece (a GGUF has no decoder) ----------------------------------------


def _byte_level_map() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, reversed: the printable character -> its byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


_BYTE_LEVEL = _byte_level_map()


def decode_piece(piece: str, model: str = "") -> str:
    """What a token's raw piece writes: SentencePiece ``▁`` is a space, ``<0x0A>`` a byte,
    byte-level BPE (``gpt2``) maps printable characters back to bytes."""
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        try:
            return bytes([int(piece[3:5], 16)]).decode("utf-8", "replace")
        except ValueError:
            return piece
    if model == "gpt2" and all(c in _BYTE_LEVEL for c in piece):
        return bytes(_BYTE_LEVEL[c] for c in piece).decode("utf-8", "replace")
    return piece.replace("\u2581", " ")
