"""The repo model every source produces: files, templates, special tokens, token ids.

A ``ModelRepo`` is what the analysis sees, whatever container it came from (a folder, a cache
snapshot, a Hub snapshot, a GGUF file): ``eosfix.sources`` build it, nothing here reads files
except the lazy tokenizer.json load for an id the smaller files cannot resolve.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from eosfix.errors import RepoLoadError
from eosfix.models import GenerationConfigModel, ModelConfigModel, TokenizerConfigModel

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
# The files that decide what eosfix reports (tokenizer.json only when needed).
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


def is_relevant_file(rel: str) -> bool:
    """True for a repo-relative path eosfix reads first (never weights, never tokenizer.json)."""
    if rel in RELEVANT_FILES:
        return True
    folder, _, name = rel.partition("/")
    return folder == TEMPLATE_DIR and name.endswith(".jinja") and "/" not in name


@dataclass(frozen=True)
class JsonFile:
    """A JSON file as read: its text (BOM kept) and parsed object, for byte-level editing."""

    name: str
    path: Path
    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ChatTemplate:
    name: str  # "default", "tool_use", ...
    source: str
    file: str  # repo-relative file it came from


@dataclass(frozen=True)
class TokenInfo:
    content: str
    id: int | None
    special: bool
    normalized: bool
    source: str  # file the id came from


@dataclass
class ModelRepo:
    """Every stop-relevant source of one model repository folder."""

    root: Path
    files: dict[str, JsonFile] = field(default_factory=dict)
    templates: tuple[ChatTemplate, ...] = ()
    tokenizer_config: TokenizerConfigModel | None = None
    generation_config: GenerationConfigModel | None = None
    config: ModelConfigModel | None = None
    special_tokens: dict[str, str] = field(default_factory=dict)  # name -> content
    added_tokens: dict[str, TokenInfo] = field(default_factory=dict)  # content -> info

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def has_tokenizer_json(self) -> bool:
        return (self.root / TOKENIZER_JSON).is_file()

    @cached_property
    def _vocab_tokenizer(self) -> Any:
        from tokenizers import Tokenizer  # imported lazily: only vocab lookups need it

        path = self.root / TOKENIZER_JSON
        try:
            return Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 (the tokenizers library raises a bare Exception)
            raise RepoLoadError(f"cannot load tokenizer: {exc}", path=path) from None

    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` of tokenizer.json (loaded on first use), or None."""
        return self._vocab_tokenizer if self.has_tokenizer_json else None

    def resolve(self, content: str) -> TokenInfo | None:
        """The id of ``content`` as one token: added tokens first, then the tokenizer vocab."""
        info = self.added_tokens.get(content)
        if info is not None:
            return info
        tok = self.tokenizer()
        if tok is None:
            return None
        token_id = tok.token_to_id(content)
        if token_id is None:
            return None
        return TokenInfo(content, token_id, False, False, TOKENIZER_JSON)

    def iter_special_strings(self) -> Iterator[str]:
        """Strings a tokenizer treats as control tokens: special added tokens and named ones."""
        yield from (c for c, info in self.added_tokens.items() if info.special)
        yield from self.special_tokens.values()
