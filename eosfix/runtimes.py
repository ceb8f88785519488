"""Which token ids each runtime stops on, derived from a repo's files (pure, table-like).

Every rule cites the source read in ../shared/notes/runtimes.md (sections A.2-A.13, D).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "EOG_TEXTS", "RUNTIMES", "Runtime", "RuntimeVerdict", "StopInputs", "apply_config_eos",
    "apply_generation_config_eos", "compare", "describe", "stop_sets",
]  # fmt: skip


@dataclass(frozen=True)
class StopInputs:
    """What the repo's files say about end-of-sequence, already resolved to ids."""

    tokenizer_eos_id: int | None
    tokenizer_eos_content: str | None
    generation_config_exists: bool
    generation_config_eos: tuple[int, ...] | None
    generation_config_eos_is_list: bool
    config_eos: tuple[int, ...] | None
    config_eos_is_list: bool
    text_config_eos: tuple[int, ...] | None
    vocab: Mapping[str, int]


@dataclass(frozen=True)
class Runtime:
    name: str
    reads: str
    source: str
    derive: Callable[[StopInputs], frozenset[int]]
    note: str = ""


# ggml-org/llama.cpp src/llama-vocab.cpp llama_vocab::impl::load: EOG token texts ("ref #9606")
_EOG_LIST = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
    "<end_of_utterance>",
)  # fmt: skip
# ggml-org/llama.cpp src/llama-vocab.cpp: EOT auto-detect texts (the match is force-added to EOG)
_EOT_AUTODETECT = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<end_of_utterance>",
)  # fmt: skip
EOG_TEXTS: tuple[str, ...] = tuple(dict.fromkeys(_EOG_LIST + _EOT_AUTODETECT))


def _ids(*parts: Iterable[int] | None) -> frozenset[int]:
    return frozenset(i for part in parts if part is not None for i in part)


def _one(token_id: int | None) -> frozenset[int]:
    return frozenset() if token_id is None else frozenset({token_id})


def _model_config_eos(x: StopInputs) -> tuple[int, ...] | None:
    # transformers generation/configuration_utils.py from_model_config: falls back to text_config
    return x.config_eos if x.config_eos is not None else x.text_config_eos


def _transformers(x: StopInputs) -> frozenset[int]:
    # transformers generation/utils.py: generation_config.json alone; no eos there = no eos stop
    if x.generation_config_exists:
        return _ids(x.generation_config_eos)
    # transformers generation/utils.py: OSError -> GenerationConfig from config.json
    return _ids(_model_config_eos(x))


def _vllm(x: StopInputs) -> frozenset[int]:
    # vllm-project/vllm vllm/sampling_params.py update_from_generation_config: union
    return _one(x.tokenizer_eos_id) | _transformers(x)


def _sglang(x: StopInputs) -> frozenset[int]:
    # sglang srt/configs/model_config.py _get_hf_eos_token_id: config.json + generation_config
    # sglang srt/managers/schedule_batch.py check_finished: + tokenizer eos
    # sglang srt/hf_transformers_utils.py attach_additional_stop_token_ids: + <|eom_id|>
    gen = x.generation_config_eos if x.generation_config_exists else None
    eom = x.vocab.get("<|eom_id|>")
    return _ids(x.config_eos, gen) | _one(x.tokenizer_eos_id) | _one(eom)


def _tgi(x: StopInputs) -> frozenset[int]:
    # text-generation-inference flash_causal_lm.py: only a list replaces the tokenizer eos
    if x.generation_config_exists and x.generation_config_eos_is_list:
        return _ids(x.generation_config_eos)
    # text-generation-inference utils/tokens.py: getattr(tokenizer, "_eos_token_ids", eos)
    return _one(x.tokenizer_eos_id)


def _eog(vocab: Mapping[str, int], forced: frozenset[int]) -> frozenset[int]:
    # llama.cpp src/llama-vocab.cpp: every vocab token whose text is listed, plus eos/eot forced
    eog = {vocab[t] for t in EOG_TEXTS if t in vocab} | forced
    texts = {t for t in ("<|return|>", "<|call|>", "<|calls|>", "<|flush|>") if vocab.get(t) in eog}
    # llama.cpp src/llama-vocab.cpp o200k_harmony/solar-open workaround: drop <|end|> from EOG
    if {"<|return|>", "<|call|>"} <= texts or {"<|calls|>", "<|flush|>"} <= texts:
        eog.discard(vocab.get("<|end|>", -1))
    return frozenset(eog)


def _gguf_eos(x: StopInputs) -> int | None:
    if x.tokenizer_eos_id is not None:  # gguf-py gguf/vocab.py: tokenizer_config eos_token first
        return x.tokenizer_eos_id
    # gguf-py gguf/vocab.py _try_load_from_config_json: int only (lists ignored), then text_config
    if x.config_eos is not None:
        return x.config_eos[0] if not x.config_eos_is_list and x.config_eos else None
    tc = x.text_config_eos  # a 1-tuple here may have been [id] in the file: counted as an int
    return tc[0] if tc is not None and len(tc) == 1 else None


def _llama_cpp(x: StopInputs) -> frozenset[int]:
    # gguf-py gguf/vocab.py SpecialVocab: generation_config.json is never read
    return _eog(x.vocab, _one(_gguf_eos(x)))


def _ollama(x: StopInputs) -> frozenset[int]:
    # ollama/ollama convert/tokenizer.go parseTokenizer: gen-config eos only if a JSON list
    listed = x.generation_config_eos if x.generation_config_eos_is_list else None
    # ollama/ollama convert/convert.go tokenizer.ggml.eos_token_ids -> vendored llama.cpp EOG
    return _eog(x.vocab, _one(x.tokenizer_eos_id) | _ids(listed))


def _gen_truthy(x: StopInputs) -> bool:
    gen = x.generation_config_eos if x.generation_config_exists else None
    return bool(gen) and (x.generation_config_eos_is_list or gen != (0,))


def _mlx_lm(x: StopInputs) -> frozenset[int]:
    # ml-explore/mlx-lm mlx_lm/utils.py load_config (PR #701): truthy gen-config eos overrides
    eos = x.generation_config_eos if _gen_truthy(x) else x.config_eos
    # ml-explore/mlx-lm mlx_lm/tokenizer_utils.py TokenizerWrapper: replaces tokenizer eos
    return _ids(eos) if eos is not None else _one(x.tokenizer_eos_id)


def _mlx_vlm(x: StopInputs) -> frozenset[int]:
    # Blaizzy/mlx-vlm mlx_vlm/utils.py _merge_generation_config (PR #650): gen-config wins
    gen = x.generation_config_eos if x.generation_config_exists else None
    eos = gen if gen is not None else x.config_eos
    # Blaizzy/mlx-vlm load_processor @9b13f522: eos_token_ids or tokenizer eos (replace)
    return _ids(eos) if eos else _one(x.tokenizer_eos_id)


def _candle(x: StopInputs) -> frozenset[int]:
    # huggingface/candle candle-examples/examples/llama/main.rs: config.json, else "</s>"
    if x.config_eos is not None:
        return _ids(x.config_eos)
    return _one(x.vocab.get("</s>"))


def _exllamav2(x: StopInputs) -> frozenset[int]:
    # turboderp/exllamav2 exllamav2/config.py: config.json eos_token_id, list -> [0] only
    return frozenset(x.config_eos[:1]) if x.config_eos else frozenset()


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("transformers", "generation_config.json (config.json if missing)",
            "transformers generation/utils.py _prepare_special_tokens", _transformers,
            "a generation_config.json without eos_token_id never stops on eos"),
    Runtime("vLLM", "tokenizer eos + generation_config.json (config.json if missing)",
            "vllm/sampling_params.py update_from_generation_config", _vllm, "union"),
    Runtime("SGLang", "config.json + generation_config.json + tokenizer eos",
            "sglang srt/configs/model_config.py _get_hf_eos_token_id", _sglang,
            "union, plus <|eom_id|> when in the vocab"),
    Runtime("TGI", "tokenizer eos, or generation_config.json if a list",
            "text-generation-inference models/flash_causal_lm.py", _tgi,
            "a list replaces the tokenizer eos; an int is ignored"),
    Runtime("llama.cpp", "tokenizer_config.json eos_token + token texts",
            "llama.cpp src/llama-vocab.cpp + gguf-py gguf/vocab.py", _llama_cpp,
            "never reads generation_config.json; EOG guessed from token text"),
    Runtime("ollama", "tokenizer eos + generation_config.json list + token texts",
            "ollama convert/tokenizer.go parseTokenizer", _ollama,
            "import from safetensors; then the vendored llama.cpp EOG rules"),
    Runtime("mlx-lm", "generation_config.json, else config.json, else tokenizer eos",
            "mlx-lm mlx_lm/utils.py load_config (PR #701)", _mlx_lm,
            "replaces the tokenizer eos; before PR #701 config.json only"),
    Runtime("mlx-vlm", "generation_config.json, else config.json, else tokenizer eos",
            "mlx-vlm mlx_vlm/utils.py load_config @9b13f522", _mlx_vlm,
            "replaces the tokenizer eos (union only after PR #2112)"),
    Runtime("candle", "config.json (top level), else </s>",
            "candle-examples/examples/llama/main.rs", _candle, "llama example"),
    Runtime("ExLlamaV2", "config.json", "exllamav2/config.py", _exllamav2,
            "keeps only the first id of config.json"),
)  # fmt: skip


def describe(runtime_name: str) -> Runtime:
    for rt in RUNTIMES:
        if rt.name.lower() == runtime_name.lower():
            return rt
    raise KeyError(runtime_name)


def stop_sets(inputs: StopInputs) -> dict[str, frozenset[int]]:
    return {rt.name: rt.derive(inputs) for rt in RUNTIMES}


@dataclass(frozen=True)
class RuntimeVerdict:
    runtime: str
    reads: str
    before: frozenset[int]
    after: frozenset[int]
    stops_before: dict[int, bool]
    stops_after: dict[int, bool]

    @property
    def ok_before(self) -> bool:
        return all(self.stops_before.values())

    @property
    def ok_after(self) -> bool:
        return all(self.stops_after.values())


def compare(
    before: StopInputs, after: StopInputs, terminator_ids: Sequence[int]
) -> tuple[RuntimeVerdict, ...]:
    verdicts = []
    for rt in RUNTIMES:
        b, a = rt.derive(before), rt.derive(after)
        verdicts.append(RuntimeVerdict(
            rt.name, rt.reads, b, a,
            {t: t in b for t in terminator_ids}, {t: t in a for t in terminator_ids},
        ))  # fmt: skip
    return tuple(verdicts)


def apply_generation_config_eos(inputs: StopInputs, new_eos: Sequence[int]) -> StopInputs:
    """Inputs after generation_config.json's eos_token_id is written as a list (file created)."""
    return dataclasses.replace(
        inputs,
        generation_config_exists=True,
        generation_config_eos=tuple(new_eos),
        generation_config_eos_is_list=True,
    )


def apply_config_eos(inputs: StopInputs, new_eos: Sequence[int]) -> StopInputs:
    """Inputs after writing the list to generation_config.json AND config.json.

    config.json's ``text_config.eos_token_id`` is rewritten only when it was set.
    """
    ids = tuple(new_eos)
    return dataclasses.replace(
        apply_generation_config_eos(inputs, ids),
        config_eos=ids,
        config_eos_is_list=True,
        text_config_eos=ids if inputs.text_config_eos is not None else None,
    )
