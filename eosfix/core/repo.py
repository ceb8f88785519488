"""The repo model every source produces: files, templates, special tokens, token ids.

A ``ModelRepo`` is what the analysis sees, whatever container it came from (a folder, a cache
snapshot, a Hub snapshot, a GGUF file): ``eosfix.sources`` build it, nothing here reads files
except the lazy tokenizer.json load for an id the smaller files cannot resolve.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from eosfix.core.errors import RepoLoadError, reading
from eosfix.core.models import GenerationConfig, ModelConfig, TokenizerConfig
from eosfix.core.saferead import MAX_TOKENIZER_JSON_BYTES, read_regular

GENERATION_CONFIG = "generation_config.json"
CONFIG = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
TOKENIZER_JSON = "tokenizer.json"
ADDED_TOKENS_JSON = "added_tokens.json"
CHAT_TEMPLATE_JINJA = "chat_template.jinja"
CHAT_TEMPLATE_JSON = "chat_template.json"
PROCESSOR_CONFIG = "processor_config.json"
TEMPLATE_DIR = "additional_chat_templates"
# The one table of the files eosfix reads; every other list derives from it (the Hub and
# cache sources, what makes a folder a model folder, and with tokenizer.json the pre-commit
# hook's ``files:``, which a test checks against READ_FILES). The files that decide what
# eosfix reports, read first, plus the templates in TEMPLATE_DIR/*.jinja; tokenizer.json
# (10-35 MB) only its head, and whole only when an id is only there.
RELEVANT_FILES = (
    GENERATION_CONFIG,
    CONFIG,
    TOKENIZER_CONFIG,
    SPECIAL_TOKENS_MAP,
    ADDED_TOKENS_JSON,
    CHAT_TEMPLATE_JINJA,
    CHAT_TEMPLATE_JSON,
    PROCESSOR_CONFIG,
)
READ_FILES = frozenset((*RELEVANT_FILES, TOKENIZER_JSON))  # every file a check may read
# A tokenizer's or a chat template's files make a folder a model folder eosfix can check: the
# stop configuration (generation_config.json, config.json) alone says nothing about turns.
MODEL_FOLDER_FILES = tuple(
    name for name in (*RELEVANT_FILES, TOKENIZER_JSON) if name not in (GENERATION_CONFIG, CONFIG)
)


def is_relevant_file(rel: str) -> bool:
    """True for a repo-relative path eosfix reads first (never weights, never tokenizer.json)."""
    if rel in RELEVANT_FILES:
        return True
    folder, _, name = rel.partition("/")
    return folder == TEMPLATE_DIR and name.endswith(".jinja") and "/" not in name


def is_read_file(rel: str) -> bool:
    """True for a repo-relative path a check may read: a relevant file or tokenizer.json."""
    return rel == TOKENIZER_JSON or is_relevant_file(rel)


class JsonFile(NamedTuple):
    """A JSON file as read: its text (BOM kept) and parsed object, for byte-level editing."""

    name: str
    path: Path
    text: str
    data: dict[str, Any]


class UnreadableFile(NamedTuple):
    """A JSON file no JSON reader parses (empty, NUL bytes, cut short) that runtimes read past
    or refuse, file by file (``eosfix.runtimes``' refusals): its text as read, and why."""

    name: str
    text: str
    why: str  # "is empty", "holds only NUL bytes (163)", "is not valid JSON (...)"


class ChatTemplate(NamedTuple):
    name: str  # "default", "tool_use", ...
    source: str
    file: str  # repo-relative file it came from


class TokenInfo(NamedTuple):
    content: str
    id: int | None
    special: bool
    normalized: bool
    source: str  # file the id came from


class Vocabulary(Protocol):
    """The full token table behind a repo, for an id the smaller sources cannot resolve.

    A folder's is tokenizer.json (loaded lazily); a GGUF's is ``tokenizer.ggml.tokens``.
    """

    source: str  # named as TokenInfo.source, e.g. "tokenizer.json"

    @property
    def available(self) -> bool: ...

    def token_to_id(self, content: str) -> int | None: ...

    def id_to_token(self, token_id: int) -> str | None:
        """The token stored at ``token_id`` (its raw piece), or None when no token has it."""

    def tokenizer(self) -> Any:
        """A ``tokenizers.Tokenizer`` that can encode text, or None."""

    def decode(self, ids: Sequence[int]) -> str | None:
        """``ids`` as text, special tokens kept; None when this table cannot tell."""


class TokenizerJson:
    """tokenizer.json of a folder, loaded with the ``tokenizers`` library on first lookup."""

    source = TOKENIZER_JSON

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def available(self) -> bool:
        return self.path.is_file()

    @cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer  # imported lazily: only vocab lookups need it

        with reading(self.path):  # the same bound as every read of it: a regular file, capped
            raw = read_regular(self.path, MAX_TOKENIZER_JSON_BYTES)
        try:
            return Tokenizer.from_buffer(raw)
        except Exception as exc:  # noqa: BLE001 (the tokenizers library raises a bare Exception)
            raise RepoLoadError(f"cannot load tokenizer: {exc}", path=self.path) from None

    def tokenizer(self) -> Any:
        return self._tokenizer if self.available else None

    def token_to_id(self, content: str) -> int | None:
        tok = self.tokenizer()
        return None if tok is None else tok.token_to_id(content)

    def id_to_token(self, token_id: int) -> str | None:
        tok = self.tokenizer()
        return None if tok is None or token_id < 0 else tok.id_to_token(token_id)

    def decode(self, ids: Sequence[int]) -> str | None:
        tok = self.tokenizer()
        return None if tok is None else str(tok.decode(list(ids), skip_special_tokens=False))


class TokenizerHead(NamedTuple):
    """What tokenizer.json says near its top, read without parsing the vocabulary: its
    ``added_tokens`` in file order (duplicates kept: gguf-py takes the first match) and the
    last special token of its ``TemplateProcessing`` post-processor (gguf-py reads it)."""

    added: tuple[TokenInfo, ...]
    trailing_special: str | None = None
    bom: bool = False  # the file starts with a UTF-8 byte-order mark (EOS017)


@dataclass
class ModelRepo:
    """Every stop-relevant source of one model: a repository folder or a single-file container.

    ``root`` is the folder, or the file itself for a GGUF; a template's ``file`` is relative
    to it (a GGUF key such as ``tokenizer.chat_template``). ``vocabulary`` is the full token
    table; None means the folder's tokenizer.json.
    """

    root: Path
    files: dict[str, JsonFile] = field(default_factory=dict)
    templates: tuple[ChatTemplate, ...] = ()
    tokenizer_config: TokenizerConfig | None = None
    generation_config: GenerationConfig | None = None
    config: ModelConfig | None = None
    special_tokens: dict[str, str] = field(default_factory=dict)  # name -> content
    added_tokens: dict[str, TokenInfo] = field(default_factory=dict)  # content -> info
    vocabulary: Vocabulary | None = None
    tokenizer_head: TokenizerHead | None = None  # None: no tokenizer.json (or not a folder)
    # The JSON files read that start with a UTF-8 byte-order mark, which every runtime's JSON
    # reader refuses (EOS017); eosfix reads past it.
    bom: tuple[str, ...] = ()
    # The JSON files read that are not JSON at all, by name: what the runtimes do with each is
    # theirs to say (EOS020); eosfix reads on as if the file were missing.
    unreadable: dict[str, UnreadableFile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vocabulary is None:
            self.vocabulary = TokenizerJson(self.root / TOKENIZER_JSON)

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def has_tokenizer_json(self) -> bool:
        vocab = self.vocabulary
        return vocab is not None and vocab.source == TOKENIZER_JSON and vocab.available

    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` of tokenizer.json (loaded on first use), or None."""
        return None if self.vocabulary is None else self.vocabulary.tokenizer()

    def resolve(self, content: str) -> TokenInfo | None:
        """The id of ``content`` as one token: added tokens first, then the full vocabulary."""
        info = self.added_tokens.get(content)
        if info is not None:
            return info
        vocab = self.vocabulary
        if vocab is None or not vocab.available:
            return None
        token_id = vocab.token_to_id(content)
        if token_id is None:
            return None
        return TokenInfo(content, token_id, False, False, vocab.source)

    def token_at(self, token_id: int) -> TokenInfo | None:
        """The token at ``token_id``: an added token first, then the full vocabulary's piece
        (``special`` False: an entry of the vocabulary, not an added token)."""
        info = next((i for i in self.added_tokens.values() if i.id == token_id), None)
        if info is not None:
            return info
        vocab = self.vocabulary
        if vocab is None or not vocab.available:
            return None
        text = vocab.id_to_token(token_id)
        return None if text is None else TokenInfo(text, token_id, False, False, vocab.source)

    def iter_special_strings(self) -> Iterator[str]:
        """Strings a tokenizer treats as control tokens: special added tokens and named ones."""
        yield from (c for c, info in self.added_tokens.items() if info.special)
        yield from self.special_tokens.values()
