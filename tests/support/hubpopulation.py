"""A population of Hub repos shaped like the real Hub's conversions, for the stand-in Hub.

``populate(hub, n)`` adds ``n`` repos to a ``tests.support.hubserver.FakeHub``, the same ones for
the same ``seed``:

- **families** (about 80% of the repos): a base model and 5-30 repos made from it, as the Hub
  holds them: MLX conversions (``mlx`` library, ``base_model:quantized:BASE``), GPTQ/AWQ
  quantisations, fine-tunes (``base_model:finetune:BASE``) and GGUF repos (``gguf`` library,
  ``.gguf`` files only, the Hub's ``gguf`` summary). Members share the base's tokenizer and
  template files byte for byte (tokenizer_config.json, chat_template.jinja,
  special_tokens_map.json, tokenizer.json, mostly generation_config.json: some members carry
  their own); each has its own config.json (its quantisation; two members quantised alike
  have the same one). Families of one model line share the tokenizer files across sizes.
- **one-off** repos (their own tokenizer_config.json and config.json), **base models**
  without a chat template, **tokenizer-only** repos (no config, no weights).

The files are the project's sample repos (``sample_repos/``), so every verdict kind occurs:
the seed case (an MLX conversion missing ``<|im_end|>``), healthy Llama 3, a GLM next-turn
opener, a stop id inside a turn, named templates, a VLM's ``text_config``, and a family whose
ids live only in tokenizer.json (transformers 5's layout: one more file after the analysis).
tokenizer.json and weights are kept in Git LFS (``FakeRepo.lfs``), as on the Hub.

``authors``: every repo under these namespaces (round robin), e.g. one organisation so that an
``--author`` audit covers all; by default the namespaces real conversions live under.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import ggufs
from tests.support.hubserver import FakeHub

SAMPLES = Path(__file__).resolve().parents[2] / "sample_repos"
WEIGHTS = b"\0" * 64
LFS = ("*.safetensors", "*.gguf", "*.bin", "tokenizer.json")

# (sample, model line, architecture): the chat families' files come from these samples
CHAT_LINES = (
    ("chatml-missing-im-end", "Qwen3.5", "Qwen3_5ForCausalLM"),
    ("llama3-healthy", "Llama-3.1", "LlamaForCausalLM"),
    ("glm-next-turn-opener", "GLM-4", "Glm4ForCausalLM"),
    ("stop-inside-turn", "gpt-oss", "GptOssForCausalLM"),
    ("named-templates", "Hermes-3", "LlamaForCausalLM"),
    ("end-of-conversation-only", "Phi-3.5", "Phi3ForCausalLM"),
    ("reasoning-channel", "Reasoner", "Qwen3ForCausalLM"),
    ("vlm-text-config-eos", "Qwen2.5-VL", "Qwen2_5_VLForConditionalGeneration"),
    ("ordinary-stop-id", "Tiny", "LlamaForCausalLM"),
    ("no-generation-config", "Mistral-Nemo", "MistralForCausalLM"),
    ("eos-token-variable", "Granite", "GraniteForCausalLM"),
    ("transformers5", "Qwen3", "Qwen3ForCausalLM"),  # ids only in tokenizer.json
)
BASE_LINE = ("base-model", "Mistral", "MistralForCausalLM")
SIZES = ("0.5B", "1B", "1.5B", "3B", "4B", "7B", "8B", "14B", "32B", "70B")
BASE_AUTHORS = ("Qwen", "meta-llama", "zai-org", "openai", "NousResearch", "microsoft",
                "mistralai", "ibm-granite", "HuggingFaceTB", "google")  # fmt: skip
MLX_AUTHORS = ("mlx-community", "lmstudio-community")
GGUF_AUTHORS = ("bartowski", "unsloth", "lmstudio-community", "TheBloke")
QUANT_AUTHORS = ("TheBloke", "Qwen", "RedHatAI")


@dataclass
class Spec:
    """One repo to add: its files and what the listing says of it."""

    repo_id: str
    files: dict[str, bytes]
    tags: list[str] = field(default_factory=list)
    library: str | None = "transformers"
    pipeline: str | None = "text-generation"
    weight: float = 1.0  # its share of downloads
    gguf: dict[str, Any] | None = None


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def _sample(name: str) -> dict[str, bytes]:
    """A sample repo's files (not expected.txt, not the fixed/ copy)."""
    if name == "transformers5":
        return _transformers5()
    root = SAMPLES / name
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "expected.txt" and "fixed" not in p.relative_to(root).parts
    }


def _transformers5() -> dict[str, bytes]:
    """A ChatML repo as transformers 5 saves it: no ``added_tokens_decoder`` in
    tokenizer_config.json, the ids only in tokenizer.json."""
    files = _sample("chatml-missing-im-end")
    tok = json.loads(files["tokenizer_config.json"])
    decoder = tok.pop("added_tokens_decoder")
    files["tokenizer_config.json"] = _dump(tok)
    added = [{"id": int(i), **v} for i, v in decoder.items()]
    vocab = {chr(c): c - 33 for c in range(33, 127)}
    model = {"type": "BPE", "vocab": vocab, "merges": []}
    files["tokenizer.json"] = _dump({"version": "1.0", "added_tokens": added, "model": model})
    return files


def _fixed_gen(sample: str) -> bytes | None:
    path = SAMPLES / sample / "fixed" / "generation_config.json"
    return path.read_bytes() if path.is_file() else None


def _config(files: dict[str, bytes], arch: str, line: str, size: str) -> dict[str, Any]:
    """The base's config.json: the sample's, or one made from its generation_config.json's
    eos when the sample has none, with this size's dimensions."""
    if "config.json" in files:
        config = json.loads(files["config.json"])
    else:
        gen = json.loads(files.get("generation_config.json", b"{}"))
        config = {"eos_token_id": gen["eos_token_id"]} if "eos_token_id" in gen else {}
    config.setdefault("architectures", [arch])
    config.setdefault("model_type", line.split("-")[0].lower().replace(".", "_"))
    config["hidden_size"] = 256 * (SIZES.index(size) + 2)
    config["num_hidden_layers"] = 8 + 2 * SIZES.index(size)
    return config


def _special_tokens_map(files: dict[str, bytes]) -> bytes | None:
    tok = json.loads(files["tokenizer_config.json"])
    found = {k: tok[k] for k in ("bos_token", "eos_token", "pad_token") if tok.get(k)}
    return _dump(found) if found else None


def _gguf_file(arch: str, quant: int) -> bytes:
    pairs = ggufs.chatml_pairs(
        **{"general.architecture": ggufs.str_kv("general.architecture", arch.lower())}
    )
    return ggufs.raw_gguf([*pairs, ggufs.u32_kv("general.file_type", quant)])


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def take(self, author: str, name: str) -> str:
        repo_id, n = f"{author}/{name}", 1
        while repo_id in self.used:
            n += 1
            repo_id = f"{author}/{name}-v{n}"
        self.used.add(repo_id)
        return repo_id


def _family(rng: random.Random, names: _Names, line: tuple[str, str, str], size: str,
            own_tokenizer: bool, members: int, pick: Any) -> list[Spec]:  # fmt: skip
    """A base model and ``members`` repos made from it."""
    sample, model_line, arch = line
    files = _sample(sample)
    base_name = f"{model_line}-{size}" + ("" if sample == "base-model" else "-Instruct")
    if own_tokenizer:  # this size's tokenizer files differ from the other sizes' (a new line)
        tok = json.loads(files["tokenizer_config.json"])
        tok["model_max_length"] = 4096 * (SIZES.index(size) + 1)
        files["tokenizer_config.json"] = _dump(tok)
    special = _special_tokens_map(files) if rng.random() < 0.5 else None
    if special is not None:
        files["special_tokens_map.json"] = special
    config = _config(files, arch, model_line, size)
    files["config.json"] = _dump(config)
    chat = "chat_template.jinja" in files or b"chat_template" in files["tokenizer_config.json"]
    base_id = names.take(pick(BASE_AUTHORS), base_name)
    common = ["safetensors", config["model_type"], *(["conversational"] if chat else [])]
    out = [Spec(base_id, {**files, "model.safetensors": WEIGHTS}, common, weight=8.0)]
    fixed = _fixed_gen(sample)
    for _ in range(members):
        kind = rng.choices(("mlx", "gguf", "finetune", "quant"), (60, 15, 15, 10))[0]
        member = dict(files)
        if fixed is not None and rng.random() < 0.1:  # someone fixed their copy
            member["generation_config.json"] = fixed
        relation = "finetune" if kind == "finetune" else "quantized"
        tags = [*common, f"base_model:{base_id}", f"base_model:{relation}:{base_id}"]
        if kind == "mlx":
            bits, group = rng.choice((3, 4, 4, 4, 5, 6, 8, 8)), rng.choice((32, 64, 64, 128))
            quant = {"group_size": group, "bits": bits}
            member["config.json"] = _dump({**config, "quantization": quant,
                                           "quantization_config": quant})  # fmt: skip
            name = f"{base_name}-{bits}bit" + ("" if group == 64 else f"-g{group}")
            out.append(Spec(names.take(pick(MLX_AUTHORS), name), {**member, "model.safetensors":
                            WEIGHTS}, ["mlx", *tags], library="mlx"))  # fmt: skip
        elif kind == "quant":
            method = rng.choice(("gptq", "awq"))
            quant = {"bits": 4, "quant_method": method, "group_size": 128}
            member["config.json"] = _dump({**config, "quantization_config": quant})
            name = f"{base_name}-{method.upper()}"
            out.append(Spec(names.take(pick(QUANT_AUTHORS), name), {**member, "model.safetensors":
                            WEIGHTS}, [method, "4-bit", *tags]))  # fmt: skip
        elif kind == "finetune":
            member["config.json"] = _dump(
                {
                    **config,
                    "_name_or_path": base_id,
                    "torch_dtype": rng.choice(("bfloat16", "float16")),
                }
            )
            name = (
                f"{base_name.removesuffix('-Instruct')}-{rng.choice(('chat', 'sft', 'dpo', 'rp'))}"
            )
            out.append(Spec(names.take(pick((f"user{rng.randrange(3000):04d}",)), name), {**member,
                            "model.safetensors": WEIGHTS}, tags, weight=0.5))  # fmt: skip
        else:
            quants = rng.sample((2, 7, 15, 17, 18), rng.randint(2, 4))
            gguf_files = {f"{base_name}-Q{q}.gguf": _gguf_file(arch, q) for q in quants}
            template = member.get("chat_template.jinja", b"").decode()
            summary = {"total": 10**9 * (SIZES.index(size) + 1), "architecture": arch.lower(),
                       "context_length": 32768, "chat_template": template}  # fmt: skip
            out.append(Spec(names.take(pick(GGUF_AUTHORS), f"{base_name}-GGUF"),
                            {**gguf_files, "README.md": f"# {base_name} GGUF\n".encode()},
                            ["gguf", *tags], library="gguf", gguf=summary))  # fmt: skip
    return out


def _one_off(rng: random.Random, names: _Names, pick: Any, i: int) -> Spec:
    sample, model_line, arch = rng.choice(CHAT_LINES)
    files = _sample(sample)
    tok = json.loads(files["tokenizer_config.json"])
    tok["model_max_length"] = 1000 + i  # its own tokenizer_config.json
    files["tokenizer_config.json"] = _dump(tok)
    files["config.json"] = _dump(_config(files, arch, model_line, rng.choice(SIZES)))
    name = f"{model_line}-custom-{i}"
    tags = ["safetensors", "conversational"]
    return Spec(names.take(pick((f"user{rng.randrange(3000):04d}",)), name),
                {**files, "model.safetensors": WEIGHTS}, tags, weight=0.3)  # fmt: skip


def _tokenizer_only(rng: random.Random, names: _Names, pick: Any, i: int) -> Spec:
    sample, model_line, _ = rng.choice(CHAT_LINES[:3])
    keep = ("tokenizer_config.json", "chat_template.jinja", "tokenizer.json")
    files = {k: v for k, v in _sample(sample).items() if k in keep}
    return Spec(names.take(pick(("Xenova", f"user{i:04d}")), f"{model_line}-tokenizer-{i}"),
                files, ["transformers.js"], pipeline=None, weight=0.2)  # fmt: skip


def population(n: int, *, seed: int = 0, authors: tuple[str, ...] | None = None) -> list[Spec]:
    """``n`` repos (see the module); the same for the same arguments."""
    rng = random.Random(seed)
    names = _Names()
    turn = iter(range(1 << 62))

    def pick(choices: tuple[str, ...]) -> str:
        if authors:
            return authors[next(turn) % len(authors)]
        return rng.choice(choices)

    specs: list[Spec] = []
    singles = max(1, n // 5)  # one-offs, base models, tokenizer-only repos
    lines = list(CHAT_LINES)
    while len(specs) < n - singles:
        line = BASE_LINE if rng.random() < 0.08 else rng.choice(lines)
        size = rng.choice(SIZES)
        family = _family(rng, names, line, size, rng.random() < 0.5, rng.randint(5, 30), pick)
        specs.extend(family[: n - singles - len(specs)])
    i = 0
    while len(specs) < n:
        i += 1
        roll = rng.random()
        if roll < 0.7:
            specs.append(_one_off(rng, names, pick, i))
        elif roll < 0.85:
            files = _sample("base-model")
            files["config.json"] = _dump({**json.loads(files["config.json"]), "hidden_size": i})
            specs.append(Spec(names.take(pick(BASE_AUTHORS), f"Base-{i}"),
                              {**files, "model.safetensors": WEIGHTS}, ["safetensors"]))  # fmt: skip
        else:
            specs.append(_tokenizer_only(rng, names, pick, i))
    return specs


def populate(hub: FakeHub, n: int, *, seed: int = 0, authors: tuple[str, ...] | None = None
             ) -> list[str]:  # fmt: skip
    """Add ``population(n, seed=..., authors=...)`` to ``hub``; returns the repo ids. Downloads
    fall off as a power of the rank (a few repos have most), likes with them; creation dates
    follow the order the repos were made in."""
    specs = population(n, seed=seed, authors=authors)
    rng = random.Random(seed + 1)
    order = sorted(range(len(specs)), key=lambda k: -specs[k].weight * rng.random())
    rank = {k: r for r, k in enumerate(order)}
    for k, spec in enumerate(specs):
        downloads = int(2_000_000 / (rank[k] + 1) ** 1.1)
        readme = {"README.md": f"# {spec.repo_id}\n".encode()}  # a commit of its own
        hub.add_repo(
            spec.repo_id,
            {**readme, **spec.files},
            tags=spec.tags,
            downloads=downloads,
            likes=downloads // 500,
            trending_score=downloads // 10_000,
            pipeline_tag=spec.pipeline,
            library_name=spec.library,
            gguf=spec.gguf,
            lfs=LFS,
            created_at=f"2025-{1 + k * 12 // len(specs):02d}-01T00:00:{k % 60:02d}.000Z",
        )
    return [s.repo_id for s in specs]
