"""pydantic models of the files eosfix reads: the definition of a well-formed file, and the
words of the one-line error for one that is not.

Imported only when ``eosfix.core.models`` cannot vouch for a file by its plain checks (so,
in practice, for a malformed file): building these classes costs more than the rest of a
small check. ``models.SCHEMAS`` names the model of each view; a test holds the plain checks
to these models.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from eosfix.core.models import eos_like

TokenId = Annotated[StrictInt, Field(ge=0)]
# eos_token_id: one id or a list of ids; floats, negatives and strings are refused.
EosValue = TokenId | Annotated[list[TokenId], Field(max_length=4096)] | None


class _Loose(BaseModel):
    # defer_build: a model is built on first use, so a check pays only for the files it reads.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class AddedTokenModel(_Loose):
    """One entry of ``added_tokens_decoder`` / tokenizer.json ``added_tokens`` / a token dict."""

    content: StrictStr
    special: StrictBool = False
    normalized: StrictBool = True
    lstrip: StrictBool = False
    rstrip: StrictBool = False
    single_word: StrictBool = False


class NamedTemplateModel(_Loose):
    name: StrictStr
    template: StrictStr


class TokenizerConfigModel(_Loose):
    chat_template: StrictStr | list[NamedTemplateModel] | None = None
    added_tokens_decoder: dict[str, AddedTokenModel] | None = None
    eos_token: StrictStr | AddedTokenModel | None = None
    bos_token: StrictStr | AddedTokenModel | None = None
    extra_special_tokens: dict[str, Any] | list[Any] | None = None


class SpecialTokensMapModel(_Loose):
    eos_token: StrictStr | AddedTokenModel | None = None


def _eos_like(value: Any) -> Any:
    if not eos_like(value):
        raise ValueError("expected a token id or a list of ids")
    return value


class GenerationConfigModel(_Loose):
    # Any value a runtime may read as eos_token_id (eosfix.core.models.eos_like): one that is
    # not ids is reported and rewritten (EOS018); an object is refused.
    eos_token_id: Annotated[Any, AfterValidator(_eos_like)] = None


class TextConfigModel(_Loose):
    eos_token_id: EosValue = None


class ModelConfigModel(_Loose):
    eos_token_id: EosValue = None
    text_config: TextConfigModel | None = None


class ChatTemplateJsonModel(_Loose):
    chat_template: StrictStr | None = None
