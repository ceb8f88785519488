"""Build a Hugging Face hub cache with the real on-disk layout, for tests and benchmarks.

The layout is what ``hf_hub_download`` writes (huggingface_hub 2.x, see
shared/notes/transformers-and-hub.md §5.2)::

    <cache>/models--org--name/
        blobs/<git blob sha1>                    the content, named by its git sha1
        snapshots/<commit>/<path> -> ../../blobs/<sha1>   (relative; nested paths get ../../../)
        refs/main                                the commit sha, no trailing newline
        .no_exist/<commit>/<path>                empty marker: "not in this commit"

Identical contents share one blob, in one revision or across revisions of a repo.
Importable from tests (``tests/`` is on sys.path) and from ``benchmarks/bench_cache.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

FileMap = Mapping[str, "bytes | str"]


def git_sha1(data: bytes) -> str:
    """The git blob sha1 of ``data``: the etag the Hub gives a non-LFS file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def repo_folder_name(repo_id: str, repo_type: str = "model") -> str:
    return f"{repo_type}s--" + repo_id.replace("/", "--")


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


@dataclass
class CacheBuilder:
    """Writes repos and revisions into ``root`` (the hub cache dir, as ``HF_HUB_CACHE``)."""

    root: Path
    _counter: int = field(default=0, repr=False)

    def repo_dir(self, repo_id: str, repo_type: str = "model") -> Path:
        return self.root / repo_folder_name(repo_id, repo_type)

    def add_revision(
        self,
        repo_id: str,
        files: FileMap,
        *,
        refs: Iterable[str] = ("main",),
        no_exist: Iterable[str] = (),
        repo_type: str = "model",
    ) -> str:
        """Add one snapshot of ``files``; point each of ``refs`` at it. Returns the commit sha."""
        data = {path: _as_bytes(content) for path, content in files.items()}
        self._counter += 1
        h = hashlib.sha1(f"{repo_id}\0{self._counter}\0".encode())
        for path in sorted(data):
            h.update(f"{path}\0{git_sha1(data[path])}\n".encode())
        commit = h.hexdigest()
        repo = self.repo_dir(repo_id, repo_type)
        blobs = repo / "blobs"
        snapshot = repo / "snapshots" / commit
        blobs.mkdir(parents=True, exist_ok=True)
        for path, content in data.items():
            sha = git_sha1(content)
            blob = blobs / sha
            if not blob.exists():
                blob.write_bytes(content)
            link = snapshot / path
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(blob, link.parent), link)
        snapshot.mkdir(parents=True, exist_ok=True)
        for ref in refs:
            self.set_ref(repo_id, ref, commit, repo_type=repo_type)
        for path in no_exist:
            marker = repo / ".no_exist" / commit / path
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        return commit

    def set_ref(self, repo_id: str, ref: str, commit: str, *, repo_type: str = "model") -> None:
        path = self.repo_dir(repo_id, repo_type) / "refs" / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(commit)  # huggingface_hub writes the bare sha, no newline

    def snapshot(self, repo_id: str, commit: str, repo_type: str = "model") -> Path:
        return self.repo_dir(repo_id, repo_type) / "snapshots" / commit


def hash_blobs(root: Path) -> dict[str, str]:
    """sha256 of every file under any ``blobs/`` folder of the cache: compare before/after."""
    out = {}
    for blob in sorted(root.glob("*/blobs/**/*")):
        if blob.is_file() and not blob.is_symlink():
            out[str(blob.relative_to(root))] = hashlib.sha256(blob.read_bytes()).hexdigest()
    return out


# --- a ChatML-style model repo, with its own token ids ----------------------------------------

CHATML_TEMPLATE = (
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}"
)


def _added(token_id: int, content: str) -> tuple[str, dict[str, object]]:
    return str(token_id), {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": True,
    }


def chatml_files(
    base: int = 151643,
    *,
    healthy: bool = False,
    generation_config: bool = True,
    template_file: bool = True,
    readme: str = "A test model.\n",
) -> dict[str, bytes | str]:
    """A ChatML repo: <|endoftext|> = base, <|im_start|> = base+1, <|im_end|> = base+2.

    ``healthy=False`` (the common bug): generation_config.json stops only on <|endoftext|>,
    so replies never stop on <|im_end|>. ``generation_config=False`` leaves the file out
    (eosfix creates it). ``template_file=False`` puts the template in tokenizer_config.json.
    """
    endoftext, im_start, im_end = base, base + 1, base + 2
    tok: dict[str, object] = {
        "added_tokens_decoder": dict(
            [
                _added(endoftext, "<|endoftext|>"),
                _added(im_start, "<|im_start|>"),
                _added(im_end, "<|im_end|>"),
            ]
        ),
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 32768,
        "tokenizer_class": "Qwen2Tokenizer",
    }
    if not template_file:
        tok["chat_template"] = CHATML_TEMPLATE
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "bos_token_id": endoftext,
        "eos_token_id": endoftext,
        "model_type": "qwen2",
        "vocab_size": base + 3,
    }
    files: dict[str, bytes | str] = {
        "config.json": json.dumps(config, indent=2) + "\n",
        "tokenizer_config.json": json.dumps(tok, indent=2) + "\n",
        "README.md": readme,
        "model.safetensors": b"\0" * 64,
    }
    if template_file:
        files["chat_template.jinja"] = CHATML_TEMPLATE
    if generation_config:
        eos: object = [endoftext, im_end] if healthy else endoftext
        gen = {
            "bos_token_id": endoftext,
            "do_sample": True,
            "eos_token_id": eos,
            "temperature": 0.7,
            "transformers_version": "4.57.1",
        }
        files["generation_config.json"] = json.dumps(gen, indent=2) + "\n"
    return files


def base_model_files() -> dict[str, bytes | str]:
    """A base model: no chat template at all (eosfix has nothing to check)."""
    return {
        "config.json": '{\n  "eos_token_id": 2,\n  "model_type": "llama"\n}\n',
        "tokenizer_config.json": '{\n  "eos_token": "</s>"\n}\n',
        "generation_config.json": '{\n  "eos_token_id": 2\n}\n',
    }
