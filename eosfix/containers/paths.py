"""What a path a user gives stands for: a model folder, a GGUF file, or nothing eosfix checks.

Every path is accounted for. A model folder holds a tokenizer's or a chat template's files
(``eosfix.core.repo.MODEL_FOLDER_FILES``); a file eosfix reads or a template (what pre-commit
passes) stands for its folder; a GGUF file (a ``.gguf`` name, or the GGUF magic bytes: ollama's
blobs have no suffix) for itself. Anything else raises ``NotChecked`` naming the reason and,
where one exists, what to give instead: the model folders below a parent folder, ``eosfix
cache`` for a Hugging Face cache, ``eosfix ollama`` for an ollama model store, the folder of a
weights file.

Only reads directory listings (bounded) and the first 4 bytes of a file without a suffix
that says what it is.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from eosfix.core.errors import NotChecked
from eosfix.core.repo import (
    CHAT_TEMPLATE_JINJA,
    MODEL_FOLDER_FILES,
    READ_FILES,
    TEMPLATE_DIR,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
)

_SCAN_DEPTH = 2  # how deep model folders are looked for below a parent folder
_SCAN_ENTRIES = 5000  # directory entries read at most while looking (a huge tree stays fast)
_SHOWN = 4  # model folders named in a message


def _quote(path: Path | str) -> str:
    return shlex.quote(str(path))


GGUF_MAGIC = b"GGUF"
OLLAMA_BLOB = re.compile(r"^sha256-[0-9a-f]{64}$")


def is_gguf(path: Path) -> bool:
    """A GGUF file (checked as llama.cpp loads it), as opposed to a model folder: a ``.gguf``
    name, or a file starting with the GGUF magic bytes (an ollama blob, ``sha256-<hex>``)."""
    try:
        if path.suffix.lower() == ".gguf":
            return not path.is_dir()
        if path.suffix.lower() in (".json", ".jinja") or not path.is_file():
            return False
    except OSError:  # EMFILE, EIO: the reader that follows says so in one line
        return path.suffix.lower() == ".gguf"
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def is_ollama_blob(path: Path) -> bool:
    """A blob of ollama's store: named by the hash of its content, which manifests name."""
    return path.parent.name == "blobs" and OLLAMA_BLOB.match(path.name) is not None


def ollama_store(path: Path) -> Path | None:
    """The ollama model store (``manifests/`` and ``blobs/``) ``path`` is, is in, or holds as
    ``models/`` (``~/.ollama``); None when it is none of these."""
    resolved = path.resolve()
    for candidate in (resolved / "models", resolved, *resolved.parents):
        if (candidate / "manifests").is_dir() and (candidate / "blobs").is_dir():
            return candidate
    return None


def ollama_hint(path: Path) -> str | None:
    """For a path in (or at) an ollama model store: the ``eosfix ollama`` command."""
    store = ollama_store(path)
    if store is None:
        return None
    return f"an ollama model store: eosfix ollama --models {_quote(store)} checks every model in it"


def is_config_file(path: Path) -> bool:
    """One of a model folder's own config or template files (what pre-commit passes)."""
    return path.name in READ_FILES or path.suffix == ".jinja"


def folder_of(path: Path) -> Path:
    """The model folder a config or template file belongs to."""
    parent = path.parent
    return parent.parent if parent.name == TEMPLATE_DIR else parent


def is_model_folder(path: Path) -> bool:
    """A folder holding a tokenizer's or a chat template's files."""
    if any((path / name).exists() or (path / name).is_symlink() for name in MODEL_FOLDER_FILES):
        return True
    return (path / TEMPLATE_DIR).is_dir() and any((path / TEMPLATE_DIR).glob("*.jinja"))


def model_folders_below(folder: Path) -> list[Path]:
    """Every model folder below ``folder`` (not itself), sorted; hidden folders and the
    folders inside a model folder (its ``additional_chat_templates/``...) left out."""
    found: list[Path] = []
    for top, dirs, _ in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(top)
        if here != folder and is_model_folder(here):
            found.append(here)
            dirs.clear()
    return sorted(found)


def resolve(given: str | Path) -> Path:
    """The folder or GGUF file ``given`` stands for; ``NotChecked`` (naming the path as given)
    says why it stands for none."""
    path = Path(given)
    if not path.exists():
        reason = "a dangling symlink" if path.is_symlink() else "no such file or directory"
        raise NotChecked(reason, path=given)
    if path.is_dir():
        if not is_model_folder(path):
            raise NotChecked(not_a_model_folder(path), path=given)
        return path
    if is_gguf(path):
        return path
    if is_config_file(path):
        return folder_of(path)
    raise NotChecked(_not_a_config_file(path), path=given)


def _not_a_config_file(path: Path) -> str:
    folder = path.parent
    text = "not a model folder, one of its config or template files, or a GGUF file"
    store = ollama_hint(path)
    if store is not None:
        return f"{text}; {store}"
    if is_model_folder(folder):
        return f"{text}; eosfix reads the config files, not this one: check the folder " + (
            f"(eosfix check {_quote(folder)})"
        )
    return text


def not_a_model_folder(folder: Path) -> str:
    """Why ``folder`` is not a model folder, and where to look instead."""
    cache = _cache_hint(folder) or ollama_hint(folder)
    if cache is not None:
        return cache
    below = _walk(folder)
    ggufs = [p for p in below if p.suffix.lower() == ".gguf" and p.is_file()]
    if ggufs:
        return f"no tokenizer or template files here, but GGUF files: check each ({_some(ggufs)})"
    models = [p for p in below if p.is_dir() and is_model_folder(p)]
    if models:
        n = len(models)
        return (
            f"no tokenizer or template files here; {n} model folder{'s' * (n != 1)} below: "
            f"{_some(models)} (give them as paths)"
        )
    return f"no tokenizer or template files here ({_contents(folder)})"


def _some(paths: list[Path]) -> str:
    shown = ", ".join(_quote(p) for p in paths[:_SHOWN])
    return shown + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")


def _contents(folder: Path) -> str:
    """What is in a folder that is not a model folder, in a few words."""
    names = sorted(c.name for c in _children(folder))
    if not names:
        return "the folder is empty"
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return (
        f"only {', '.join(names[:_SHOWN])}{more}; eosfix reads {TOKENIZER_CONFIG}, "
        f"{TOKENIZER_JSON}, {CHAT_TEMPLATE_JINJA}..."
    )


@dataclass(frozen=True)
class CacheSnapshot:
    """A snapshot folder of the Hugging Face cache (``models--org--name/snapshots/<commit>``)."""

    cache_dir: Path
    repo_id: str
    commit: str

    @property
    def fix_command(self) -> str:
        """The command that fixes it safely (the link is replaced, never the shared blob)."""
        return (
            f"eosfix cache --cache-dir {_quote(self.cache_dir)} --repo {_quote(self.repo_id)} "
            f"--revision {self.commit[:12]} --fix"
        )


def cache_snapshot(folder: Path) -> CacheSnapshot | None:
    """The cache snapshot ``folder`` is, or None."""
    resolved = folder.resolve()
    repo = resolved.parent.parent
    if resolved.parent.name != "snapshots" or not _is_cache_repo(repo):
        return None
    return CacheSnapshot(repo.parent, _repo_id(repo), resolved.name)


def cache_snapshot_of(file: Path) -> CacheSnapshot | None:
    """The cache snapshot a file (a GGUF: its link is not followed) is in, or None."""
    folder = file.absolute().parent
    for parent in (folder, *folder.parents):
        if parent.parent.name == "snapshots":
            return cache_snapshot(parent)
    return None


def _repo_id(cache_repo: Path) -> str:
    return cache_repo.name.partition("--")[2].replace("--", "/")


def _cache_hint(folder: Path) -> str | None:
    """For a Hugging Face cache, or a repo folder inside one: the ``eosfix cache`` command."""
    resolved = folder.resolve()
    if resolved.parent.name == "snapshots":  # a snapshot itself: what it holds decides
        return None
    repo = next((p for p in (resolved, *resolved.parents) if _is_cache_repo(p)), None)
    if repo is not None:
        repo_id = _repo_id(repo)
        command = f"eosfix cache --cache-dir {_quote(repo.parent)} --repo {_quote(repo_id)}"
        return f"a Hugging Face cache folder of {repo_id}, not one of its snapshots: {command}"
    if any(_is_cache_repo(p) for p in _children(resolved)):
        return (
            f"a Hugging Face cache, not a model folder: eosfix cache --cache-dir {_quote(folder)}"
        )
    return None


def _is_cache_repo(path: Path) -> bool:
    """``models--org--name`` holding ``snapshots/`` (the layout huggingface_hub writes)."""
    return path.name.startswith("models--") and (path / "snapshots").is_dir()


def _children(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in itertools.islice(entries, _SCAN_ENTRIES)]
    except OSError:
        return []


def _walk(folder: Path) -> list[Path]:
    """Entries below ``folder`` down to _SCAN_DEPTH, sorted, hidden ones left out, bounded."""
    out: list[Path] = []
    level = [folder]
    for _ in range(_SCAN_DEPTH):
        children = [
            c
            for d in level
            for c in sorted(_children(d))
            if not c.name.startswith(".") and len(out) < _SCAN_ENTRIES
        ]
        out += children
        level = [c for c in children if c.is_dir() and not c.is_symlink()]
    return out
