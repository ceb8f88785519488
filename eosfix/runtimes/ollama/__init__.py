"""ollama: what a model stops on, release by release (a blob: ``engines.gguf_stops``).

A GGUF blob: ``eosfix.runtimes.ollama.engines`` picks the engine the release runs it on (its
Go engine by architecture in 0.6.0-0.24.0, else the vendored llama.cpp runner; llama-server
with ollama's compatibility layer from 0.30.0) and derives that engine's stop ids; every
``stop`` string of the model's params layer (``PARAMETER stop``) also ends a reply.

A folder, as ``ollama create`` converts it (``convert/tokenizer.go parseTokenizer`` and
``convert/convert.go ModelParameters.KV`` at fb3076099): ``tokenizer.ggml.eos_token_id`` is
tokenizer_config.json's ``eos_token`` looked up in tokenizer.json's added tokens
(tokenizer.go:146-176); generation_config.json's ``eos_token_id`` becomes
``tokenizer.ggml.eos_token_ids`` only when it is a JSON list and only for a special token the
tokenizer already gave (tokenizer.go:179-205, convert.go:149-157; since 333e36042, 0.7.1).
Per-architecture converters add their own keys (gemma/gemma2 eot 107, gpt-oss a fixed list,
GLM-4-MoE-Lite eot/eom from the list): not modelled here. The folder's architecture is not
known to these rules: in 0.7.1-0.24.0 they count the ids both engines stop on.

The package holds all of ollama: this rule; ``engines`` (which engine each release runs a
blob on, and what that engine stops on); ``compat`` (the blob as ollama reads it, and the stop
keys its llama.cpp compatibility layer rewrites); ``modelfile`` (how a ``PARAMETER stop``
value is written so ollama's parser reads it back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from eosfix.core.repo import CONFIG, GENERATION_CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON
from eosfix.runtimes.llamacpp import converted_vocab
from eosfix.runtimes.ollama.compat import INT32, OllamaGguf
from eosfix.runtimes.ollama.engines import (
    GO,
    GO_LIST_SINCE,
    LLAMA_SERVER_SINCE,
    RUNNER,
    VENDORED,
    gguf_stops,
    go_stops,
    vendored,
)
from eosfix.runtimes.rule import EosRead, Refusals, Rule, Runtime, StopInputs, refusing
from eosfix.runtimes.rule import parse_version as _v

__all__ = ["RUNTIME", "converted_gguf", "folder_stops", "stops_on"]


def converted_gguf(x: StopInputs, architecture: str = "") -> OllamaGguf:
    """The stop keys of the GGUF ``ollama create`` writes for the folder (its vocab: ``x.vocab``)."""
    eos = x.tokenizer_eos_id
    # tokenizer.go:190-203: a JSON list only, set on the eos entry the tokenizer gave
    listed = (
        x.generation_config_eos if x.generation_config_eos_is_list and eos is not None else None
    )
    vocab = converted_vocab(x.vocab, {"eos": eos} if eos is not None else {})
    # convert.go:154-156: written only when non-empty, as []int32
    return OllamaGguf(vocab, architecture, eos_token_ids=listed or None, eos_token_ids_type=INT32)


def folder_stops(
    x: StopInputs, version: str | None = None, architecture: str | None = None
) -> frozenset[int]:
    """What ollama ``version`` stops on for the folder once ``ollama create`` converted it.

    ``architecture`` is the GGUF architecture the converter writes (``None``: not known; then,
    where the engine depends on it, the ids every engine the release may pick stops on).
    """
    blob = converted_gguf(x, architecture or "")
    stops = gguf_stops(blob, version)
    if architecture is not None or stops.engine != RUNNER or _v(stops.version) < _v(GO_LIST_SINCE):
        return stops.ids
    return stops.ids & go_stops(blob, stops.version)


def stops_on(
    eog: Iterable[int], stop_strings: Iterable[str], terminators: Mapping[str, int | None]
) -> dict[str, bool]:
    """Per terminator text: does a model stop there (an EOG id, or a ``stop`` string that is
    the terminator's text or occurs in it)?"""
    ids, stops = frozenset(eog), tuple(s for s in stop_strings if s)
    return {
        text: (token_id is not None and token_id in ids) or any(s in text for s in stops)
        for text, token_id in terminators.items()
    }


def _rule(since: str, until: str | None) -> Rule:
    derive = partial(folder_stops, version=since)
    if since == LLAMA_SERVER_SINCE:
        return Rule(derive, "tokenizer eos + token texts (llama-server; eos_token_ids unread)",
                    "ollama 9db4bdbad + llama/compat; EOG as llama.cpp 0c1e57098",
                    "generation_config.json list written but never read", since, until)  # fmt: skip
    source = f"ollama {RUNNER} (vendored llama.cpp, {vendored(since).source}) + {GO}"
    if _v(since) >= _v(GO_LIST_SINCE):
        reads = "tokenizer eos + gen-config list (Go) / token texts (llama.cpp)"
        return Rule(derive, reads, source, "ids both engines stop on (the architecture picks one)",
                    since, until)  # fmt: skip
    note = "llama.cpp runner; the few architectures on the Go engine are not modelled"
    return Rule(
        derive, "tokenizer eos + token texts (llama.cpp runner)", source, note, since, until
    )


def _read_int32_list(value: Any) -> EosRead:
    # convert/tokenizer.go (ollama@040a8e85, lines 214-227): json.Unmarshal into []int32; any
    # error ("value is not a list so the existing ID is used") leaves the value out; a JSON
    # null item is no error and stays 0
    if type(value) is list and all(
        i is None or (type(i) is int and -(2**31) <= i < 2**31) for i in value
    ):
        return EosRead(tuple(0 if i is None else i for i in value), True, bool(value))
    return EosRead()


_BOUNDS = sorted({v.since for v in VENDORED} | {GO_LIST_SINCE, LLAMA_SERVER_SINCE}, key=_v)
_RULES = tuple(_rule(a, b) for a, b in zip(_BOUNDS, (*_BOUNDS[1:], None), strict=True))
_CURRENT = _RULES[-1]

RUNTIME = Runtime(
    name="ollama",
    reads=_CURRENT.reads,
    source=_CURRENT.source,
    derive=_CURRENT.derive,
    note=_CURRENT.note,
    since=LLAMA_SERVER_SINCE,
    older=tuple(reversed(_RULES[:-1])),
    floor="before 0.6.0 ollama picked no engine by architecture; those releases were not read",
    # ollama create: convert/tokenizer.go parseTokenizer json-decodes tokenizer.json,
    # tokenizer_config.json and generation_config.json (and convert.go config.json), and Go's
    # encoding/json refuses a mark, an empty or unparsable file: the conversion fails
    # (ollama@040a8e85; generation_config.json at fb3076099 lines 179-188). Not modelled:
    # convert/tokenizer_spm.go parseAdditionalSpecialTokens (lines 123-138) decodes
    # special_tokens_map.json the same way, for a SentencePiece tokenizer.model only, a file
    # eosfix does not read.
    refusals=Refusals(
        files=refusing(CONFIG, GENERATION_CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON),
        eos=_read_int32_list,
    ),
)
