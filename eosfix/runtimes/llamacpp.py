"""llama.cpp: eos/eot/eom of the GGUF plus every token whose text is on its end-of-generation list."""

from __future__ import annotations

from collections.abc import Mapping

from eosfix.runtimes.base import Runtime, StopInputs, one

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
    return _eog(x.vocab, one(_gguf_eos(x)))


RUNTIME = Runtime(
    name="llama.cpp",
    reads="tokenizer_config.json eos_token + token texts",
    source="llama.cpp src/llama-vocab.cpp + gguf-py gguf/vocab.py",
    derive=_llama_cpp,
    note="never reads generation_config.json; EOG guessed from token text",
)
