"""llama.cpp: the end-of-generation (EOG) set it builds when it loads a GGUF's vocabulary.

Modelled on ``src/llama-vocab.cpp`` ``llama_vocab::impl::load`` of ggml-org/llama.cpp@0c1e57098,
the llama.cpp that llama-cpp-python 0.3.36 vendors (tests compare with ``llama_vocab_is_eog``
of that build for every id). At load llama.cpp:

1. starts from per-tokenizer default ids (``llama``: bos 1, eos 2; ``gpt2``: bos = eos = 11...),
   disabling a default that is out of range, then reads each ``tokenizer.ggml.*_token_id`` key
   (an id out of range keeps the default);
2. when no key set them, takes eot, eom and the FIM ids from token texts (first match in its
   hash-map order: where several texts match, which one wins is not knowable here);
3. EOG = fim_pad, fim_rep, fim_sep, every token whose text is on ``EOG_TEXTS``, then eos, eot
   and eom; minus ``<|end|>`` when ``<|return|>``/``<|call|>`` or ``<|calls|>``/``<|flush|>`` are
   EOG (gpt-oss, solar-open), minus ``</s>`` when ``<|tool_response>`` or ``<|plamo:eos|>`` are
   (Gemma 4, PLaMo, where ``</s>`` is ordinary text).

For a folder, the GGUF a conversion would produce is predicted with gguf-py ``SpecialVocab``
(``gguf/vocab.py``: tokenizer_config.json's ``eos_token`` looked up in tokenizer.json's added
tokens, else config.json's *integer* ``eos_token_id``; generation_config.json is never read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from eosfix.core.repo import CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON
from eosfix.runtimes.rule import Refusals, Runtime, StopInputs, refusing

LLAMA_CPP_COMMIT = "0c1e57098"
LLAMA_CPP_PYTHON = "0.3.36"  # the llama-cpp-python release that vendors that commit
LLAMA_CPP_VERSION = f"llama.cpp {LLAMA_CPP_COMMIT} (llama-cpp-python {LLAMA_CPP_PYTHON})"
NULL = -1

# src/llama-vocab.cpp: "maintain a list of tokens that cause end-of-generation" (ref #9606)
EOG_LIST: tuple[str, ...] = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[",
)  # fmt: skip
# src/llama-vocab.cpp: texts that auto-detect each id when its key is absent
AUTODETECT: dict[str, tuple[str, ...]] = {
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
            "<\uff5cend\u2581of\u2581sentence\uff5c>", "<end_of_utterance>"),
    "eom": ("<|eom_id|>",),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}  # fmt: skip
EOG_TEXTS: tuple[str, ...] = tuple(dict.fromkeys(EOG_LIST + AUTODETECT["eot"]))


class EogRules(NamedTuple):
    """The token texts and workarounds of one llama.cpp build's EOG logic (they grow from build
    to build; ``eosfix.runtimes.ollama.compat`` holds the older builds ollama vendored)."""

    eog_list: tuple[str, ...]
    autodetect: Mapping[str, tuple[str, ...]]
    # "<|end|>" leaves EOG when both texts of one pair are EOG (gpt-oss, solar-open)
    end_removal: tuple[tuple[str, str], ...]
    # "</s>" leaves EOG when one of these texts is EOG (gemma4, plamo)
    s_removal: tuple[str, ...]


# src/llama-vocab.cpp: (has_return && has_call && has_end) || (has_call && has_flush && has_end),
# has_call being "<|call|>" or "<|calls|>"; then "</s>" beside "<|tool_response>"/"<|plamo:eos|>"
CURRENT_RULES = EogRules(
    EOG_LIST,
    AUTODETECT,
    tuple((a, b) for a in ("<|return|>", "<|flush|>") for b in ("<|call|>", "<|calls|>")),
    ("<|tool_response>", "<|plamo:eos|>"),
)

# src/llama-arch.cpp LLM_KV_TOKENIZER_*_ID, in the order llama-vocab.cpp reads them (the
# deprecated prefix/suffix/middle keys last, so they win over fim_pre/suf/mid): (role, slot),
# the slot being the key's name between "tokenizer.ggml." and "_token_id" (the GGUF container
# names the keys: eosfix.containers.gguf.format).
ID_SLOTS: tuple[tuple[str, str], ...] = (
    ("bos", "bos"), ("eos", "eos"), ("eot", "eot"), ("eom", "eom"), ("unk", "unknown"),
    ("sep", "seperator"), ("pad", "padding"), ("mask", "mask"), ("fim_pre", "fim_pre"),
    ("fim_suf", "fim_suf"), ("fim_mid", "fim_mid"), ("fim_pad", "fim_pad"),
    ("fim_rep", "fim_rep"), ("fim_sep", "fim_sep"), ("fim_pre", "prefix"),
    ("fim_suf", "suffix"), ("fim_mid", "middle"),
)  # fmt: skip
# src/llama-vocab.cpp: default special ids per tokenizer.ggml.model (unset ids are NULL)
_DEFAULTS: dict[str, dict[str, int]] = {
    "llama": {"bos": 1, "eos": 2, "unk": 0},
    "bert": {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103},
    "gpt2": {"bos": 11, "eos": 11},
    "hybriddna": {"bos": 11, "eos": 11},
    "whitespace": {"bos": 11, "eos": 11},
    "t5": {"eos": 1, "unk": 2, "pad": 0},
    "rwkv": {},
    "test": {},
    "plamo2": {"bos": 1, "eos": 2, "unk": 0, "pad": 3},
    "gemma4": {},
}
_NO_VOCAB = ("no_vocab", "none")
_NO_BOS_PRE = ("chatglm-bpe", "glm4", "glm5")  # pre-tokenizers that clear the default bos


class GgufVocab(NamedTuple):
    """What llama.cpp reads of a GGUF to decide where generation ends."""

    model: str  # tokenizer.ggml.model
    pre: str  # tokenizer.ggml.pre ("" when absent)
    n_tokens: int  # length of tokenizer.ggml.tokens
    text_ids: Mapping[str, int]  # llama.cpp's token_to_id
    key_ids: Mapping[str, int]  # every id key present, by its slot (eos, eot...) -> value

    @classmethod
    def from_tokens(
        cls, model: str, pre: str, tokens: Sequence[str], key_ids: Mapping[str, int]
    ) -> GgufVocab:
        """From the token list: an empty token text becomes ``[EMPTY_<id>]`` as in llama.cpp."""
        text_ids = {(t or f"[EMPTY_{i}]"): i for i, t in enumerate(tokens)}
        return cls(model, pre, len(tokens), text_ids, key_ids)

    def token_text(self, token_id: int) -> str | None:
        """Token ``token_id``'s text as ``text_ids`` has it, None: no such token."""
        if isinstance(self.text_ids, IdsWithTexts):  # a GGUF's own list: asked, not scanned
            return self.text_ids.text(token_id) if token_id < self.n_tokens else None
        return next((t for t, i in self.text_ids.items() if i == token_id), None)


@runtime_checkable
class IdsWithTexts(Protocol):
    """A text -> id table that also gives an id's text without a scan (a GGUF's token list:
    ``eosfix.containers.gguf.tokens.TokenIds``)."""

    def text(self, token_id: int) -> str | None: ...


class SpecialIds(NamedTuple):
    """The ids llama.cpp holds after load (``None``: LLAMA_TOKEN_NULL)."""

    ids: Mapping[str, int | None]  # bos, eos, eot, eom, fim_pad, ...
    detected: Mapping[str, tuple[int, ...]]  # role -> candidates when found by text (>1: unsure)

    def get(self, role: str) -> int | None:
        return self.ids.get(role)


class EogSet(NamedTuple):
    """llama.cpp's end-of-generation ids; ``uncertain`` ids are EOG in some builds only (one
    of several FIM texts is picked in hash-map order), so eosfix never counts on them."""

    ids: frozenset[int]
    uncertain: frozenset[int]
    specials: SpecialIds

    def stops_on(self, token_id: int | None) -> bool:
        return token_id is not None and token_id in self.ids


def _key_ids(vocab: GgufVocab, n_tokens: int) -> dict[str, int | None]:
    """Defaults, disabled when out of range, then each key (an out-of-range key is ignored)."""
    ids: dict[str, int | None] = dict.fromkeys({r for r, _ in ID_SLOTS})
    ids.update(_DEFAULTS.get(vocab.model, {}))
    if vocab.pre in _NO_BOS_PRE:
        ids["bos"] = None
    for role, slot in ID_SLOTS:
        current = ids[role]
        if current is not None and current >= n_tokens:
            ids[role] = None
        value = vocab.key_ids.get(slot)
        if value is not None and 0 <= value < n_tokens:
            ids[role] = value
    return ids


def special_ids(vocab: GgufVocab, rules: EogRules = CURRENT_RULES) -> SpecialIds:
    """The special ids llama.cpp holds after load, text auto-detection included."""
    if vocab.model in _NO_VOCAB:
        return SpecialIds({}, {})
    text_ids = vocab.text_ids
    ids = _key_ids(vocab, vocab.n_tokens)
    detected: dict[str, tuple[int, ...]] = {}
    for role, texts in rules.autodetect.items():
        if ids[role] is None:
            found = tuple(text_ids[t] for t in texts if t in text_ids)
            if found:
                detected[role] = found
                ids[role] = found[0] if len(found) == 1 else None
    return SpecialIds(ids, detected)


def end_of_generation(
    vocab: GgufVocab, extra: Iterable[int] = (), rules: EogRules = CURRENT_RULES
) -> EogSet:
    """The EOG set llama.cpp builds for this vocabulary (``llama_vocab_is_eog``).

    ``extra`` ids are forced in like eos/eot/eom. No llama.cpp build reads
    ``tokenizer.ggml.eos_token_ids`` (ollama's key): see ``eosfix.runtimes.ollama.compat``.
    ``rules``: the texts of another llama.cpp build (default: the one this module models).
    """
    text_ids = vocab.text_ids
    specials = special_ids(vocab, rules)
    if vocab.model in _NO_VOCAB:
        return EogSet(frozenset(), frozenset(), specials)
    fim = ("fim_pad", "fim_rep", "fim_sep")
    eog = {i for r in fim if (i := specials.get(r)) is not None}
    # several texts found for one role: which one llama.cpp picked is hash-map order
    unsure = (*fim, "eot", "eom")
    uncertain = {i for r in unsure if specials.get(r) is None for i in specials.detected.get(r, ())}
    eog |= {text_ids[t] for t in rules.eog_list if t in text_ids}
    eog |= {i for r in ("eos", "eot", "eom") if (i := specials.get(r)) is not None}
    eog |= {i for i in extra if 0 <= i < vocab.n_tokens}
    ids = _apply_exceptions(set(eog), text_ids, rules)
    # a candidate is EOG when picked unless a removal drops it (gpt-oss's "<|end|>")
    maybe = {i for i in uncertain - ids if i in _apply_exceptions(eog | {i}, text_ids, rules)}
    return EogSet(frozenset(ids), frozenset(maybe), specials)


def _apply_exceptions(eog: set[int], text_ids: Mapping[str, int], rules: EogRules) -> set[int]:
    """The removals llama.cpp makes after building the set."""

    def has(text: str) -> bool:
        return text_ids.get(text, NULL) in eog

    # o200k_harmony (gpt-oss) / solar-open: "<|end|>" separates messages inside one turn
    if has("<|end|>") and any(has(a) and has(b) for a, b in rules.end_removal):
        eog.discard(text_ids["<|end|>"])
    # gemma4 / plamo: "</s>" is an ordinary token there (it is EOG for paddleocr)
    if has("</s>") and any(has(t) for t in rules.s_removal):
        eog.discard(text_ids["</s>"])
    return eog


# --- a folder, as llama.cpp's converter would write it -------------------------------------


class ConverterInputs(NamedTuple):
    """What gguf-py ``SpecialVocab`` reads of a folder to set the special-token keys."""

    has_tokenizer_json: bool
    added_tokens: Sequence[tuple[str, int]]  # tokenizer.json added_tokens (content, id), in order
    tokenizer_config: Mapping[str, object] | None
    config: Mapping[str, object] | None
    trailing_special: str | None = None  # last special token of a TemplateProcessing<single>


def _content(entry: object) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping) and isinstance(entry.get("content"), str):
        return str(entry["content"])
    return None


def _first_id(added: Iterable[tuple[str, int]], content: str | None) -> int | None:
    return next((i for c, i in added if c == content), None)


def _tokenizer_roles(x: ConverterInputs) -> dict[str, str | None]:
    """Role -> token text from tokenizer_config.json, after SpecialVocab's post-processor rules."""
    tc = dict(x.tokenizer_config or {})
    eos = _content(tc.get("eos_token"))
    if not eos and _content(tc.get("sep_token")):  # gguf/vocab.py: sep stands in for eos
        eos = _content(tc.get("sep_token"))
    roles: dict[str, str | None] = {"eos": eos}
    last = x.trailing_special
    if last and last != eos:  # gguf/vocab.py TemplateProcessing: the trailing token is the EOS
        roles["eot"], roles["eos"] = eos, last
    return roles


def converter_special_ids(x: ConverterInputs) -> dict[str, int]:
    """eos/eot the converter writes (gguf-py ``SpecialVocab._load``), config.json int fallback."""
    out: dict[str, int] = {}
    if x.has_tokenizer_json and x.tokenizer_config:  # gguf/vocab.py: `if not tokenizer_config`
        for role, content in _tokenizer_roles(x).items():
            token_id = _first_id(x.added_tokens, content)
            if token_id is not None and token_id >= 0:
                out[role] = token_id
    cfg = x.config or {}
    if "eos" not in out:
        value = cfg.get("eos_token_id")
        text_config = cfg.get("text_config")
        if value is None and isinstance(text_config, Mapping):
            value = text_config.get("eos_token_id")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out["eos"] = value  # a list is ignored: _set_special_token takes ints only
    return out


def converted_vocab(vocab: Mapping[str, int], special: Mapping[str, int]) -> GgufVocab:
    """A GGUF vocabulary with ``vocab``'s texts at their ids and the converter's keys (the
    other ids hold texts no llama.cpp rule matches). The converter writes every id it sets,
    so no tokenizer default applies ("test" has none)."""
    size = max([*vocab.values(), *special.values(), -1]) + 1
    return GgufVocab("test", "", size, vocab, dict(special))  # eos and eot: slot = role


def _fallback_eos(x: StopInputs) -> int | None:
    """Without folder facts: the tokenizer eos, else config.json's int, else text_config's."""
    if x.tokenizer_eos_id is not None:
        return x.tokenizer_eos_id
    if x.config_eos is not None:
        return x.config_eos[0] if not x.config_eos_is_list and x.config_eos else None
    tc = x.text_config_eos  # a 1-tuple here may have been [id] in the file: counted as an int
    return tc[0] if tc is not None and len(tc) == 1 else None


def converted_stop_ids(x: StopInputs, extra: Iterable[int] = ()) -> frozenset[int]:
    """EOG of the GGUF a conversion of the folder would give (its vocab: ``x.vocab``)."""
    special = dict(x.gguf_special_ids) if x.gguf_special_ids is not None else {}
    if x.gguf_special_ids is None and (eos := _fallback_eos(x)) is not None:
        special["eos"] = eos
    return end_of_generation(converted_vocab(x.vocab, special), extra).ids


def _llama_cpp(x: StopInputs) -> frozenset[int]:
    # gguf-py gguf/vocab.py SpecialVocab: generation_config.json is never read
    return converted_stop_ids(x)


RUNTIME = Runtime(
    name="llama.cpp",
    reads="GGUF eos/eot/eom (converter: tokenizer eos) + token texts",
    source=f"{LLAMA_CPP_VERSION} src/llama-vocab.cpp + gguf-py gguf/vocab.py",
    derive=_llama_cpp,
    note="never reads generation_config.json; EOG guessed from token text",
    # tests/runtimes/test_llamacpp_real.py asks that build's llama_vocab_is_eog for every id
    executed=f"{LLAMA_CPP_COMMIT} (llama-cpp-python {LLAMA_CPP_PYTHON})",
    remedy="after converting, run eosfix fix on the .gguf",  # its converter never reads it
    # the converter: gguf-py SpecialVocab json.load()s these (executed with gguf 0.19.0,
    # tests/test_llamacpp_model.py); generation_config.json and special_tokens_map.json it
    # never reads (gguf/vocab.py)
    refusals=Refusals(files=refusing(CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON)),
)
