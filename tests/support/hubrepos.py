"""Repos as the stand-in Hub serves them: a sample repo's files, a tokenizer.json of given
added tokens, an organisation of ChatML repos."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import SAMPLES
from tests.support.cachebuilder import chatml_files

# generation_config.json lists 248044 (<|endoftext|>), replies end with 248046 (<|im_end|>)
BROKEN_SAMPLE = "chatml-missing-im-end"
HEALTHY_SAMPLE = "llama3-healthy"
# the two samples as Hub repos (add_broken_and_healthy)
BROKEN_REPO = "org/chatml-broken"
HEALTHY_REPO = "org/llama3-healthy"
WEIGHTS = b"\0" * 8192  # a stand-in weights file, to prove no command downloads or moves it
CHATML_TOKENS = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046}


def repo_files(sample: str) -> dict[str, bytes]:
    """``sample_repos/<sample>``'s files by their path in the repo (without its expectations)."""
    root = SAMPLES / sample
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != "expected.txt" and "fixed" not in p.relative_to(root).parts
    }


def sample_files(sample: str, **extra: bytes) -> dict[str, bytes]:
    """A sample repo laid out as on the Hub, with a weights file (so a test can prove it stays
    put) and ``extra`` files."""
    return {**repo_files(sample), "model.safetensors": WEIGHTS, **extra}


def fixed_gen(sample: str = BROKEN_SAMPLE) -> bytes:
    """The sample's generation_config.json as ``eosfix fix`` leaves it."""
    return (SAMPLES / sample / "fixed" / "generation_config.json").read_bytes()


def add_broken_and_healthy(fake_hub: Any) -> Any:
    """BROKEN_REPO and HEALTHY_REPO on the stand-in Hub."""
    fake_hub.add_repo(BROKEN_REPO, sample_files(BROKEN_SAMPLE))
    fake_hub.add_repo(HEALTHY_REPO, sample_files(HEALTHY_SAMPLE))
    return fake_hub


def tokenizer_json(tokens: dict[str, int]) -> bytes:
    """A WordLevel tokenizer.json whose added tokens are ``tokens`` (text -> id), all special."""
    added = [
        {
            "id": i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for c, i in tokens.items()
    ]
    model = {"type": "WordLevel", "vocab": {"hello": 0, **tokens}, "unk_token": "hello"}
    return json.dumps({"version": "1.0", "added_tokens": added, "model": model}).encode()


def chatml_org(fake_hub: Any, n: int, *, healthy_every: int = 3, name: str = "org") -> list[str]:
    """n ChatML repos ``NAME/m000``... (each its own ids); every ``healthy_every``-th one stops
    correctly. Their ids, in order."""
    ids = []
    for i in range(n):
        repo_id = f"{name}/m{i:03d}"
        fake_hub.add_repo(repo_id, chatml_files(1000 + 10 * i, healthy=i % healthy_every == 0))
        ids.append(repo_id)
    return ids
