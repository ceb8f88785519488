"""A few Hub repos by id from Python (the page and the bot): ``HubSession`` checks them
(``eosfix.targets.hub``) and opens fix PRs (``eosfix.targets.pr``); ``upload_checked`` uploads
a folder only if it stops at the end of every turn. Writes to the Hub go through
``eosfix.sources.hub.write``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from huggingface_hub import CommitInfo, HfApi

from eosfix import pipeline
from eosfix.core.errors import EosfixError
from eosfix.decide.check import Status
from eosfix.result import RepoResult
from eosfix.sources.hub.bounds import LONGEST_WAIT
from eosfix.sources.hub.client import keep_no_cookies
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubError, HubReader
from eosfix.sources.hub.store import Store
from eosfix.sources.hub.write import PrError, PullRequest, upload
from eosfix.targets.hub import check_hub_target
from eosfix.targets.parse import HubTarget
from eosfix.targets.pr import Describe, open_fix_pr, token_user


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
        """Check ``repo_id`` (read-only) as every command does (``check_hub_target``: by its
        small files, or a GGUF repo by its headers); the result that stands for it
        (``Checked.main``)."""
        return check_hub_target(HubTarget(repo_id, revision), reader=self.reader).main

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
    return pipeline.check(folder)._replace(written=fixed.written)


def upload_checked(
    folder: str | Path, repo_id: str, *, fix: bool = False, **upload_folder_kwargs: Any
) -> CommitInfo:
    """Upload ``folder`` with ``HfApi.upload_folder`` only if it stops at every turn end.

    With ``fix=True`` the folder is fixed first (minimal atomic edit). Raises
    ``UploadRefusedError`` (an ``EosfixError``) and uploads nothing when the folder would
    not stop; other keyword arguments go to ``upload_folder`` (``revision``, ``create_pr``,
    ``commit_message``, ``token``...).

    Example::

        from eosfix.targets.session import upload_checked
        upload_checked("./out", "me/model-mlx-4bit", fix=True, commit_message="Add weights")
    """
    result = check_before_upload(folder, fix=fix)
    reason = refusal_reason(result)
    if reason is not None:
        raise UploadRefusedError(f"refusing to upload: {reason}", path=folder, result=result)
    token = upload_folder_kwargs.pop("token", None)
    return upload(folder, repo_id, token=token, **upload_folder_kwargs)
