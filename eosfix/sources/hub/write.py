"""Writing to the Hub: one fix pull request per repo (never a second one), and uploads.

Vocabulary:

- **eosfix PR**: an open pull request whose title starts with ``PR_TITLE_PREFIX`` (it has a
  ``refs/pr/N`` branch). It is found by those, never by reading its files: a repo with an
  open eosfix PR never gets another. When its generation_config.json is not the one eosfix
  would propose now (the repo changed, or eosfix did), a commit with the new bytes is pushed
  onto its branch (**updated**); when that is not possible (someone else's PR, the Hub
  refuses), it is **left** as it is, with the reason.

A writer only writes what it is given: the new bytes and the PR's description come from the
caller (``eosfix.batch.hub`` checks the repo; ``eosfix.render.pr`` writes the description),
and an upload is gated by a check in ``eosfix.targets.session``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi
from huggingface_hub.community import Discussion

from eosfix.core.errors import EosfixError
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubReader

PR_TITLE_PREFIX = "[eosfix]"
PR_TITLE = f"{PR_TITLE_PREFIX} Stop generation at the end of each assistant turn"
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def update_title(file: str) -> str:
    """The commit message of an open eosfix PR's update with the current ``file``."""
    return f"{PR_TITLE_PREFIX} Update {file} to the current fix"


class PrError(EosfixError):
    """A pull request could not be opened (or looked for); ``status``: the Hub's HTTP status
    (None: no answer, or none to give)."""

    def __init__(self, message: str, *, path: str | Path | None = None, status: int | None = None):
        super().__init__(message, path=path)
        self.status = status


class PrOutcome(str, Enum):
    """What became of a repo's fix PR. The values are the words every output uses."""

    OPENED = "opened"  # no eosfix PR was open: this one was just opened
    UPDATED = "updated"  # the open eosfix PR got a commit with the current fix
    UNCHANGED = "already open"  # the open eosfix PR already carries the current fix
    LEFT = "left open"  # the open eosfix PR lacks the current fix and is left (``left``: why)
    WOULD_UPDATE = "would update"  # a dry run: the open eosfix PR lacks the current fix
    CARRIED_OVER = "opened earlier"  # recorded by an earlier run (--state): nothing asked now


@dataclass(frozen=True)
class PullRequest:
    """The PR that carries a repo's fix, and its ``outcome``: just opened, ``updated`` with
    the current fix, already carrying it (unchanged), or ``left`` as it is (the reason)."""

    url: str
    num: int | None
    outcome: PrOutcome
    left: str | None = None  # why it was left (LEFT), or what a dry run would do

    @property
    def created(self) -> bool:
        """This call opened it (outcome OPENED)."""
        return self.outcome is PrOutcome.OPENED

    @property
    def updated(self) -> bool:
        """This call pushed the current fix onto an open eosfix PR (outcome UPDATED)."""
        return self.outcome is PrOutcome.UPDATED


def find_eosfix_pr(hf_api: HfApi, repo_id: str) -> Discussion | None:
    """The repo's open eosfix PR (the oldest, if there are several), by title and branch."""
    prs = hf_api.get_repo_discussions(
        repo_id, discussion_type="pull_request", discussion_status="open"
    )
    found = [
        pr for pr in prs if pr.title.startswith(PR_TITLE_PREFIX) and pr.git_reference is not None
    ]
    return min(found, key=lambda pr: pr.num, default=None)


def find_open_pr(
    hf_api: HfApi,
    reader: HubReader,
    repo_id: str,
    new_bytes: bytes,
    *,
    file: str = GENERATION_CONFIG,
) -> PullRequest | None:
    """The repo's open eosfix PR, without writing: its ``file`` (generation_config.json, or a
    GGUF repo's params) already is ``new_bytes`` (outcome UNCHANGED) or would be updated
    (WOULD_UPDATE); None: no such PR."""
    pr = find_eosfix_pr(hf_api, repo_id)
    if pr is None:
        return None
    assert pr.git_reference is not None
    if _read(reader, repo_id, pr.git_reference, file) == new_bytes:
        return PullRequest(pr.url, pr.num, PrOutcome.UNCHANGED)
    return PullRequest(pr.url, pr.num, PrOutcome.WOULD_UPDATE)


def _read(reader: HubReader, repo_id: str, ref: str, file: str) -> bytes | None:
    """The PR's file, or None when it cannot be read (then it is updated, never doubled)."""
    try:
        return reader.read_file(repo_id, ref, file)
    except hub_errors():
        return None


def open_pr(
    hf_api: HfApi,
    reader: HubReader,
    repo_id: str,
    new_bytes: bytes,
    *,
    revision: str,
    parent_commit: str,
    description: str,
    me: str | None = None,
    file: str = GENERATION_CONFIG,
) -> PullRequest:
    """Open one PR that writes ``new_bytes`` as ``file`` (generation_config.json; a GGUF
    repo's ``params``, what ``ollama run hf.co/...`` stops on), unless the repo has
    an open eosfix PR: then it is reported (same bytes), updated with a commit of the new
    bytes, or left as it is when it is not ``me``'s (a user name; None: unknown) or the Hub
    refuses the update. ``revision`` is the branch asked (a commit sha: the default branch),
    ``parent_commit`` the commit the fix was planned on. Raises PrError when the Hub refuses
    to list or open PRs."""
    try:
        existing = find_eosfix_pr(hf_api, repo_id)
    except hub_errors() as exc:
        message, status = describe_error(exc)
        raise PrError(
            f"cannot look for pull requests: {message}", path=repo_id, status=status
        ) from None
    if existing is not None:
        return _update(hf_api, reader, repo_id, existing, new_bytes, description, me, file)
    try:
        info: CommitInfo = hf_api.create_commit(
            repo_id,
            operations=[CommitOperationAdd(file, new_bytes)],
            commit_message=PR_TITLE,
            commit_description=description,
            create_pr=True,
            revision=None if _SHA_RE.match(revision) else revision,
            parent_commit=parent_commit,
        )
    except hub_errors() as exc:
        message, status = describe_error(exc)
        raise PrError(
            f"cannot open a pull request: {message}", path=repo_id, status=status
        ) from None
    if info.pr_url is None:  # the Hub saw no change: the file already has these bytes
        raise PrError("cannot open a pull request: the Hub reports no change", path=repo_id)
    return PullRequest(info.pr_url, info.pr_num, PrOutcome.OPENED)


def _update(
    hf_api: HfApi,
    reader: HubReader,
    repo_id: str,
    pr: Discussion,
    new_bytes: bytes,
    description: str,
    me: str | None,
    file: str,
) -> PullRequest:
    """The open eosfix PR, with ``new_bytes`` pushed onto its branch when it lacks them."""
    ref = pr.git_reference
    assert ref is not None
    if _read(reader, repo_id, ref, file) == new_bytes:
        return PullRequest(pr.url, pr.num, PrOutcome.UNCHANGED)
    if me is not None and pr.author != me:
        why = f"opened by {pr.author}, not by {me}: left as it is"
        return PullRequest(pr.url, pr.num, PrOutcome.LEFT, left=why)
    try:
        hf_api.create_commit(
            repo_id,
            operations=[CommitOperationAdd(file, new_bytes)],
            commit_message=update_title(file),
            commit_description=description,
            revision=ref,
        )
    except hub_errors() as exc:
        message, _ = describe_error(exc)
        why = f"cannot update it: {message}"
        return PullRequest(pr.url, pr.num, PrOutcome.LEFT, left=why)
    return PullRequest(pr.url, pr.num, PrOutcome.UPDATED)


def upload(
    folder: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    create: bool = False,
    private: bool = False,
    **upload_folder_kwargs: Any,
) -> CommitInfo:
    """Upload ``folder`` with ``HfApi.upload_folder`` (keyword arguments go to it); with
    ``create``, first create the repo (``private``) when it does not exist."""
    api = HfApi(token=token)
    if create and not api.repo_exists(repo_id):
        api.create_repo(repo_id, private=private)
    commit: CommitInfo = api.upload_folder(
        repo_id=repo_id, folder_path=folder, **upload_folder_kwargs
    )
    return commit
