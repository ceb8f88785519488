"""What a string a user gives stands for: one grammar for every command, the page and the bot.

``parse(text)`` turns what a user typed into a typed, frozen target:

- ``LocalFolder``: a model folder, a folder of GGUF files (``eosfix.targets.open`` expands
  it), or a config or template file (what pre-commit passes), which stands for its folder;
- ``LocalGguf``: a GGUF file (a later shard of a split stands for its first);
- ``OllamaTarget``: a model of an ollama store, named by its manifest
  (``STORE/manifests/registry.ollama.ai/library/NAME/TAG``);
- ``HubTarget``: a Hub model repo in every spelling people paste: ``org/name``,
  ``hf://org/name``, ``hf.co/org/name``, ``huggingface.co/org/name`` and their ``https://``
  (and ``www.``) forms, ``.../tree/REV``, ``.../blob/REV/FILE``, ``.../resolve/REV/FILE``,
  ``org/name@REV``, ``org/name:QUANT`` (ollama's tag: a quant label or a file's name) and
  ``org/name/FILE.gguf``. The revision, file and quant are kept as given; whether the repo is
  read as a folder or by its GGUF headers is decided by what the repo holds
  (``eosfix.targets.hub``), never by how it was spelled.

Whitespace around the text is dropped; an empty text, a repo id the Hub would refuse, a URL of
another site are refused with one ``NotChecked`` naming what was typed. ``local=False`` (the
page, the bot, ids from a listing) never reads the filesystem and yields Hub targets only; a
local path wins over a Hub id of the same name (``shadows_hub_id`` says when that matters),
and ``org/name`` that names no local path is a Hub id (a mistyped path looks the same:
``HubTarget.not_local`` says so in an error).

Reads the filesystem only for a local text: whether the path exists, and what
``eosfix.containers.paths`` asks of it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from eosfix.containers.paths import (
    folder_of,
    is_config_file,
    is_gguf,
    resolve,
)
from eosfix.core.errors import EosfixError, NotChecked
from eosfix.core.hubid import is_hub_id

HUB_PREFIX = "hf://"  # huggingface_hub's HfFileSystem spelling: always the Hub, never a path
HOSTS = ("huggingface.co", "hf.co")  # the Hub's hosts, as URLs and as ollama names them
SPELLINGS = "org/name, hf.co/org/name:QUANT, https://huggingface.co/org/name..."
_URL = re.compile(r"^(?:(?P<scheme>https?)://)?(?:www\.)?(?P<host>[^/]+)/(?P<rest>.*)$")
# A quant label or a file name after ``org/name:`` (Q4_K_M, IQ2_XS, x.gguf)
_TAG = re.compile(r"[A-Za-z0-9](?:[\w.-]{0,126}[A-Za-z0-9])?")
_REV = re.compile(r"[\w./-]{1,256}")  # a branch, a tag, refs/pr/1 or a commit
_FILE_ROUTES = ("blob", "resolve")  # .../blob/REV/FILE, .../resolve/REV/FILE
_OTHER_KINDS = ("datasets", "spaces")


@dataclass(frozen=True)
class LocalFolder:
    """A folder given (or the folder of a config or template file given)."""

    given: str
    path: Path


@dataclass(frozen=True)
class LocalGguf:
    """A GGUF file (a split's first shard)."""

    given: str
    path: Path


@dataclass(frozen=True)
class OllamaTarget:
    """One model of an ollama store: the store (``manifests/`` and ``blobs/``) and the
    manifest that names its layers."""

    given: str
    store: Path
    manifest: Path


@dataclass(frozen=True)
class HubTarget:
    """A Hub model repo and what the user named in it, as given: the revision (None: main), a
    file (``FILE.gguf``, or a file of the folder), ollama's tag (``quant``). ``given``: the
    text as typed; ``local_name``: ``org/name`` taken for a Hub id because no local path has
    that name."""

    repo_id: str
    revision: str | None = None
    file: str | None = None
    quant: str | None = None
    given: str = ""
    local_name: bool = False

    def __str__(self) -> str:
        return self.given or self.repo_id

    @property
    def gguf_file(self) -> str | None:
        """The GGUF file named (a file of the folder names its repo, like a config file)."""
        return self.file if self.file is not None and self.file.endswith(".gguf") else None

    @property
    def picks_gguf(self) -> bool:
        """A GGUF file named, by its path or by ollama's tag."""
        return self.gguf_file is not None or self.quant is not None

    @property
    def not_local(self) -> str:
        """What an error about it adds when ``org/name`` was taken for a Hub id because no
        local path has that name (a mistyped path looks the same); "" otherwise."""
        return f"; no local folder or file {self} exists either" if self.local_name else ""


Target = LocalFolder | LocalGguf | OllamaTarget | HubTarget


def refused(given: str, why: str) -> NotChecked:
    """The one error of a text that names nothing eosfix checks."""
    return NotChecked(why, path=given if given else shlex.quote(given))


def parse(text: str, *, local: bool = True) -> Target:
    """The target ``text`` stands for (see the module); ``NotChecked`` naming ``text`` when
    it stands for none. ``local=False``: a Hub repo only, the filesystem never read."""
    if not local:
        return parse_hub(text)
    given = text if os.path.lexists(text) else text.strip()
    if not given:
        raise refused(given, "empty: give a path or a Hub repo id")
    if os.path.lexists(given) and not _only_the_hubs(given):
        return _local(given)  # a local path wins over a Hub id of the same name
    hub, spelled = _hub(given)
    if hub is None:
        return _local(given)  # says why: no such file or directory...
    if spelled == _BARE:  # org/name, and no such path here
        return dataclasses.replace(hub, local_name=True)
    return hub


def parse_hub(text: str) -> HubTarget:
    """``parse(text, local=False)``: the Hub repo ``text`` spells, the filesystem never read;
    ``NotChecked`` naming ``text`` for anything else."""
    given = text.strip()
    if not given:
        raise refused(given, "empty: give a Hub repo id")
    hub, _ = _hub(given)
    return hub if hub is not None else _repo_path(given, given, routes=False)  # raises why


def _local(given: str) -> Target:
    path = Path(given)
    if path.is_dir():
        return LocalFolder(given, path)
    if is_gguf(path):
        from eosfix.containers.gguf.read import first_shard  # only a GGUF needs its reader

        try:
            first = first_shard(path)
        except EosfixError:
            first = path  # the missing first shard is said when it is read
        return LocalGguf(given, first)
    if is_config_file(path) and os.path.lexists(path):
        return LocalFolder(given, folder_of(path))
    store = _ollama_store_of(path)
    if store is not None:
        return OllamaTarget(given, store, path)
    resolve(given)  # raises NotChecked: why the path stands for nothing eosfix checks
    return LocalFolder(given, path)


def _ollama_store_of(path: Path) -> Path | None:
    """The ollama store whose ``manifests/`` holds the file ``path``, or None."""
    if not path.is_file():
        return None
    for parent in path.absolute().parents:
        if parent.name == "manifests":
            store = parent.parent
            return store if (store / "blobs").is_dir() else None
    return None


def spelled_for_the_hub(given: str) -> bool:
    """``hf://...``, or a Hub URL with or without its scheme (``hf.co/...``)."""
    m = _URL.match(given.strip())
    return given.strip().startswith(HUB_PREFIX) or (m is not None and m["host"].lower() in HOSTS)


def _only_the_hubs(given: str) -> bool:
    """``hf://...`` or a URL with its scheme: never a local path."""
    m = _URL.match(given)
    return given.startswith(HUB_PREFIX) or (m is not None and m["scheme"] is not None)


# How surely a text spells a Hub repo: only ever the Hub's (``hf://``, a URL with its scheme);
# a host without a scheme (``hf.co/org/name``: a local path of that name wins); a bare
# ``org/name`` (a local path wins, and an error says no local path has the name either).
_SURE, _HOST, _BARE = "sure", "host", "bare"


def _hub(given: str) -> tuple[HubTarget | None, str]:
    """(the Hub target ``given`` spells, or None; how surely: ``_SURE``, ``_HOST``, ``_BARE``).
    ``NotChecked`` for a spelling that can only be the Hub's yet names no repo (``hf://not a
    repo``, ``hf.co/org``) or another site's URL."""
    if given.startswith(HUB_PREFIX):
        return _repo_path(given, given.removeprefix(HUB_PREFIX), routes=False), _SURE
    m = _URL.match(given)
    if m is not None and m["host"].lower() in HOSTS:
        return _repo_path(given, m["rest"], routes=True), _SURE if m["scheme"] else _HOST
    if m is not None and m["scheme"]:
        raise refused(given, f"not a Hub repo id or URL: another site ({SPELLINGS})")
    try:
        return _repo_path(given, given, routes=False), _BARE
    except NotChecked:
        return None, _BARE


def _repo_path(given: str, rest: str, *, routes: bool) -> HubTarget:
    """``org/name[@REV][:QUANT]``, ``org/name[@REV]/FILE`` and, after a host (``routes``),
    ``org/name/tree/REV``, ``org/name/blob/REV/FILE``, ``org/name/resolve/REV/FILE``."""
    if routes:  # a URL's query and fragment (?download=true) say nothing of the repo
        rest = rest.split("#", 1)[0].split("?", 1)[0]
    rest = rest.rstrip("/")
    parts = rest.split("/")
    if routes and parts and parts[0] in _OTHER_KINDS:
        raise refused(given, f"a {parts[0].removesuffix('s')}, not a model repo")
    if routes and len(parts) > 2 and parts[0] == "models":  # huggingface.co/models/org/name
        parts = parts[1:]
    if len(parts) < 2:
        raise refused(given, f"not a Hub repo id or URL ({SPELLINGS})")
    org, name, *path = parts
    name, quant = _split(name, ":")
    name, revision = _split(name, "@")
    file = "/".join(path) or None
    if routes and len(path) >= 2 and path[0] in ("tree", *_FILE_ROUTES):
        revision, file = unquote(path[1]), "/".join(path[2:]) or None
        if path[0] in _FILE_ROUTES and file is None:
            raise refused(given, f"names no file after /{path[0]}/{path[1]}")
    elif file is not None:
        file, quant = _split(file, ":") if quant is None else (file, quant)
    repo_id = f"{org}/{name}"
    if not is_hub_id(repo_id):
        raise refused(given, f"not a Hub repo id or URL ({SPELLINGS})")
    if (
        file is not None
        and not file.endswith(".gguf")
        and not routes
        and not given.startswith(HUB_PREFIX)
    ):
        raise refused(given, f"not a Hub repo id or URL ({SPELLINGS})")
    if quant is not None and _TAG.fullmatch(quant) is None:
        raise refused(given, f"not a quant label or file name after ':': {quant!r}")
    if revision is not None and _REV.fullmatch(revision) is None:
        raise refused(given, f"not a revision after '@': {revision!r}")
    shown = given if given != repo_id else ""
    return HubTarget(repo_id, revision, file, quant, shown)


def _split(text: str, mark: str) -> tuple[str, str | None]:
    head, sep, tail = text.partition(mark)
    return (head, unquote(tail)) if sep else (text, None)


# What a folder brought from the Hub holds: ``hf download --local-dir`` metadata (today's and
# huggingface_hub < 0.23's), or a git clone of the repo.
_FROM_HUB = (".cache/huggingface", ".huggingface", ".git")


def shadows_hub_id(given: str) -> bool:
    """``given`` is a local folder with a Hub repo id's name that came from the Hub (``hf
    download --local-dir``, ``git clone``): the one a user may have meant instead is the
    Hub's. Other folders with such names (``models/llama``) shadow nothing worth a word."""
    path = Path(given)
    return is_hub_id(given) and path.is_dir() and any((path / m).exists() for m in _FROM_HUB)
