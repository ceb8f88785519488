"""The files eosfix reads, as read-only views of their JSON, checked on the way in.

A view is checked by plain Python (``accepts``) that accepts only what the file's pydantic
model in ``eosfix.core.schemas`` accepts; a file it cannot vouch for goes to that model
(``SCHEMAS``), whose first error is the one-line message. So a well-formed file never builds
a pydantic class (that cost more than the rest of a small check), and a malformed one gets
pydantic's words. Views hold the JSON values as parsed: ``eos_token_id`` is an int, a list
of ints or None; keys a view does not name are read from ``data`` (pydantic's
``extra="allow"``). Used to read and validate only, never to write.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

MAX_STOP_IDS = 4096  # the longest eos_token_id list accepted
MAX_TOKEN_ID = 2**32 - 1  # token ids are 32-bit in every tokenizer and GGUF
_BIG = 1 << 63  # a larger id is left to pydantic (which decides)
_FLAGS = ("special", "normalized", "lstrip", "rstrip", "single_word")


def _token_id(value: Any) -> bool:
    return type(value) is int and 0 <= value < _BIG


def _eos_value(value: Any) -> bool:
    """An ``eos_token_id``: None, an id, or a list of at most MAX_STOP_IDS ids."""
    if value is None or _token_id(value):
        return True
    return type(value) is list and len(value) <= MAX_STOP_IDS and all(map(_token_id, value))


def eos_like(value: Any) -> bool:
    """generation_config.json's ``eos_token_id`` as runtimes may read it: a number, a string,
    a bool, null, or a list of at most MAX_STOP_IDS such values (nested lists too). A value
    that is not ids (``"2"``, ``2.0``, ``true``, ``[2, null]``) is reported (EOS018) and
    rewritten as ids, never refused; an object is no stop id at all."""
    if value is None or type(value) in (int, float, bool, str):
        return True
    return type(value) is list and len(value) <= MAX_STOP_IDS and all(map(eos_like, value))


def well_formed_eos(value: Any) -> bool:
    """An id or a list of ids, as every runtime reads them (a negative id too: it is an id
    no token has, EOS013); else what EOS018 reports."""
    if type(value) is int:
        return True
    return type(value) is list and all(type(i) is int for i in value)


def intended_eos(value: Any) -> tuple[int, ...]:
    """The ids a value that is not ids names (EOS018), in order, once each: an integral
    float is its int, a string of digits its number; a bool, null, another float or string
    names none; a nested list is read through."""
    out: list[int] = []
    for item in value if type(value) is list else [value]:
        if type(item) is list:
            out.extend(intended_eos(item))
        elif type(item) is int:
            out.append(item)
        elif type(item) is float and item.is_integer():
            out.append(int(item))
        elif type(item) is str and item.strip().isascii() and item.strip().isdigit():
            out.append(int(item.strip()))
    return tuple(dict.fromkeys(out))


def _added_token(value: Any) -> bool:
    return (
        type(value) is dict
        and type(value.get("content")) is str
        and all(type(value[f]) is bool for f in _FLAGS if f in value)
    )


def _token(value: Any) -> bool:
    """A special token given as a string, an ``AddedToken`` dict, or None."""
    return value is None or type(value) is str or _added_token(value)


class View:
    """A JSON object of a file, by attribute. ``fields``: the keys its pydantic model names."""

    __slots__ = ("data",)
    fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        """True only when the pydantic model accepts ``data`` (False: ask the model)."""
        raise NotImplementedError

    def items(self) -> Iterator[tuple[str, Any]]:
        """(key, value) of every value that is not None, in pydantic's ``model_dump`` order:
        the named fields first, then the other keys as the file has them."""
        data, named = self.data, set(self.fields)
        for key in (*(f for f in self.fields if f in data), *(k for k in data if k not in named)):
            value = data[key]
            if value is not None:
                yield key, value


class AddedToken:
    """One entry of ``added_tokens_decoder`` / tokenizer.json ``added_tokens`` / a token dict."""

    __slots__ = ("content", "lstrip", "normalized", "rstrip", "single_word", "special")

    def __init__(self, data: dict[str, Any]) -> None:
        self.content: str = data["content"]
        self.special: bool = data.get("special", False)
        self.normalized: bool = data.get("normalized", True)
        self.lstrip: bool = data.get("lstrip", False)
        self.rstrip: bool = data.get("rstrip", False)
        self.single_word: bool = data.get("single_word", False)

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        return _added_token(data)


def _token_of(value: Any) -> str | AddedToken | None:
    return AddedToken(value) if isinstance(value, dict) else value


class NamedTemplate:
    __slots__ = ("name", "template")

    def __init__(self, data: dict[str, Any]) -> None:
        self.name: str = data["name"]
        self.template: str = data["template"]


def _named_template(value: Any) -> bool:
    return (
        type(value) is dict
        and type(value.get("name")) is str
        and type(value.get("template")) is str
    )


class TokenizerConfig(View):
    __slots__ = ("added_tokens_decoder", "bos_token", "chat_template", "eos_token")
    fields = (
        "chat_template",
        "added_tokens_decoder",
        "eos_token",
        "bos_token",
        "extra_special_tokens",
    )

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        template = data.get("chat_template")
        self.chat_template: str | list[NamedTemplate] | None = (
            [NamedTemplate(t) for t in template] if isinstance(template, list) else template
        )
        decoder = data.get("added_tokens_decoder")
        self.added_tokens_decoder: dict[str, AddedToken] | None = (
            None if decoder is None else {k: AddedToken(v) for k, v in decoder.items()}
        )
        self.eos_token = _token_of(data.get("eos_token"))
        self.bos_token = _token_of(data.get("bos_token"))

    @property
    def extra_special_tokens(self) -> dict[str, Any] | list[Any] | None:
        return self.data.get("extra_special_tokens")

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        template = data.get("chat_template")
        decoder = data.get("added_tokens_decoder")
        extra = data.get("extra_special_tokens")
        return (
            (
                template is None
                or type(template) is str
                or (type(template) is list and all(map(_named_template, template)))
            )
            and (
                decoder is None
                or (type(decoder) is dict and all(map(_added_token, decoder.values())))
            )
            and _token(data.get("eos_token"))
            and _token(data.get("bos_token"))
            and (extra is None or type(extra) in (dict, list))
        )


class SpecialTokensMap(View):
    __slots__ = ()
    fields = ("eos_token",)

    @property
    def eos_token(self) -> str | AddedToken | None:
        return _token_of(self.data.get("eos_token"))

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        return _token(data.get("eos_token"))


class _StopConfig(View):
    """A file with an ``eos_token_id`` (and, being a model config, maybe a ``vocab_size``)."""

    __slots__ = ()
    fields: ClassVar[tuple[str, ...]] = ("eos_token_id",)

    @property
    def eos_token_id(self) -> int | list[int] | None:
        return self.data.get("eos_token_id")

    @property
    def vocab_size(self) -> Any:
        return self.data.get("vocab_size")

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        return _eos_value(data.get("eos_token_id"))


class GenerationConfig(_StopConfig):
    """generation_config.json: its ``eos_token_id`` may be any value runtimes read as one
    (``eos_like``), the field eosfix repairs."""

    __slots__ = ()

    @property
    def eos_malformed(self) -> bool:
        """``eos_token_id`` is set to something that is not ids (EOS018)."""
        raw = self.eos_token_id
        return raw is not None and not well_formed_eos(raw)

    @property
    def eos_ids(self) -> tuple[int, ...] | None:
        """The ids ``eos_token_id`` holds (those a malformed value names: ``intended_eos``)."""
        raw = self.eos_token_id
        return intended_eos(raw) if self.eos_malformed else eos_tuple(raw)

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        return eos_like(data.get("eos_token_id"))


class TextConfig(_StopConfig):
    __slots__ = ()


class ModelConfig(_StopConfig):
    __slots__ = ()
    fields = ("eos_token_id", "text_config")

    @property
    def text_config(self) -> TextConfig | None:
        text = self.data.get("text_config")
        return None if text is None else TextConfig(text)

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        text = data.get("text_config")
        return _eos_value(data.get("eos_token_id")) and (
            text is None or (type(text) is dict and TextConfig.accepts(text))
        )


class ChatTemplateJson(View):
    __slots__ = ()
    fields = ("chat_template",)

    @property
    def chat_template(self) -> str | None:
        return self.data.get("chat_template")

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool:
        template = data.get("chat_template")
        return template is None or type(template) is str


# The pydantic model (in eosfix.core.schemas) that decides for each view.
SCHEMAS: dict[type, str] = {
    AddedToken: "AddedTokenModel",
    TokenizerConfig: "TokenizerConfigModel",
    SpecialTokensMap: "SpecialTokensMapModel",
    GenerationConfig: "GenerationConfigModel",
    TextConfig: "TextConfigModel",
    ModelConfig: "ModelConfigModel",
    ChatTemplateJson: "ChatTemplateJsonModel",
}


def token_content(value: str | AddedToken | dict[str, Any] | None) -> str | None:
    """The text of a special token given as a string or an ``AddedToken`` dict."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, AddedToken):
        return value.content
    content = value.get("content")
    return content if isinstance(content, str) else None


def eos_tuple(value: int | list[int] | None) -> tuple[int, ...] | None:
    """Normalise an ``eos_token_id`` value (int, list or None) to a tuple."""
    if value is None:
        return None
    return (value,) if isinstance(value, int) else tuple(value)
