"""A GGUF file read on the Hub as rows (``eosfix.render.rows``): the files it stands for, what
works for its header (no pull request changes one), and what ``ollama run hf.co/...`` stops on
with the params file a pull request would write. From the result's typed fields (``hub``,
``gguf``, ``ollama_hub``: made by ``eosfix.targets.gguf_hub``); nothing is decided here.
"""

from __future__ import annotations

import shlex
from typing import NamedTuple

from eosfix.result import RepoResult


class GgufRows(NamedTuple):
    """A GGUF file read on the Hub: the files it stands for, whose default download it is,
    a group that differs, and what works for its header (no pull request changes one): the
    command that makes a fixed file from a downloaded copy, and llama.cpp's flags until then."""

    repo_id: str
    file: str
    quant: str | None
    alike: tuple[str, ...]
    default_for: tuple[str, ...]
    differs_from: str | None
    differs_in: tuple[str, ...]
    new_file: str | None  # ``eosfix fix X.gguf --output X.fixed.gguf``
    override: tuple[str, ...]  # ``--override-kv KEY=int:VALUE`` each
    check_command: str  # ``eosfix check hf.co/org/name:TAG``

    @property
    def tag(self) -> str:
        return self.quant or _short(self.file)

    @property
    def until_fixed(self) -> str | None:
        """``llama-server -hf org/name:TAG --override-kv ...``: llama.cpp stops right now."""
        if not self.override:
            return None
        return f"llama-server -hf {self.repo_id}:{self.tag} {' '.join(self.override)}"


class OllamaHubRow(NamedTuple):
    """What ``ollama run hf.co/...`` stops on (``stop``, from the repo's params file or from
    the Hub's conversion of the chat template), and the params file a pull request would
    write (``after``; None: no change)."""

    stop: tuple[str, ...]
    from_file: bool
    conversion: str | None
    problem: str | None
    after: tuple[str, ...] | None = None
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed_only_before_030: bool = False  # every text removed is a control token's
    control: tuple[str, ...] = ()  # added texts ollama 0.30+ never matches as a stop string
    file: str = "params"


def _short(path: str) -> str:
    return path.rpartition("/")[2]


def override_kv(r: RepoResult) -> tuple[str, ...]:
    """``--override-kv KEY=int:VALUE`` for each planned key edit llama.cpp can take that way
    (an id key; ollama's eos_token_ids list is no scalar)."""
    out = []
    for p in r.patches:
        data = p.as_json()
        if isinstance(data.get("new"), int) and str(data.get("key", "")).endswith("_token_id"):
            out.append(f"--override-kv {data['key']}=int:{data['new']}")
    return tuple(out)


def is_hub_gguf(r: RepoResult) -> bool:
    """A GGUF file read on the Hub (``eosfix.targets.gguf_hub``)."""
    return r.container == "gguf" and r.gguf is not None and r.hub is not None


def gguf_rows(r: RepoResult) -> GgufRows | None:
    if not is_hub_gguf(r):
        return None
    group, hub = r.gguf, r.hub
    assert group is not None
    assert hub is not None
    name = _short(group.file)
    new_file = None
    if r.patches:
        fixed = name.removesuffix(".gguf") + ".fixed.gguf"
        new_file = f"eosfix fix {shlex.quote(name)} --output {shlex.quote(fixed)}"
    tag = group.quant or name
    return GgufRows(
        hub.repo_id, group.file, group.quant, group.alike, group.default_for,
        group.differs_from, group.differs_in, new_file, override_kv(r),
        f"eosfix check {shlex.quote(f'hf.co/{hub.repo_id}:{tag}')}",
    )  # fmt: skip


def ollama_hub_row(r: RepoResult) -> OllamaHubRow | None:
    o = r.ollama_hub
    if o is None:
        return None
    params, plan = o.params, o.plan
    conversion = params.conversion.path if params.conversion is not None else None
    row = OllamaHubRow(tuple(params.stop), params.from_file, conversion, params.problem)
    if plan is None:
        return row
    return OllamaHubRow(
        row.stop, row.from_file, conversion, params.problem, tuple(plan.after),
        tuple(plan.removed), tuple(plan.added),
        bool(plan.removed) and tuple(plan.removed) == tuple(o.removed_control),
        tuple(o.control), o.file,
    )  # fmt: skip
