"""Markdown from untrusted text. Token texts, template output, file names and error messages
come from strangers' repos, and eosfix posts PR bodies and discussions on those repos and
prints tables people paste: whatever a repo holds shows as text, never as a link, an
@-mention, raw HTML, a heading or emphasis.

- ``code``: an inline code span whose backtick fence is longer than any backtick run of the
  text; a line break shows as ``\\n`` (a blank line would end the paragraph, and the span);
- ``fenced``: a fenced block whose fence is longer than any backtick run of the text, so a
  template line of three backticks is content, never the block's end;
- ``escape``: plain text with every character that starts Markdown inline backslash-escaped
  (and the starts of blocks, at its start), ``<`` as ``&lt;``, line breaks made spaces, and
  @-mentions and bare URLs (which the Hub and GitHub make live outside code) broken by the
  same escapes;
- ``in_table``: in a table cell pipes are escaped too, inside code spans as well (GFM splits
  cells on them first), and line breaks are ``<br>``.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")
# Inline starts: code, emphasis, strikethrough, links and images, entities, table cells and
# the backslash itself (``<``, which starts HTML and autolinks, becomes ``&lt;``); a ``_``
# between two letters or digits (``eos_token_id``) can neither open nor close emphasis.
_INLINE = re.compile(r"([\\`*~\[&|]|(?<![^\W_])_|_(?![^\W_]))")
# What the Hub and GitHub link in plain text: @user, scheme://..., www.
_LINKED = re.compile(r"@(?=\w)|:(?=//)|(?<=www)\.", re.IGNORECASE)
# Block starts at the beginning of a line: heading, quote, list, setext underline, ordered
# list (its ``.`` or ``)``); a fence starts with a backtick or tilde, escaped already.
_BLOCK = re.compile(r"^(\s*\d*)([#>+=.)-])")
_BREAK = re.compile(r"\r\n|\r|\n")


def _longest_run(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def code(text: str, *, in_table: bool = False) -> str:
    """``text`` as one inline code span, shown whole."""
    shown = text.replace("\r", "\\r").replace("\n", "\\n")
    fence = "`" * (_longest_run(shown) + 1)
    edges = shown[:1] + shown[-1:]
    spaced = shown.startswith(" ") and shown.endswith(" ") and shown.strip() != ""
    pad = " " if "`" in edges or spaced else ""  # CommonMark strips one space each side
    span = f"{fence}{pad}{shown}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def fenced(text: str, info: str = "") -> list[str]:
    """The lines of a fenced code block holding ``text`` (``info``: its language)."""
    fence = "`" * max(3, _longest_run(text) + 1)
    return [fence + info, *_BREAK.split(text.rstrip("\r\n")), fence]


def escape(text: str, *, in_table: bool = False) -> str:
    """``text`` as plain Markdown text (see the module)."""
    out = _INLINE.sub(r"\\\1", text).replace("<", "&lt;")
    out = _LINKED.sub(lambda m: "\\" + m.group(0), out)
    out = _BREAK.sub("<br>" if in_table else " ", out)
    return _BLOCK.sub(r"\1\\\2", out, count=1)
