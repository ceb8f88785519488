"""The one result of every container: ``RepoResult``, with typed origin fields.

What was checked (a folder, a GGUF file, an ollama model) and what came of it is the same
for every container; where it came from is said by typed fields, never guessed from which keys
a dict holds: ``hub`` (a Hub repo: its id, the revision asked, the commit read), ``gguf`` (a
GGUF file read on the Hub: its group of alike files), ``ollama_hub`` (what ``ollama run
hf.co/...`` gets for it, and the params file a pull request would write), ``cache`` (a
snapshot of the Hugging Face cache), ``ollama`` (a model of ollama's store: what ollama makes
of it), ``write`` and ``notes`` (what ``fix`` of a GGUF wrote, and what a write says of
itself). Renderers turn these into the keys of ``--format json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from eosfix.decide.check import Status

if TYPE_CHECKING:
    from eosfix.containers.gguf.hubparams import OllamaParams, ParamsPlan
    from eosfix.containers.gguf.write import WriteResult
    from eosfix.containers.ollama.container import OllamaVerdict
    from eosfix.containers.paths import CacheSnapshot
    from eosfix.core.errors import EosfixError
    from eosfix.decide.check import RepoCheck
    from eosfix.decide.runtime_table import RuntimeTable


class Change(Protocol):
    """One planned edit of a container (a file's new text, a GGUF key's new value)."""

    @property
    def file(self) -> str: ...  # the file (or GGUF key) it changes

    @property
    def summary(self) -> str: ...  # ``eos_token_id -> [2, 7]``

    @property
    def how(self) -> str: ...  # how it is written, when that is worth saying

    def diff(self, name: str = "") -> str: ...

    def as_json(self) -> dict[str, Any]: ...


NOUNS = {"folder": "repo", "gguf": "GGUF file", "ollama": "ollama model"}


class HubOrigin(NamedTuple):
    """A Hub repo checked by id: its id, the revision asked (a branch, a tag or a commit) and
    the commit read (None when the Hub named none: the repo could not be read)."""

    repo_id: str
    revision: str = "main"
    sha: str | None = None


class RemoteGguf(NamedTuple):
    """One GGUF file of a Hub repo, read by its header: what reading it cost, and why it could
    not be read (``error``)."""

    path: str  # in the repo
    quant: str | None
    size: int | None
    requests: int
    bytes_read: int
    metadata_bytes: int | None  # where its key/value section ends (None: not read)
    shards: tuple[str, ...] = ()  # a split's shards, the first first
    error: str | None = None


class GgufGroup(NamedTuple):
    """A GGUF file read on the Hub and the files it stands for: ``files`` (the first is
    ``file``) share their stop keys; a group that differs from the repo's biggest one names
    it (``differs_from``) and the keys (``differs_in``); ``default_for``: whose default
    download it is (``llama.cpp``, ``ollama``). ``read`` False: a file that could not be read
    (its own error result, alone)."""

    file: str
    files: tuple[RemoteGguf, ...]
    quant: str | None = None
    differs_from: str | None = None
    differs_in: tuple[str, ...] = ()
    default_for: tuple[str, ...] = ()
    read: bool = True

    @property
    def alike(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files[1:])


class OllamaHub(NamedTuple):
    """What ``ollama run hf.co/...`` gets for a GGUF on the Hub (``params``: the repo's params
    file, or the Hub's conversion of the chat template) and the params file a pull request
    would write (``plan``: None when the stop list needs no change); ``control`` and
    ``removed_control``: the strings added or taken out that are a control token's text, which
    ollama 0.30 and later never match as a stop string."""

    params: OllamaParams
    plan: ParamsPlan | None = None
    control: tuple[str, ...] = ()
    removed_control: tuple[str, ...] = ()
    file: str = "params"  # the repo file the Hub reads ollama's parameters from


class RepoResult(NamedTuple):
    """One repo (or GGUF file) checked or fixed.

    ``check`` is the repo as it is now: after ``fix`` wrote files, it is read again from disk,
    and ``before`` is the check that planned the writes (None when nothing was written).
    ``patches`` are the edits planned (``check``, ``fix --diff``) or written (``fix``): file
    patches for a folder, key edits for a GGUF. ``runtimes``: every runtime's verdict, now and
    after the planned fix (None: no template, nothing to compare). Where it came from: the
    origin fields (see the module).
    """

    path: Path
    check: RepoCheck | None = None
    patches: tuple[Change, ...] = ()
    written: tuple[str, ...] = ()
    error: EosfixError | None = None
    label: str | None = None  # how to name the repo in output (repo id, cache revision...)
    before: RepoCheck | None = None
    runtimes: RuntimeTable | None = None
    container: str = "folder"  # "folder" | "gguf" | "ollama"
    output: Path | None = None  # where fix wrote, when not over ``path`` (``--output``)
    # What will stop fix writing ``patches`` (a symlink, a read-only file or folder), with
    # what to do; asked by ``check`` of a local path, None when nothing does.
    blocked: EosfixError | None = None
    hub: HubOrigin | None = None
    gguf: GgufGroup | None = None
    ollama_hub: OllamaHub | None = None
    cache: CacheSnapshot | None = None
    write: WriteResult | None = None  # what fix wrote of a GGUF (in place, rewritten, copied)
    notes: tuple[str, ...] = ()  # what a write says of itself (a hard link split)
    ollama: OllamaVerdict | None = None  # a model of ollama's store: what ollama makes of it

    @property
    def status(self) -> Status:
        if self.check is None:
            return Status.ERROR
        return self.ollama.status if self.ollama is not None else self.check.status

    @property
    def name(self) -> str:
        return self.label or str(self.path)

    @property
    def noun(self) -> str:
        """What the unit is called in summaries."""
        return NOUNS[self.container]
