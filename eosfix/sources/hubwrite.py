"""Writing to the Hub: one fix pull request per repo (never a duplicate), and uploads.

Vocabulary:

- **eosfix PR**: a pull request whose title starts with ``PR_TITLE_PREFIX`` and that changes
  only generation_config.json. A repo whose open eosfix PR already holds the exact bytes
  eosfix would propose gets no second one.

A writer only writes what it is given: the new bytes and the PR's description come from the
caller (``eosfix.batch.hub`` checks the repo; ``eosfix.render.pr`` writes the description),
and an upload is gated by a check in ``eosfix.batch.hubapi``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi

from eosfix.core.errors import EosfixError
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.sources.hub import HubReader
from eosfix.sources.hubhttp import describe_error, hub_errors

PR_TITLE_PREFIX = "[eosfix]"
PR_TITLE = f"{PR_TITLE_PREFIX} Stop generation at the end of each assistant turn"
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class PrError(EosfixError):
    """A pull request could not be opened (or looked for)."""


@dataclass(frozen=True)
class PullRequest:
    """The PR that carries a repo's fix: just opened (``created``) or already open."""

    url: str
    num: int | None
    created: bool


def find_open_pr(
    hf_api: HfApi, reader: HubReader, repo_id: str, new_bytes: bytes
) -> PullRequest | None:
    """An open eosfix PR whose generation_config.json is exactly ``new_bytes``."""
    prs = hf_api.get_repo_discussions(
        repo_id, discussion_type="pull_request", discussion_status="open"
    )
    for pr in prs:
        if not pr.title.startswith(PR_TITLE_PREFIX) or pr.git_reference is None:
            continue
        if reader.read_file(repo_id, pr.git_reference, GENERATION_CONFIG) == new_bytes:
            return PullRequest(pr.url, pr.num, created=False)
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
) -> PullRequest:
    """Open one PR that writes ``new_bytes`` as generation_config.json, unless an eosfix PR
    has them already. ``revision`` is the branch asked (a commit sha: the default branch),
    ``parent_commit`` the commit the fix was planned on. Raises PrError when the Hub refuses.
    """
    try:
        existing = find_open_pr(hf_api, reader, repo_id, new_bytes)
        if existing is not None:
            return existing
        info: CommitInfo = hf_api.create_commit(
            repo_id,
            operations=[CommitOperationAdd(GENERATION_CONFIG, new_bytes)],
            commit_message=PR_TITLE,
            commit_description=description,
            create_pr=True,
            revision=None if _SHA_RE.match(revision) else revision,
            parent_commit=parent_commit,
        )
    except hub_errors() as exc:
        message, _ = describe_error(exc)
        raise PrError(f"cannot open a pull request: {message}", path=repo_id) from None
    if info.pr_url is None:  # the Hub saw no change: the file already has these bytes
        raise PrError("cannot open a pull request: the Hub reports no change", path=repo_id)
    return PullRequest(info.pr_url, info.pr_num, created=True)


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
