"""One unit through the pipeline: read -> analyse -> decide -> plan -> apply -> ``RepoResult``.

The same steps for every container (a model folder, a GGUF file): the container reads itself
into the one ``ModelRepo`` the analysis takes and gives its stop keys as data; the one
``eosfix.decide.check.check`` decides; the container plans its own edits and writes them; the
per-runtime verdicts are computed here, once, and carried in the result. Batches, the Python
API and the CLI all call these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from eosfix.containers.folder.container import fix_folder, open_folder
from eosfix.containers.paths import cache_snapshot, cache_snapshot_of, is_gguf, resolve
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.core.repo import ModelRepo
from eosfix.decide import check as decide
from eosfix.decide.check import RepoCheck
from eosfix.decide.keys import StopKeys
from eosfix.decide.runtime_table import RuntimeTable
from eosfix.result import Change, RepoResult
from eosfix.runtimes import Pins

if TYPE_CHECKING:
    from eosfix.containers.folder.write import AfterWrite
    from eosfix.containers.gguf.write import Progress
    from eosfix.containers.ollama.read import OllamaModel


class Container(Protocol):
    """What every container gives the pipeline (``eosfix.containers.*.container``)."""

    kind: str  # "folder" | "gguf"

    @property
    def repo(self) -> ModelRepo: ...

    @property
    def keys(self) -> StopKeys: ...

    def plan(self, check: RepoCheck, *, config_json: bool = False) -> Sequence[Change]: ...

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[Any], pins: Pins | None
    ) -> RuntimeTable: ...

    def write_blocker(
        self, patches: Sequence[Any], *, replace_symlinks: bool | None = None
    ) -> EosfixError | None: ...  # what would stop fix writing ``patches`` (writes nothing)


class _Analysis(NamedTuple):
    check: RepoCheck
    patches: tuple[Change, ...]
    runtimes: RuntimeTable | None
    container: str


def _open(path: Path, model: bool = True) -> Container:
    if is_gguf(path):
        from eosfix.containers.gguf.container import open_gguf  # only a GGUF needs its reader

        return open_gguf(path)
    return open_folder(path, model=model)


def _analyze(
    container: Container,
    config_json: bool,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
) -> _Analysis:
    """Decide, plan, and the runtime verdicts of the plan."""
    check = decide.check(container.repo, container.keys, keep_ids=keep_ids, config_json=config_json)
    # an analysis this machine could not finish (EOS103) plans nothing, whatever the container
    patches = () if check.unfinished else tuple(container.plan(check, config_json=config_json))
    table = container.runtime_table(check, patches, pins) if check.repo.templates else None
    return _Analysis(check, patches, table, container.kind)


def _result(root: Path, a: _Analysis, label: str | None, **kwargs: Any) -> RepoResult:
    return RepoResult(
        root,
        a.check,
        a.patches,
        label=label,
        runtimes=a.runtimes,
        container=a.container,
        **kwargs,
    )


def check(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    blockers: bool = True,
    replace_symlinks: bool | None = None,
) -> RepoResult:
    """Analyze a model folder (or one of its config files, or a GGUF file) and plan the fix
    without writing anything.

    ``keep_ids``: stop ids the fix must keep even where they cut a reply (``--keep-id``);
    ``pins``: the runtime versions the verdicts are for (``--runtime``); ``blockers``: ask
    what would stop the writer (``RepoResult.blocked``), for the command ``check`` recommends
    (``replace_symlinks`` None) or as ``fix`` writes (False). A snapshot of the Hugging Face
    cache (or a GGUF file in one) says so (``RepoResult.cache``): its fix is ``eosfix cache
    --fix`` (the link replaced, never the blob), or for a GGUF a new file (``--output``: the
    link's blocker names the command).
    """
    try:
        root = resolve(path)
    except (EosfixError, OSError) as exc:
        return RepoResult(Path(path), error=_one_line(exc, Path(path)), label=label)
    gguf = is_gguf(root)
    cache = cache_snapshot_of(root) if gguf else cache_snapshot(root)
    result = check_folder(
        root, config_json=config_json, label=label, keep_ids=keep_ids, pins=pins,
        blockers=blockers, replace_symlinks=replace_symlinks,
    )  # fmt: skip
    return result._replace(cache=cache) if cache is not None else result


def check_folder(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    model: bool = True,
    blockers: bool = False,
    replace_symlinks: bool | None = None,
) -> RepoResult:
    """Analyze a folder (or GGUF file) as it is, whatever it holds (cache snapshots, the Hub
    store): a folder without tokenizer files is a repo without a chat template here, not an
    error. ``model``: False when the source knows the repo holds no model (a Hub repo or cache
    snapshot with tokenizer files only): nothing is proposed, every runtime is not applicable.
    ``blockers``: ask what would stop the writer (``check``'s).
    """
    root = Path(path)
    kind = "gguf" if is_gguf(root) else "folder"
    try:
        container = _open(root, model)
        analysis = _analyze(container, config_json, keep_ids, pins)
        blocked = (
            container.write_blocker(analysis.patches, replace_symlinks=replace_symlinks)
            if blockers and analysis.patches
            else None
        )
    except (EosfixError, OSError) as exc:
        return RepoResult(root, error=_one_line(exc, root), label=label, container=kind)
    return _result(root, analysis, label, blocked=blocked)


def check_container(
    container: Container,
    root: Path,
    *,
    label: str | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
) -> RepoResult:
    """Analyze a container already read (a GGUF on the Hub, read by ranges): ``root`` names
    it in the result."""
    try:
        analysis = _analyze(container, False, keep_ids, pins)
    except (EosfixError, OSError) as exc:
        return RepoResult(root, error=_one_line(exc, root), label=label, container=container.kind)
    return _result(root, analysis, label)


def check_ollama(model: OllamaModel, *, pins: Pins | None = None) -> RepoResult:
    """A model of ollama's store: its GGUF blob through the pipeline, judged as ollama runs it
    with its params (``eosfix.containers.ollama.container``); nothing is planned (the store is
    never written). ``pins``: the ollama release judged (``--runtime ollama==X``)."""
    from eosfix.containers.ollama.container import OllamaVerdict, open_ollama

    root = model.manifest
    try:
        container = open_ollama(model)
        analysis = _analyze(container, False, (), pins)
        check, verdict = container.judge(analysis.check, pins)
    except EosfixError as exc:
        return RepoResult(root, error=exc, label=model.name, container="ollama",
                          ollama=OllamaVerdict(model))  # fmt: skip
    except OSError as exc:
        error = RepoLoadError(str(exc), path=model.manifest)
        return RepoResult(root, error=error, label=model.name, container="ollama",
                          ollama=OllamaVerdict(model))  # fmt: skip
    return RepoResult(
        root, check, label=model.name, runtimes=analysis.runtimes, container="ollama",
        ollama=verdict,
    )  # fmt: skip


def fix(
    path: str | Path,
    *,
    config_json: bool = False,
    label: str | None = None,
    replace_symlinks: bool = False,
    after_write: AfterWrite | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
) -> RepoResult:
    """Analyze and write the planned edits atomically; returns which files changed.

    The container writes (``eosfix.containers.folder.container.fix_folder``: the folder locked
    for the whole read-plan-write; ``replace_symlinks`` for the Hugging Face cache, whose
    shared blobs are never written; a GGUF: ``fix_gguf``)."""
    try:
        root = resolve(path)
    except (EosfixError, OSError) as exc:
        return RepoResult(Path(path), error=_one_line(exc, Path(path)), label=label)
    if is_gguf(root):
        return fix_gguf(root, label=label, keep_ids=keep_ids, pins=pins)
    try:
        done = fix_folder(
            root,
            lambda folder: _analyze(folder, config_json, keep_ids, pins),
            replace_symlinks=replace_symlinks,
            after_write=after_write,
        )
    except (EosfixError, OSError) as exc:
        return RepoResult(root, error=_one_line(exc, root), label=label)
    if done.now is None:
        return _result(root, done.planned, label)
    return RepoResult(
        root, done.now.check, done.planned.patches, done.written, label=label,
        before=done.planned.check, runtimes=done.now.runtimes, notes=done.notes,
    )  # fmt: skip


def fix_gguf(
    path: str | Path,
    *,
    output: str | Path | None = None,
    force: bool = False,
    label: str | None = None,
    progress: Progress | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
) -> RepoResult:
    """Write the planned ``tokenizer.ggml.*`` keys into a GGUF (or ``output``), verified
    (``eosfix.containers.gguf.container.fix_gguf``: in place or a rewrite; with nothing to fix,
    ``output`` gets a verified copy, ``RepoResult.write.mode == "copy"``). An existing
    ``output`` is refused unless ``force`` (the input itself too: with ``force``, it is fixed
    in place)."""
    from eosfix.containers.gguf.container import fix_gguf as fix_file

    root = Path(path)
    try:
        done = fix_file(
            root,
            lambda gguf: _analyze(gguf, False, keep_ids, pins),
            output=None if output is None else Path(output),
            force=force,
            progress=progress,
        )
    except (EosfixError, OSError) as exc:
        return RepoResult(root, error=_one_line(exc, root), label=label, container="gguf")
    if done.now is None:
        return _result(
            root, done.planned, label, write=done.write, notes=done.notes, output=done.output
        )
    # ``check`` is the file as written (``output`` when given), ``before`` the one planned on
    return RepoResult(
        root, done.now.check, done.planned.patches, done.written, label=label,
        write=done.write, notes=done.notes, before=done.planned.check,
        runtimes=done.now.runtimes, container="gguf", output=done.output,
    )  # fmt: skip


def _one_line(exc: EosfixError | OSError, root: Path) -> EosfixError:
    """The repo's error: an ``EosfixError`` as it is; an OS error that escaped while reading
    (EMFILE or EIO in a scandir, a stat, an open) as one line naming its file."""
    if isinstance(exc, EosfixError):
        return exc
    where = Path(exc.filename) if isinstance(exc.filename, (str, Path)) else root
    return RepoLoadError(f"cannot read: {exc.strerror or exc}", path=where)
