"""What a string a user gives names on the Hub: a model repo, or one of its GGUF files.

``hub_repo`` reads ``org/name``, ``hf://org/name``, ollama's ``hf.co/org/name[:TAG]``
(``huggingface.co/...`` and their ``https://`` forms too) and ``org/name/FILE.gguf``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from eosfix.core.errors import NotChecked
from eosfix.core.hubid import is_hub_id

HUB_PREFIX = "hf://"  # huggingface_hub's HfFileSystem spelling: always the Hub, never a path
OLLAMA_HOSTS = ("hf.co/", "huggingface.co/")  # ollama's spelling: hf.co/{user}/{repo}:{tag}
_URL = re.compile(r"^https?://(?:www\.)?")


@dataclass(frozen=True)
class HubRepo:
    """A Hub model repo named where a path goes (``org/name``, ``hf://org/name``), or one of
    its GGUF files: ``hf.co/org/name[:TAG]`` (ollama's spelling; ``huggingface.co/...`` and
    their ``https://`` forms too: ``tag`` a quant label or a file name) or
    ``org/name/FILE.gguf`` (``file``). ``gguf``: checked by its GGUF files' headers."""

    repo_id: str
    tag: str | None = None
    file: str | None = None
    gguf: bool = False
    given: str = ""  # as the user wrote it, when that is not the repo id
    prefixed: bool = False  # given as ``hf://...`` or ``hf.co/...``: never a local path

    def __str__(self) -> str:
        return self.given or self.repo_id

    @property
    def not_local(self) -> str:
        """What an error about it adds when ``org/name`` was taken for a Hub id because no
        local path has that name (a mistyped path looks the same); "" for ``hf://``."""
        return "" if self.prefixed else f"; no local folder or file {self} exists either"

    @property
    def problem(self) -> NotChecked | None:
        """Why it cannot be a Hub repo (``hf://`` followed by no repo id), or None."""
        if is_hub_id(self.repo_id):
            return None
        shown = self.given or HUB_PREFIX + self.repo_id
        return NotChecked("not a Hub repo id (hf://org/name)", path=shown)


def _ollama_spelling(given: str) -> HubRepo | None:
    """``hf.co/org/name[:TAG]``, ``huggingface.co/...`` (with or without ``https://``)."""
    rest = _URL.sub("", given)
    host = next((h for h in OLLAMA_HOSTS if rest.startswith(h)), None)
    if host is None or (rest == given and Path(given).exists()):
        return None
    rest = rest.removeprefix(host).rstrip("/")
    repo, tag = rest, None
    if ":" in rest.rpartition("/")[2]:
        repo, _, tag = rest.rpartition(":")
    parts = repo.split("/")
    if len(parts) > 2 and parts[-1].endswith(".gguf"):  # a file's page URL: .../blob/main/x.gguf
        return HubRepo("/".join(parts[:2]), file=parts[-1], gguf=True, given=given, prefixed=True)
    return HubRepo(repo, tag=tag or None, gguf=True, given=given, prefixed=True)


def hub_repo(given: str) -> HubRepo | None:
    """The Hub repo ``given`` names, or None when it names a local path: ``hf://org/name``
    (and ``hf://org/name/FILE.gguf``) always; ``hf.co/org/name:TAG`` and
    ``huggingface.co/...`` unless a local path has that name; ``org/name`` and
    ``org/name/FILE.gguf`` when nothing of that name exists here (a local folder wins, and
    ``shadows_hub_id`` says so). After ``hf://`` anything is taken: ``HubRepo.problem`` says
    when it is no repo id."""
    if given.startswith(HUB_PREFIX):
        rest = given.removeprefix(HUB_PREFIX)
        repo, _, file = _split_file(rest)
        return HubRepo(
            repo, file=file or None, gguf=bool(file), given=given if file else "", prefixed=True
        )
    ollama = _ollama_spelling(given)
    if ollama is not None:
        return ollama
    path = Path(given)
    if path.exists() or path.is_symlink():
        return None
    if is_hub_id(given):
        return HubRepo(given)
    repo, _, file = _split_file(given)
    if file and is_hub_id(repo):
        return HubRepo(repo, file=file, gguf=True, given=given)
    return None


def _split_file(text: str) -> tuple[str, str, str]:
    """``org/name/dir/x.gguf`` -> (``org/name``, ``/``, ``dir/x.gguf``); no GGUF path:
    (text, "", "")."""
    parts = text.split("/")
    if len(parts) > 2 and parts[-1].endswith(".gguf"):
        return "/".join(parts[:2]), "/", "/".join(parts[2:])
    return text, "", ""


# What a folder brought from the Hub holds: ``hf download --local-dir`` metadata (today's and
# huggingface_hub < 0.23's), or a git clone of the repo.
_FROM_HUB = (".cache/huggingface", ".huggingface", ".git")


def shadows_hub_id(given: str) -> bool:
    """``given`` is a local folder with a Hub repo id's name that came from the Hub (``hf
    download --local-dir``, ``git clone``): the one a user may have meant instead is the
    Hub's. Other folders with such names (``models/llama``) shadow nothing worth a word."""
    path = Path(given)
    return is_hub_id(given) and path.is_dir() and any((path / m).exists() for m in _FROM_HUB)
