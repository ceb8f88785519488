"""A few Hub repos by id: the one check of a Hub repo, a fix PR, a checked upload.

``check_hub_repo`` is how every command that takes a Hub id checks it (``check``, ``explain``,
``render``/``goldens``/``diagnose``, the ``serve`` bot through ``HubSession``): the repo's
small files into eosfix's store (``eosfix.sources.hub.read``), then the pipeline, read-only,
with full results; for an organisation use the batch (``eosfix.batch.hub``), which reads the
same files and judges them by the same rules. ``upload_checked`` uploads a folder only if it
stops at the end of every turn. Writes to the Hub go through ``eosfix.sources.hub.write``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import CommitInfo, HfApi

from eosfix import pipeline
from eosfix.batch.prs import Describe, open_fix_pr, token_user
from eosfix.batch.verdict import needs_tokenizer_json
from eosfix.containers.target import HubRepo
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.decide.check import Status
from eosfix.pipeline import RepoResult
from eosfix.runtimes import Pins
from eosfix.sources.hub.bounds import LONGEST_WAIT
from eosfix.sources.hub.client import keep_no_cookies
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubEntry, HubError, HubReader, fetch_repo_files
from eosfix.sources.hub.store import Store
from eosfix.sources.hub.write import PrError, PullRequest, upload


class HubSession:
    """Check a few Hub repos with full results, and open fix PRs.

    ``describe`` writes a PR's description (``eosfix.render.pr.pr_description``); it is
    needed only to open PRs. ``longest``: the longest wait the Hub may ask for (a quota
    window; a person waiting on a page gets less).
    """

    def __init__(
        self,
        *,
        token: str | bool | None = None,  # False: no token, not even the local one
        timeout: float | None = 30.0,
        hf_api: HfApi | None = None,
        store: Store | None = None,
        describe: Describe | None = None,
        longest: float = LONGEST_WAIT,
    ) -> None:
        self.reader = HubReader(token=token, timeout=timeout, store=store, longest=longest)
        # Sessions of several identities share a process (the page: visitors and signed-in
        # users; the bot): huggingface_hub's client, which HfApi sends with, keeps no cookie.
        keep_no_cookies()
        self.api = hf_api or HfApi(token=token)
        self.describe = describe

    @functools.cached_property
    def _me(self) -> str | None:
        """The token's user, asked once (an eosfix PR of someone else is left, never
        updated)."""
        return token_user(self.api)

    def list_author(self, author: str) -> list[str]:
        """Model repo ids of a user or organisation (those the Hub described rightly)."""
        try:
            return [e.repo_id for e in self.reader.list_author(author) if e.problem is None]
        except hub_errors() as exc:
            message, status = describe_error(exc)
            raise HubError(message, repo_id=author, status=status) from None

    def check(self, repo_id: str, revision: str | None = None) -> RepoResult:
        """Bring the stop-relevant files of ``repo_id`` in and analyze them (read-only)."""
        return check_hub_repo(repo_id, revision, reader=self.reader)

    def open_pr(self, result: RepoResult) -> PullRequest | None:
        """Open one PR with the generation_config.json fix; a repo with an open eosfix PR
        never gets a second: that PR is updated with the fix, or left as it is (someone
        else's, or the Hub refuses the commit). ``PullRequest.outcome`` says which
        (``eosfix.sources.hub.write.PrOutcome``: OPENED, UPDATED, UNCHANGED, LEFT).

        Returns None when there is nothing to fix; raises HubError when the Hub refuses to
        list or open PRs.
        """
        if self.describe is None:
            raise TypeError("HubSession(describe=...) writes a PR's description; none given")
        try:
            return open_fix_pr(self.api, self.reader, result, self.describe, self._me)
        except PrError as exc:
            raise HubError(exc.message, repo_id=result.name, status=exc.status) from None


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
    and the file (``org/name/generation_config.json``), never eosfix's store; ``extra`` holds
    ``repo_id``, ``revision`` and ``sha`` (None when the Hub named no commit). ``entry``: the
    repo already resolved (``check_hub_target``)."""
    extra: dict[str, object] = {"repo_id": repo_id, "revision": revision or "main", "sha": None}
    options: dict[str, Any] = {"keep_ids": keep_ids, "pins": pins, "config_json": config_json}
    try:
        fetched = fetch_repo_files(repo_id, revision, reader=reader, entry=entry)
        extra["sha"] = fetched.sha
        result = pipeline.check_folder(fetched.path, label=repo_id, model=fetched.model, **options)
        if fetched.has_tokenizer_json and needs_tokenizer_json(result):
            fetched = fetch_repo_files(repo_id, fetched.sha, reader=reader, tokenizer_json=True)
            result = pipeline.check_folder(
                fetched.path, label=repo_id, model=fetched.model, **options
            )
    except HubError as exc:
        return RepoResult(Path(repo_id), error=exc, label=repo_id, extra=extra)
    error = _relabel(result.error, fetched.path, repo_id)
    return dataclasses.replace(result, path=Path(repo_id), error=error, extra=extra)


@dataclass(frozen=True)
class HubCheck:
    """What a Hub target gave: its results (one for a repo of small files; for a GGUF repo one
    per group of alike files, ``eosfix.batch.gguf_hub``) and, for a GGUF repo, a line saying
    what reading the headers cost; ``note``: a repo checked by its small files that also holds
    GGUF files says how to check those."""

    results: tuple[RepoResult, ...]
    summary: str | None = None
    note: str | None = None


def check_hub_target(
    target: HubRepo,
    *,
    reader: HubReader | None = None,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    config_json: bool = False,
) -> HubCheck:
    """Every command's check of a Hub target: a GGUF repo (``hf.co/org/name:TAG``,
    ``org/name/FILE.gguf``, or a repo of GGUF files without a tokenizer's files) by its
    GGUF files' headers (``eosfix.batch.gguf_hub``); any other repo by its small files
    (``check_hub_repo``). One info request resolves the repo for both."""
    from eosfix.batch.gguf_hub import check_gguf_repo, summary
    from eosfix.sources.hub.gguf import model_files

    reader = reader or HubReader(workers=8)
    repo_id = target.repo_id
    name = str(target)
    try:
        entry = reader.resolve(HubEntry(repo_id))
        if not (target.gguf or entry.is_gguf):
            result = check_hub_repo(repo_id, reader=reader, keep_ids=keep_ids, pins=pins,
                                    config_json=config_json, entry=entry)  # fmt: skip
            n = len(model_files(entry.ggufs))
            note = (
                f"{repo_id}: checked by its tokenizer and config files; it also holds {n} GGUF "
                f"file{'s' * (n != 1)}: eosfix check hf.co/{repo_id} reads their headers"
            ) if n else None  # fmt: skip
            return HubCheck((result,), note=note)
        if not model_files(entry.ggufs):
            raise RepoLoadError("no GGUF model file in this repo", path=name)
        checked = check_gguf_repo(
            reader, entry, tag=target.tag, path=target.file, keep_ids=keep_ids, pins=pins
        )
    except hub_errors() as exc:
        message, status = describe_error(exc)
        return HubCheck((_failed(target, HubError(message, repo_id=name, status=status)),))
    except EosfixError as exc:
        if exc.path == repo_id:  # about the repo: named as it was given (hf.co/org/name:TAG)
            exc = copy.copy(exc)
            exc.path = name
        return HubCheck((_failed(target, exc),))
    return HubCheck(checked.results, summary(checked))


def _failed(target: HubRepo, error: EosfixError) -> RepoResult:
    """A Hub target that could not be checked at all (not found, gated, no GGUF file)."""
    extra: dict[str, object] = {"repo_id": target.repo_id, "revision": "main", "sha": None}
    kind = "gguf" if target.gguf else "folder"
    return RepoResult(
        Path(target.repo_id), error=error, label=str(target), extra=extra, container=kind
    )


def _relabel(error: EosfixError | None, folder: Path, repo_id: str) -> EosfixError | None:
    """Name a file by its place in the repo (``org/name/file``), not the work folder."""
    if error is None or error.path is None:
        return error
    try:
        rel = Path(error.path).relative_to(folder)
    except ValueError:
        return error
    relabelled = copy.copy(error)
    relabelled.path = f"{repo_id}/{rel.as_posix()}" if rel.parts else repo_id
    return relabelled


# --- uploads ---------------------------------------------------------------------------------


class UploadRefusedError(EosfixError):
    """``upload_checked`` refused: the folder would not stop at the end of a turn."""

    def __init__(self, message: str, *, path: str | Path, result: RepoResult) -> None:
        super().__init__(message, path=path)
        self.result = result


def refusal_reason(result: RepoResult, *, how_to_fix: str = "pass fix=True") -> str | None:
    """Why an upload must not go ahead, or None when the folder stops correctly;
    ``how_to_fix``: the words for having eosfix fix it first (the CLI says "--fix")."""
    if result.error is not None:
        return str(result.error)
    if result.status in (Status.FIXABLE, Status.PROBLEMS):
        assert result.check is not None
        errors = [
            f"{f.code} {f.message}" for f in result.check.findings if f.severity.value == "error"
        ]
        hint = f" (eosfix can fix this: {how_to_fix})" if result.status is Status.FIXABLE else ""
        return "would not stop at the end of a turn: " + "; ".join(errors) + hint
    return None


def check_before_upload(folder: str | Path, *, fix: bool = False) -> RepoResult:
    """Check (and with ``fix``, fix) a local folder before it is uploaded.

    After a fix the folder is checked again, so the result describes what would be uploaded.
    """
    if not fix:
        return pipeline.check(folder)
    fixed = pipeline.fix(folder)
    if fixed.error is not None or not fixed.written:
        return fixed
    return dataclasses.replace(pipeline.check(folder), written=fixed.written)


def upload_checked(
    folder: str | Path, repo_id: str, *, fix: bool = False, **upload_folder_kwargs: Any
) -> CommitInfo:
    """Upload ``folder`` with ``HfApi.upload_folder`` only if it stops at every turn end.

    With ``fix=True`` the folder is fixed first (minimal atomic edit). Raises
    ``UploadRefusedError`` (an ``EosfixError``) and uploads nothing when the folder would
    not stop; other keyword arguments go to ``upload_folder`` (``revision``, ``create_pr``,
    ``commit_message``, ``token``...).

    Example::

        from eosfix.batch.session import upload_checked
        upload_checked("./out", "me/model-mlx-4bit", fix=True, commit_message="Add weights")
    """
    result = check_before_upload(folder, fix=fix)
    reason = refusal_reason(result)
    if reason is not None:
        raise UploadRefusedError(f"refusing to upload: {reason}", path=folder, result=result)
    token = upload_folder_kwargs.pop("token", None)
    return upload(folder, repo_id, token=token, **upload_folder_kwargs)
