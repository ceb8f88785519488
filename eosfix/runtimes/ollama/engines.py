"""Which engine runs a GGUF blob in each ollama release, and which ids that engine stops on.

Read in ollama/ollama's history (tags and commits below; ``file:line`` at the tag named):

- 0.30.0 and later: every GGUF runs on llama-server, upstream llama.cpp at the tag in
  ``LLAMA_CPP_VERSION`` (b9452 at 0.30.0 ... b10488 at 0.32.15 and fb3076099), fetched at build
  time, not vendored; commit 9db4bdbad "runner: Remove CGO engines, use llama-server
  exclusively for GGML models". Its compatibility layer rewrites some blobs' stop keys first
  (``eosfix.runtimes.ollama.compat.translate``); llama-server then stops on llama.cpp's EOG set
  (and the request's ``stop`` strings: llm/llama_server.go:1569, :2162 at fb3076099).
- 0.6.0 to 0.24.0: ``llm/server.go`` ``NewLlamaServer`` runs a blob on ollama's Go engine when
  ``OLLAMA_NEW_ENGINE`` is set or ``fs/ggml`` ``KV.OllamaEngineRequired()`` lists its
  ``general.architecture`` (and, from 0.11.11, the model has no separate projector layer),
  else on the CGO llama.cpp runner (llama.cpp vendored at ``Makefile.sync`` ``FETCH_HEAD``).
  The Go engine stops when ``Vocabulary.Is(token, SpecialEOS)``
  (runner/ollamarunner/runner.go), the llama.cpp runner when ``llama_vocab_is_eog``
  (runner/llamarunner/runner.go ``TokenIsEog``).

``OLLAMA_NEW_ENGINE`` (the Go engine for every architecture it implements) is not modelled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple

from packaging.version import Version

from eosfix.runtimes.llamacpp import (
    CURRENT_RULES,
    LLAMA_CPP_VERSION,
    EogRules,
    end_of_generation,
)
from eosfix.runtimes.ollama.compat import COMPAT, INT32, OllamaGguf, translate
from eosfix.runtimes.rule import parse_version

GO, RUNNER, SERVER = "ollama engine (Go)", "llama.cpp runner", "llama-server"
FLOOR = "0.6.0"  # the first release that picks the Go engine by architecture (ab39e08eb)
LLAMA_SERVER_SINCE = "0.30.0"  # 9db4bdbad


def _v(text: str) -> Version:
    return parse_version(text)


def _at(table: tuple[tuple[str, object], ...], version: str) -> object:
    """The value of the last row whose first version is <= ``version``."""
    found = None
    for since, value in table:
        if _v(version) >= _v(since):
            found = value
    return found


# --- which architectures run on the Go engine (fs/ggml KV.OllamaEngineRequired) ------------

_REQUIRED_ADDED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # first release, architectures added, where the list is (tag's commit, file:line)
    ("0.6.0", ("gemma3",), "aee28501b fs/ggml/ggml.go:136"),
    ("0.6.5", ("mistral3",), "0f3f9e353 fs/ggml/ggml.go:136"),
    ("0.6.7", ("llama4",), "a7835c671 fs/ggml/ggml.go:123"),
    ("0.7.0", ("mllama", "qwen25vl"), "bd68d3ae5 fs/ggml/ggml.go:123"),
    ("0.9.3", ("gemma3n",), "ba0490267 fs/ggml/ggml.go:174"),
    ("0.11.0", ("gptoss",), "d55206841 fs/ggml/ggml.go:175"),
    ("0.11.5", ("gpt-oss",), "f804e8a46 fs/ggml/ggml.go:175"),
    ("0.12.0", ("qwen3",), "9f3a37fd3 fs/ggml/ggml.go:241"),
    ("0.12.2", ("qwen3moe",), "2e742544b fs/ggml/ggml.go:241"),
    ("0.12.7", ("qwen3vl", "qwen3vlmoe"), "c88647104 fs/ggml/ggml.go:241"),
    ("0.13.0", ("deepseek2", "deepseekocr"), "604e43b28 fs/ggml/ggml.go:241"),
    ("0.13.1", ("nomic-bert",), "5317202c3 fs/ggml/ggml.go:241"),
    ("0.13.4", ("olmo3",), "89eb79529 fs/ggml/ggml.go:242"),
    ("0.13.5", ("bert",), "732579159 fs/ggml/ggml.go:242"),
    ("0.14.3", ("glm4moelite", "lfm2"), "d6dd430ab fs/ggml/ggml.go:256"),
    ("0.15.5", ("glmocr", "qwen3next"), "8a4b77f9d fs/ggml/ggml.go:256"),
    ("0.17.1", ("lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen35", "qwen35moe"),
     "9bf41969f fs/ggml/ggml.go:277"),
    ("0.20.0", ("gemma4",), "de9673ac3 fs/ggml/ggml.go:277"),
    ("0.22.0", ("laguna", "nemotron_h_omni"), "955112e50 fs/ggml/ggml.go:277"),
)  # fmt: skip
# 0.12.5 alone ran qwen3 on llama.cpp (3d32249c7 "use llama runner for qwen3"; reverted in
# 0.12.6 by 18087f2ec)
_QWEN3_ON_LLAMA_CPP = ("0.12.5", "0.12.6")
SPLIT_VISION_SINCE = "0.11.11"  # aba157531: a projector layer keeps a model off the Go engine


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def go_engine_architectures(version: str) -> frozenset[str]:
    """The architectures ``OllamaEngineRequired`` lists in ``version`` (0.6.0 to 0.24.0)."""
    archs = {a for since, added, _ in _REQUIRED_ADDED if _v(version) >= _v(since) for a in added}
    low, high = _QWEN3_ON_LLAMA_CPP
    if _v(low) <= _v(version) < _v(high):
        archs.discard("qwen3")
    return frozenset(archs)


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def engine_for(version: str, architecture: str, has_projector: bool = False) -> str:
    """The engine ollama ``version`` runs a blob of ``architecture`` on."""
    if _v(version) < _v(FLOOR):
        raise ValueError(f"eosfix models ollama {FLOOR} and later")
    if _v(version) >= _v(LLAMA_SERVER_SINCE):
        return SERVER
    if architecture not in go_engine_architectures(version):
        return RUNNER
    if has_projector and _v(version) >= _v(SPLIT_VISION_SINCE):
        return RUNNER
    return GO


# --- the llama.cpp each release vendored, and its EOG texts --------------------------------

# llama/llama.cpp/src/llama-vocab.cpp at the first tag of each row ("auto-detect special tokens
# by text", "maintain a list of tokens that cause end-of-generation", the o200k_harmony
# workaround); the builds each row holds for are in _BUILDS below.
_EOT_OLD = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>")
_DS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
_FIM_PAD = ("<|fim_pad|>", "<fim-pad>", "<PAD>")
_FIM_REP = ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>")


def _rules(eot: tuple[str, ...], eog: tuple[str, ...], granite_fim: bool,
           harmony: bool) -> EogRules:  # fmt: skip
    return EogRules(
        eog_list=eog,
        autodetect={
            "eot": eot,
            "eom": ("<|eom_id|>",),
            "fim_pad": _FIM_PAD + (("<fim_pad>",) if granite_fim else ()),
            "fim_rep": _FIM_REP + (("<reponame>",) if granite_fim else ()),
            "fim_sep": ("<|file_sep|>",),
        },
        end_removal=(("<|return|>", "<|call|>"),) if harmony else (),
        s_removal=(),
    )


_EOG_OLD = (*_EOT_OLD[:5], "<|eom_id|>", "<EOT>")
_EOG_HARMONY = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                "<|end_of_text|>", "<end_of_utterance>")  # fmt: skip


class VendoredLlamaCpp(NamedTuple):
    since: str
    source: str  # the ollama tag's commit and llama-vocab.cpp lines
    rules: EogRules


VENDORED: tuple[VendoredLlamaCpp, ...] = (
    VendoredLlamaCpp("0.6.0", "aee28501b llama-vocab.cpp:1761,1899,1941",
                     _rules((*_EOT_OLD, _DS), _EOG_OLD, False, False)),
    VendoredLlamaCpp("0.6.6", "88738b357 llama-vocab.cpp:1791,1933,1976",
                     _rules((*_EOT_OLD, "_<EOT>", _DS), (*_EOG_OLD, "_<EOT>"), False, False)),
    VendoredLlamaCpp("0.6.7", "a7835c671 llama-vocab.cpp:1791,1938,1981",
                     _rules((*_EOT_OLD, "_<EOT>", _DS), (*_EOG_OLD, "_<EOT>"), True, False)),
    VendoredLlamaCpp("0.11.5", "f804e8a46 llama-vocab.cpp:2134,2285,2355",
                     _rules((*_EOT_OLD, "_<EOT>", _DS, "<end_of_utterance>"), _EOG_HARMONY,
                            True, True)),
    VendoredLlamaCpp("0.12.6", "1813ff85a llama-vocab.cpp:2151,2303,2373",
                     _rules((*_EOT_OLD, "<|end_of_text|>", "_<EOT>", _DS, "<end_of_utterance>"),
                            _EOG_HARMONY, True, True)),
)  # fmt: skip
# The llama.cpp each release builds: Makefile.sync FETCH_HEAD (vendored, 0.6.0-0.24.0), then
# LLAMA_CPP_VERSION (fetched at build time, 0.30.0 on), from the first release named
_BUILDS: tuple[tuple[str, str], ...] = (
    ("0.6.0", "d7cfe1ffe"), ("0.6.6", "71e90e881"), ("0.6.7", "2016f07bd"),
    ("0.6.8", "e1e8e0991"), ("0.7.0", "de4c07f93"), ("0.11.5", "e54d41bef"),
    ("0.12.4", "364a7a6d4"), ("0.12.6", "7049736b2"), ("0.12.11", "3cfa9c3f1"),
    ("0.13.2", "7f8ef50cc"), ("0.13.3", "17f7f4baa"), ("0.13.5", "ec98e2002"),
    ("0.30.0", "b9452"), ("0.30.1", "b9479"), ("0.30.4", "b9493"), ("0.30.5", "b9509"),
    ("0.30.9", "b9626"), ("0.30.10", "b9672"), ("0.30.11", "b9781"), ("0.31.0", "b9840"),
    ("0.31.2", "b9888"), ("0.32.2", "b10069"), ("0.32.3", "b10091"), ("0.32.6", "b10242"),
    ("0.32.8", "b10353"), ("0.32.10", "b10380"), ("0.32.14", "b10434"), ("0.32.15", "b10488"),
)  # fmt: skip


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def llama_cpp_build(version: str) -> str:
    """The llama.cpp commit (vendored) or tag (pinned) ollama ``version`` was built with."""
    return str(_at(_BUILDS, version))


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def vendored(version: str) -> VendoredLlamaCpp:
    found = _at(tuple((v.since, v) for v in VENDORED), version)
    assert isinstance(found, VendoredLlamaCpp)
    return found


# --- what the Go engine's vocabulary stops on ------------------------------------------------


def _eos(g: OllamaGguf, default: int = 0) -> int:
    # fs/ggml KV.Uint(key, default...): the value, or the default (0 unless given)
    value = g.key("eos")
    return default if value is None else value


def _eot(g: OllamaGguf, default: int) -> int:
    value = g.key("eot")
    return default if value is None else value


def _go_until_0_7(g: OllamaGguf, version: str) -> tuple[int, ...]:
    # model/process_text.go:56 (aee28501b) Is: id == EOS || id == EOT, two int32 fields
    if g.architecture == "gemma3":  # gemma3/model.go:66,68: EOS 1, EOT 106, no key read
        return (1, 106)
    if g.architecture == "mistral3":  # mistral3/model_text.go:159 (0f3f9e353): EOT unset: 0
        return (_eos(g, 2), 0)
    return (_eos(g), 0)  # llama4/model.go:46 (a7835c671): EOT unset: 0


def _go_0_7_0(g: OllamaGguf, version: str) -> tuple[int, ...]:
    # bd68d3ae5: "TODO: set EOT to EOS otherwise 0 will stop generation" (process_text.go:59)
    if g.architecture == "gemma3":  # gemma3/model.go:65,67
        return (1, 106)
    if g.architecture == "mistral3":  # mistral3/model.go:53,56: EOS default 2, EOT default 0
        return (_eos(g, 2), _eos(g))
    return (_eos(g),)  # llama4/model.go:46,49; mllama/model.go:42,45; qwen25vl/model.go:40,42


def _go_list(g: OllamaGguf, version: str) -> tuple[int, ...]:
    # 333e36042 "model: handle multiple eos tokens" (0.7.1): EOS []int32 = eos_token_id (KV.Uint,
    # default 0) + eos_token_ids (KV.Ints: an INT32 array only, fs/ggml/ggml.go:112 at 884d26093);
    # Is: slices.Contains (model/vocabulary.go:35; tokenizer/vocabulary.go:35 from 0.20.0)
    listed = g.eos_token_ids if g.eos_token_ids_type == INT32 and g.eos_token_ids else ()
    ids = (_eos(g), *listed)
    # gemma3/model.go:68-71 (884d26093) adds eot_token_id, default 106; from 0.13.3 (d2f334c1f)
    # only when the tokenizer model is not "gpt2" (:77-80 at 89eb79529)
    gemma3_eot = g.architecture == "gemma3" and (
        _v(version) < _v("0.13.3") or g.vocab.model != "gpt2"
    )
    # gemma4/model.go:72 (de9673ac3) adds eot_token_id, default 106
    if gemma3_eot or g.architecture == "gemma4":
        ids = (*ids, _eot(g, 106))
    return ids


class GoRule(NamedTuple):
    """What the Go engine's vocabulary stops on, from ``since`` on (to the next rule)."""

    since: str
    derive: Callable[[OllamaGguf, str], tuple[int, ...]]
    reads: str
    source: str


GO_LIST_SINCE = "0.7.1"  # one rule for every architecture (gemma3/gemma4 add eot)
GO_RULES: tuple[GoRule, ...] = (
    GoRule("0.6.0", _go_until_0_7, "gemma3: 1 and 106; mistral3/llama4: eos_token_id and 0",
           "aee28501b model/process_text.go:56"),
    GoRule("0.7.0", _go_0_7_0, "gemma3: 1 and 106; others: eos_token_id",
           "bd68d3ae5 model/process_text.go:59"),
    GoRule(GO_LIST_SINCE, _go_list,
           "eos_token_id (absent: 0) + eos_token_ids (INT32 array); gemma3/gemma4: "
           "+ eot_token_id (absent: 106)", "884d26093 model/vocabulary.go:35"),
)  # fmt: skip


LAST_GO = "0.24.0"  # the last release with the Go engine (0.30.0 removed it: 9db4bdbad)


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def go_list_versions(architecture: str, has_projector: bool = False) -> tuple[str, ...]:
    """One release per stretch of releases (0.7.1 to 0.24.0) in which the Go engine runs
    ``architecture`` and reads ``eos_token_ids``: its engine choice and its rule hold until the
    next one listed. Empty when no release runs it there."""
    bounds = {GO_LIST_SINCE, *_QWEN3_ON_LLAMA_CPP, SPLIT_VISION_SINCE, "0.13.3",
              *(since for since, _, _ in _REQUIRED_ADDED)}  # fmt: skip
    stretch = sorted((v for v in bounds if _v(GO_LIST_SINCE) <= _v(v) <= _v(LAST_GO)), key=_v)
    return tuple(v for v in stretch if engine_for(v, architecture, has_projector) == GO)


@functools.lru_cache(maxsize=256)  # a pure function of a release: asked for each state
def go_rule(version: str) -> GoRule:
    found = _at(tuple((r.since, r) for r in GO_RULES), version)
    assert isinstance(found, GoRule)
    return found


# --- the stop set of one blob under one release ----------------------------------------------


class OllamaStops(NamedTuple):
    """The token ids a blob stops on under one ollama release (and how that was derived)."""

    version: str
    engine: str
    ids: frozenset[int]
    uncertain: frozenset[int]  # EOG in some builds only (llama.cpp's hash-order picks)
    reads: str
    source: str
    rewrites: Mapping[str, object] = {}  # compat layer, key -> value
    notes: tuple[str, ...] = ()


LATEST = "0.32.15"  # the newest release read (its LLAMA_CPP_VERSION is fb3076099's: b10488)


def gguf_stops(g: OllamaGguf, version: str | None = None) -> OllamaStops:
    """What ollama ``version`` (None: the latest read) stops on for the blob ``g``."""
    version = version or LATEST
    engine = engine_for(version, g.architecture, g.has_projector)
    if engine == SERVER:
        t = translate(g)
        eog = end_of_generation(t.gguf.vocab, rules=CURRENT_RULES)
        reads = "eos/eot/eom + token texts (llama.cpp), after the compat layer's rewrites"
        source = (
            f"{COMPAT}; llama.cpp {llama_cpp_build(version)}, EOG modelled as {LLAMA_CPP_VERSION}"
        )
        return OllamaStops(version, engine, eog.ids, eog.uncertain, reads, source,
                           t.rewrites, t.notes)  # fmt: skip
    if engine == RUNNER:
        lc = vendored(version)
        eog = end_of_generation(g.vocab, rules=lc.rules)
        reads = "eos/eot/eom + token texts (vendored llama.cpp; eos_token_ids not read)"
        source = f"llama.cpp {llama_cpp_build(version)} vendored ({lc.source})"
        return OllamaStops(version, engine, eog.ids, eog.uncertain, reads, source)
    rule = go_rule(version)
    return OllamaStops(version, engine, go_stops(g, version), frozenset(), rule.reads, rule.source)


def go_stops(g: OllamaGguf, version: str) -> frozenset[int]:
    """The ids the Go engine of ``version`` stops on for ``g`` (whatever engine ``g`` gets)."""
    ids = go_rule(version).derive(g, version)
    return frozenset(i for i in ids if 0 <= i < g.vocab.n_tokens)
