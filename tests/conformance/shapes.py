"""Repo shapes that differ only in where the eos ids live, written as loadable model folders.

Every shape is a tiny model with random weights (a Llama; a Llava vision-language model where
the eos sits under ``text_config``), a ChatML template and a WordLevel tokenizer whose special
tokens sit where SmolLM2's do (``<|endoftext|>`` 0, ``<|im_start|>`` 1, ``<|im_end|>`` 2), that
transformers, mlx-lm and mlx-vlm load with their own code. The turn terminator is always
``<|im_end|>``; the shapes move the eos ids between tokenizer_config.json, config.json (top
level or ``text_config``) and generation_config.json, including the values runtimes treat
differently: an int, a list, ``0``, ``[0]``, ``[]``, ``null``, the key absent, the file absent;
and what JSON readers refuse: a file that starts with a byte-order mark, an ``eos_token_id``
that is not ids (``"2"``, ``2.0``, ``true``, ``[2, null]``, ``[[0, 2]]``).
``write_models`` makes the weights once (torch + transformers); ``build`` writes one shape.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import AddedToken

from eosfix.core.repo import CONFIG, GENERATION_CONFIG, SPECIAL_TOKENS_MAP, TOKENIZER_CONFIG
from tests.support.tiny_lm import save_tokenizer, word_level_tokenizer

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
EOM, CONTENT_END, IFM_IM_END = "<|eom_id|>", "<|content_model_end_sampling|>", "<|ifm|im_end|>"
SPECIAL = {ENDOFTEXT: 0, IM_START: 1, IM_END: 2}
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
WORDS = "system user assistant You are a helpful model . What is the capital of France ? Paris"
# An ordinary word of the vocabulary (not a special token), and an id no token has.
PARIS = word_level_tokenizer([WORDS], SPECIAL).token_to_id("Paris")
NO_TOKEN = 200
VOCAB_SIZE = 64
MODEL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "rms_norm_eps": 1e-05,
    "vocab_size": VOCAB_SIZE,
    "max_position_embeddings": 128,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
}
WEIGHTS = "model.safetensors"
PREPROCESSOR = "preprocessor_config.json"


@dataclass(frozen=True)
class Shape:
    """Where one repo keeps its eos ids (``generation=None``: no generation_config.json)."""

    name: str
    what: str
    tokenizer_eos: str | None
    config: dict[str, Any] = field(default_factory=dict)  # eos keys merged into config.json
    generation: dict[str, Any] | None = None
    vlm: bool = False  # a Llava (config.json with text_config) instead of a Llama
    # More added tokens, text -> special, at the ids after the vocabulary's.
    added: dict[str, bool] = field(default_factory=dict)
    bom: tuple[str, ...] = ()  # files written with a UTF-8 byte-order mark first
    # Files written as these bytes, whatever else the shape says of them: what no JSON reader
    # parses (invalid JSON, NUL bytes, an empty file).
    raw: dict[str, bytes] = field(default_factory=dict)
    # tokenizer_config.json lists its added tokens (``added_tokens_decoder``), as
    # transformers 4.35 and later save it: transformers then never opens special_tokens_map.json.
    decoder: bool = False

    @property
    def refused(self) -> bool:
        """What JSON readers refuse: a byte-order mark, a file that is not JSON, or an
        eos_token_id that is not ids."""
        eos = (self.generation or {}).get("eos_token_id")
        ids = type(eos) is int or (type(eos) is list and all(type(i) is int for i in eos))
        return bool(self.bom or self.raw) or (eos is not None and not ids)


def refused_unfixed(shape: Shape) -> bool:
    """A file ``fix`` does not write (a mark, or no JSON at all, in config.json or a tokenizer
    file) that stops transformers' loaders from loading the model, before and after ``fix``:
    special_tokens_map.json only where transformers opens it (no added_tokens_decoder)."""
    files = (set(shape.bom) | set(shape.raw)) - {GENERATION_CONFIG}
    if shape.decoder:
        files.discard(SPECIAL_TOKENS_MAP)
    return bool(files)


SHAPES: tuple[Shape, ...] = (
    Shape("tokenizer-eos-only", "eos only in tokenizer_config.json", IM_END),
    Shape("gen-int", "generation_config int", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": 2}),
    Shape("gen-list", "generation_config list", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": [0, 2]}),
    Shape("gen-zero", "generation_config 0, tokenizer eos <|im_end|>", IM_END,
          {"eos_token_id": 0}, {"eos_token_id": 0}),
    Shape("gen-zero-list", "generation_config [0]", IM_END, {"eos_token_id": 2},
          {"eos_token_id": [0]}),
    Shape("gen-empty-list", "generation_config []", ENDOFTEXT, {"eos_token_id": 2},
          {"eos_token_id": []}),
    Shape("gen-null", "generation_config null", ENDOFTEXT, {"eos_token_id": 2},
          {"eos_token_id": None}),
    Shape("gen-key-absent", "generation_config without eos_token_id", ENDOFTEXT,
          {"eos_token_id": 2}, {"bos_token_id": 1}),
    Shape("gen-empty-object", "generation_config {}", ENDOFTEXT, {"eos_token_id": 2}, {}),
    Shape("gen-file-absent", "no generation_config, config.json list", ENDOFTEXT,
          {"eos_token_id": [0, 2]}),
    Shape("config-only", "config.json only (no tokenizer eos)", None, {"eos_token_id": 2}),
    Shape("text-config", "VLM: eos only under config.json text_config", ENDOFTEXT,
          {"text_config": {"eos_token_id": 2}}, vlm=True),
    Shape("tokenizer-differs", "tokenizer eos <|im_end|>, config.json 0", IM_END,
          {"eos_token_id": 0}),
    Shape("seed", "the seed: tokenizer <|endoftext|>, both configs 0", ENDOFTEXT,
          {"eos_token_id": 0}, {"bos_token_id": 1, "eos_token_id": 0}),
    # Early stops: a stop id a reply contains, and one no token has.
    Shape("gen-ordinary", "generation_config lists the word Paris", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": [2, PARIS]}),
    Shape("gen-no-token", "generation_config lists an id beyond the vocabulary", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": [2, NO_TOKEN]}),
    Shape("config-ordinary", "config.json lists the word Paris, generation_config [2]",
          ENDOFTEXT, {"eos_token_id": [2, PARIS]}, {"eos_token_id": [2]}),
    # the config class's default (LlamaConfig: 2) where config.json has no key;
    # a generation_config 0 that SGLang ignores; added tokens SGLang stops on by their text.
    Shape("config-no-eos", "config.json without eos_token_id, tokenizer eos <|endoftext|>",
          ENDOFTEXT),
    Shape("gen-zero-config-im-end", "generation_config 0, config.json and tokenizer <|im_end|>",
          IM_END, {"eos_token_id": 2}, {"eos_token_id": 0}),
    Shape("added-stop-texts", "added tokens <|eom_id|>, <|content_model_end_sampling|> and "
          "<|ifm|im_end|> (not special)", ENDOFTEXT, {"eos_token_id": 0}, {"eos_token_id": 0},
          added={EOM: True, CONTENT_END: True, IFM_IM_END: False}),
    # What JSON readers refuse (EOS017, EOS018): a byte-order mark (the ids right behind it),
    # and eos_token_id values that are not ids, each reaching another branch of a reader.
    Shape("gen-bom", "generation_config [0, 2] behind a byte-order mark", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": [0, 2]}, bom=(GENERATION_CONFIG,)),
    Shape("config-bom", "config.json behind a byte-order mark", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": [0, 2]}, bom=(CONFIG,)),
    Shape("tokenizer-config-bom", "tokenizer_config.json behind a byte-order mark", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": [0, 2]}, bom=(TOKENIZER_CONFIG,)),
    Shape("gen-string", 'generation_config "2"', ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": "2"}),
    Shape("gen-string-item", 'generation_config [0, "2"]', ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": [0, "2"]}),
    Shape("gen-float", "generation_config 2.0", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": 2.0}),
    Shape("gen-float-item", "generation_config [0, 2.0]", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": [0, 2.0]}),
    Shape("gen-true", "generation_config true (id 1 to Python)", ENDOFTEXT,
          {"eos_token_id": 0}, {"eos_token_id": True}),
    Shape("gen-null-item", "generation_config [2, null]", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": [2, None]}),
    Shape("gen-nested", "generation_config [[0, 2]]", ENDOFTEXT, {"eos_token_id": 0},
          {"eos_token_id": [[0, 2]]}),
    # Files no JSON reader parses, as people pushed them (EOS019): generation_config.json cut
    # short, 163 NUL bytes, empty; special_tokens_map.json empty, with and without an
    # added_tokens_decoder in tokenizer_config.json.
    Shape("gen-invalid", "generation_config.json cut short (invalid JSON)", ENDOFTEXT,
          {"eos_token_id": 0}, raw={GENERATION_CONFIG: b'{\n  "eos_token_id": [0, 2],\n'}),
    Shape("gen-nul", "generation_config.json of 163 NUL bytes", ENDOFTEXT,
          {"eos_token_id": 0}, raw={GENERATION_CONFIG: bytes(163)}),
    Shape("gen-zero-bytes", "generation_config.json of 0 bytes", ENDOFTEXT,
          {"eos_token_id": 0}, raw={GENERATION_CONFIG: b""}),
    Shape("stm-zero-bytes", "special_tokens_map.json of 0 bytes, no added_tokens_decoder",
          ENDOFTEXT, {"eos_token_id": 0}, {"eos_token_id": [0, 2]},
          raw={SPECIAL_TOKENS_MAP: b""}),
    Shape("stm-zero-bytes-decoder", "special_tokens_map.json of 0 bytes, added_tokens_decoder "
          "listed", ENDOFTEXT, {"eos_token_id": 0}, {"eos_token_id": [0, 2]},
          raw={SPECIAL_TOKENS_MAP: b""}, decoder=True),
)  # fmt: skip


def _dump(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if nested else value
    return out


def write_models(folder: Path) -> Path:
    """Random weights in the Hugging Face layout: ``llama/`` (lm_head tied, not stored) and
    ``llava/`` (with its config.json and image processor); the Llava's eos keys removed."""
    import torch
    from safetensors.torch import save_file
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlamaForCausalLM,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )

    torch.manual_seed(0)
    keys = {k: v for k, v in MODEL_CONFIG.items() if k not in ("architectures", "model_type")}
    model = LlamaForCausalLM(LlamaConfig(**keys))
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    (folder / "llama").mkdir(parents=True)
    save_file(state, str(folder / "llama" / WEIGHTS), metadata={"format": "pt"})
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                              num_attention_heads=2, image_size=32, patch_size=16)  # fmt: skip
    llava = LlavaConfig(vision_config=vision, text_config=LlamaConfig(**keys), image_token_index=3)
    LlavaForConditionalGeneration(llava).save_pretrained(folder / "llava")
    (folder / "llava" / "generation_config.json").unlink()
    config = json.loads((folder / "llava" / "config.json").read_text(encoding="utf-8"))
    for part in (config, config["text_config"]):
        part.pop("eos_token_id", None)
    _dump(folder / "llava" / "config.json", config)
    size = {"shortest_edge": 32}
    CLIPImageProcessor(size=size, crop_size={"height": 32, "width": 32}).save_pretrained(
        folder / "llava"
    )
    return folder


def build(shape: Shape, folder: Path, models: Path) -> Path:
    """Write ``shape`` as a model folder the runtimes load (weights from ``write_models``)."""
    folder.mkdir(parents=True)
    tokenizer = word_level_tokenizer([WORDS], SPECIAL)
    tokenizer.add_tokens(
        [AddedToken(t, special=sp, normalized=False) for t, sp in shape.added.items()]
    )
    save_tokenizer(tokenizer, folder)
    tokenizer_config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": IM_START,
        "unk_token": ENDOFTEXT,
        "chat_template": CHATML,
    }
    if shape.tokenizer_eos is not None:
        tokenizer_config["eos_token"] = shape.tokenizer_eos
    if shape.decoder:
        tokenizer_config["added_tokens_decoder"] = {
            str(tokenizer.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False,
                                            "rstrip": False, "single_word": False,
                                            "special": True}
            for t in SPECIAL
        }  # fmt: skip
    _dump(folder / "tokenizer_config.json", tokenizer_config)
    if shape.vlm:
        base = json.loads((models / "llava" / "config.json").read_text(encoding="utf-8"))
        shutil.copyfile(models / "llava" / WEIGHTS, folder / WEIGHTS)
        shutil.copyfile(models / "llava" / PREPROCESSOR, folder / PREPROCESSOR)
    else:
        base = MODEL_CONFIG
        shutil.copyfile(models / "llama" / WEIGHTS, folder / WEIGHTS)
    _dump(folder / "config.json", _merge(base, shape.config))
    if shape.generation is not None:
        _dump(folder / "generation_config.json", shape.generation)
    for name in shape.bom:
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    for name, data in shape.raw.items():
        (folder / name).write_bytes(data)
    return folder
