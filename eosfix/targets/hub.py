"""One Hub repo checked, for every command, the page and the bot.

``check_hub_target``: a Hub target checked read-only: a GGUF repo by its GGUF files' headers
(``eosfix.targets.gguf_hub``), any other repo by its small files (``check_hub_repo``: the
files into eosfix's store, ``eosfix.sources.hub.read``, then the pipeline). For an
organisation use the batch (``eosfix.batch.hub``), which reads the same files and judges them
by the same rules.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eosfix import pipeline
from eosfix.analysis.terminators import STOP_STRING
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.core.repo import TOKENIZER_JSON
from eosfix.result import HubOrigin, RepoResult
from eosfix.runtimes import Pins
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubEntry, HubError, HubReader, fetch_repo_files
from eosfix.targets.checked import Checked
from eosfix.targets.parse import HubTarget


def needs_tokenizer_json(result: RepoResult) -> bool:
    """Whether some id can only come from tokenizer.json (transformers 5 layout, or unlisted)."""
    check = result.check
    if check is None:
        return result.error is not None and TOKENIZER_JSON in str(result.error)
    tok = check.repo.tokenizer_config
    if tok is None or tok.added_tokens_decoder is None:
        return True
    if any(t.id is None for t in check.terminators.terminators if t.kind != STOP_STRING):
        return True
    if check.review is not None and check.review.unchecked:  # which token is this stop id?
        return True
    return check.tokenizer_eos is not None and check.tokenizer_eos.id is None


def check_hub_repo(
    repo_id: str,
    revision: str | None = None,
    *,
    reader: HubReader | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    config_json: bool = False,
    entry: HubEntry | None = None,
) -> RepoResult:
    """The one check of a Hub repo by id: its small files into eosfix's store (tokenizer.json
    too when an id lives only there), then the pipeline, read-only. A repo with no config.json,
    generation_config.json or weights holds no model: nothing is proposed for it, as ``eosfix
    hub`` says too. The result is named ``org/name``; an error about a file names the repo id
    and the file (``org/name/generation_config.json``), never eosfix's store; ``hub`` says
    the repo id, the revision and the commit read (None when the Hub named none). ``entry``:
    the repo already resolved (``check_hub_target``)."""
    hub = HubOrigin(repo_id, revision or "main")
    options: dict[str, Any] = {"keep_ids": keep_ids, "pins": pins, "config_json": config_json}
    try:
        fetched = fetch_repo_files(repo_id, revision, reader=reader, entry=entry)
        hub = hub._replace(sha=fetched.sha)
        result = pipeline.check_folder(fetched.path, label=repo_id, model=fetched.model, **options)
        if fetched.has_tokenizer_json and needs_tokenizer_json(result):
            fetched = fetch_repo_files(repo_id, fetched.sha, reader=reader, tokenizer_json=True)
            result = pipeline.check_folder(
                fetched.path, label=repo_id, model=fetched.model, **options
            )
    except HubError as exc:
        return RepoResult(Path(repo_id), error=exc, label=repo_id, hub=hub)
    error = _relabel(result.error, fetched.path, repo_id)
    return result._replace(path=Path(repo_id), error=error, hub=hub)


def check_hub_target(
    target: HubTarget,
    *,
    reader: HubReader | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    config_json: bool = False,
) -> Checked:
    """Every command's check of a Hub target, read-only. One info request says what the repo
    holds, and that decides how it is read, never the spelling: a GGUF file named (by its
    path or ollama's tag), or a repo of GGUF files without a tokenizer's files, by the GGUF
    headers (``eosfix.targets.gguf_hub``: one result per group of alike files, and a line
    saying what reading them cost); any other repo by its small files (``check_hub_repo``),
    with a note when it holds GGUF files too. An error names the target as it was given; for
    ``org/name`` that names no local path either, it says so (``HubTarget.not_local``)."""
    from eosfix.sources.hub.gguf import model_files
    from eosfix.targets.gguf_hub import check_gguf_repo, summary

    reader = reader or HubReader(workers=8)
    repo_id = target.repo_id
    name = str(target)
    try:
        entry = reader.resolve(HubEntry(repo_id, target.revision or "main"))
        if not (target.picks_gguf or entry.is_gguf):
            result = check_hub_repo(repo_id, target.revision, reader=reader, keep_ids=keep_ids,
                                    pins=pins, config_json=config_json, entry=entry)  # fmt: skip
            return Checked((_as_given(result, target),), note=_gguf_note(entry, target))
        if not model_files(entry.ggufs):
            raise RepoLoadError("no GGUF model file in this repo", path=name)
        checked = check_gguf_repo(
            reader, entry, tag=target.quant, path=target.gguf_file, keep_ids=keep_ids, pins=pins
        )
    except hub_errors() as exc:
        message, status = describe_error(exc)
        return Checked((_failed(target, HubError(message, repo_id=name, status=status)),))
    except EosfixError as exc:
        if exc.path == repo_id:  # about the repo: named as it was given (hf.co/org/name:TAG)
            exc = exc.but(path=name)
        return Checked((_failed(target, exc),))
    return Checked(checked.results, summary(checked))


def _gguf_note(entry: HubEntry, target: HubTarget) -> str | None:
    """A repo checked by its small files that also holds GGUF files: how to check one."""
    from eosfix.sources.hub.gguf import llama_cpp_pick, model_files

    n = len(model_files(entry.ggufs))
    pick = llama_cpp_pick(entry.ggufs)
    if not n or pick is None:
        return None
    command = shlex.join(["eosfix", "check", f"{target.repo_id}/{pick}"])
    return (
        f"{target.repo_id}: checked by its tokenizer and config files; it also holds {n} GGUF "
        f"file{'s' * (n != 1)}: {command} reads {'its' if n == 1 else 'one'} header"
    )


def _as_given(result: RepoResult, target: HubTarget) -> RepoResult:
    """What the Hub said of the repo, naming it as it was given (``hf://org/name``,
    ``https://huggingface.co/...``), and that no local path has the name either when
    ``org/name`` was taken for a Hub id for that reason."""
    error = result.error
    if not isinstance(error, HubError):
        return result
    if error.path == target.repo_id:
        error = error.but(path=str(target))
    if target.not_local:
        error = error.but(message=f"{error.message}{target.not_local}")
    return result._replace(error=error)


def _failed(target: HubTarget, error: EosfixError) -> RepoResult:
    """A Hub target that could not be checked at all (not found, gated, no GGUF file)."""
    result = RepoResult(
        Path(target.repo_id), error=error, label=str(target), container="gguf" if
        target.picks_gguf else "folder", hub=HubOrigin(target.repo_id, target.revision or "main"),
    )  # fmt: skip
    return _as_given(result, target)


def _relabel(error: EosfixError | None, folder: Path, repo_id: str) -> EosfixError | None:
    """Name a file by its place in the repo (``org/name/file``), not the work folder."""
    if error is None or error.path is None:
        return error
    try:
        rel = Path(error.path).relative_to(folder)
    except ValueError:
        return error
    return error.but(path=f"{repo_id}/{rel.as_posix()}" if rel.parts else repo_id)
