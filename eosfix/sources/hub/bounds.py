"""How much of the Hub eosfix reads, how long it waits, how far it follows: the one table.

The Hub and every repo on it are untrusted: a repo's owner picks its files' sizes, and a Hub
(or a proxy, or a CDN) its answers' headers. Every read from the network is bounded before it
is read, by the numbers below; ``eosfix.sources.hub.client`` applies them to each request,
``eosfix.sources.hub.http`` to each wait, ``eosfix.sources.hub.read`` to a listing's pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from eosfix.core.repo import TOKENIZER_JSON

MiB = 1024 * 1024


@dataclass(frozen=True)
class Cap:
    """The most bytes one answer of a kind may hold: refused on its ``Content-Length`` before a
    byte of it is read, and while it streams (no length given, or compressed) the moment it
    goes over; nothing over it is kept. ``what``: the kind, as an error line names it."""

    bytes: int
    what: str
    why: str

    def __str__(self) -> str:
        size = f"{self.bytes // MiB} MiB" if self.bytes >= MiB else f"{self.bytes // 1024} KiB"
        return f"{size} for {self.what}"


# A page of a listing (up to 1,000 repos with their file names and tags), a repo's info, a
# paths-info answer: JSON read whole, then parsed.
JSON = Cap(
    16 * MiB,
    "a Hub API answer",
    "a page of 1,000 repos with their file names and tags is 1-3 MB, and a repo's info lists "
    "its file names (~50 bytes each): 16 MiB is some 300,000 names",
)
# config.json, generation_config.json, tokenizer_config.json, special_tokens_map.json,
# chat_template.jinja/.json, additional templates, an ollama params file.
FILE = Cap(
    16 * MiB,
    "a config file",
    "real ones are kB to a few MB (a large added_tokens_decoder); the folder reader refuses a "
    "bigger one anyway (eosfix.containers.folder.files.MAX_FILE_BYTES)",
)
TOKENIZER = Cap(
    64 * MiB,
    "tokenizer.json",
    "10-35 MB for real vocabularies (Gemma's 262k tokens: 33 MB); streamed to disk, never held "
    "in memory",
)
ERROR_BODY = Cap(
    64 * 1024,
    "an error answer",
    "only its message is shown (huggingface_hub reads X-Error-Message and the JSON's error)",
)

# A request's head (connect, send, status line and headers) must come within ``--timeout``
# seconds; its whole answer by then plus the time its body needs at SLOWEST_RATE: the size
# it declares, else its cap. A body dripped a byte at a time ends there, whatever the
# per-read timeout would allow.
SLOWEST_RATE = 256 * 1024  # bytes a second (2 Mbit/s): a slow link still gets a 35 MB file
DEFAULT_DEADLINE = 300.0  # seconds for the head, for a client made without a timeout
# A request counts against how many may be in flight (its slot of the gate) for at most this
# long: one still waiting on the network then gives its slot to the next request and goes on
# to its deadline, so requests that hang (a silent or dripping server) never stall the others
# for longer. The Hub answers in well under a second; the threads of a batch still bound how
# many requests are out at once.
SLOT_LEASE = 2.0

# Waits the Hub asks for (``Retry-After``, the ``RateLimit`` reset): its windows are 5 minutes
# (hub-docs docs/hub/rate-limits.md), so no honest answer asks for more. A 429 or 503 asking
# for more is refused at once (its error says what it asked); a reset over it, on an answer
# that is not refused, counts as this long (and the summary says how many were).
LONGEST_WAIT = 300.0

MAX_REDIRECTS = 5  # a resolve redirects once (to the CDN); the rest is a loop
# A listing's pages: 1,000 repos each, so 10,000 pages is five times every model on the Hub.
MAX_PAGES = 10_000


def file_cap(path: str) -> Cap:
    """The cap of one repo file's download."""
    return TOKENIZER if path == TOKENIZER_JSON else FILE
