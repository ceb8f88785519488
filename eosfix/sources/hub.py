"""The Hugging Face Hub: bring a repo's small config files in, take a one-file fix out as a PR.

Vocabulary:

- **snapshot**: the stop-relevant files of one repo at one commit (``sha``), gathered in a
  work folder so ``eosfix.api.check`` reads exactly what the Hub serves. Files come through
  ``hf_hub_download`` (the normal HF cache) and are checked against the tree's hashes, so a
  snapshot file edited locally (``eosfix cache --fix``) is never mistaken for the Hub's.
- **eosfix PR**: a pull request whose title starts with ``PR_TITLE_PREFIX`` and that changes
  only generation_config.json.

Weights are never downloaded: only ``eosfix.repo.RELEVANT_FILES`` and
``additional_chat_templates/*.jinja``, plus tokenizer.json when an id cannot be resolved
without it. The token is whatever huggingface_hub finds unless one is given; it is never
printed or logged. Nothing here prints: the CLI renders.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoSibling
from huggingface_hub.utils.sha import git_hash

from eosfix import api
from eosfix.analyze import STOP_STRING
from eosfix.api import RepoResult
from eosfix.check import Status
from eosfix.errors import EosfixError
from eosfix.repo import GENERATION_CONFIG, TOKENIZER_JSON, is_relevant_file
from eosfix.report import KIND_TEXT, runtimes_line
from eosfix.stopsets import runtime_table

log = logging.getLogger(__name__)

PR_TITLE_PREFIX = "[eosfix]"
PR_TITLE = f"{PR_TITLE_PREFIX} Stop generation at the end of each assistant turn"
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class HubError(EosfixError):
    """A Hub repo could not be read or written (not found, gated, rate limited, offline...)."""

    def __init__(self, message: str, *, repo_id: str, status: int | None = None) -> None:
        super().__init__(message, path=repo_id)
        self.repo_id = repo_id
        self.status = status


class UploadRefusedError(EosfixError):
    """``upload_checked`` refused: the folder would not stop at the end of a turn."""

    def __init__(self, message: str, *, path: str | Path, result: RepoResult) -> None:
        super().__init__(message, path=path)
        self.result = result


@dataclass(frozen=True)
class PullRequest:
    """The PR that carries a repo's fix: just opened (``created``) or already open."""

    url: str
    num: int | None
    created: bool


is_relevant = is_relevant_file  # the small files eosfix reads (never weights)


def describe_error(exc: BaseException) -> tuple[str, int | None]:
    """A one-line reason (and HTTP status) for a failed Hub call; never includes a token."""
    import httpx2  # huggingface_hub's HTTP client

    for err in _chain(exc):
        status = _status(err)
        if isinstance(err, GatedRepoError):
            return f"gated repository: request access and log in ({status})", status
        if isinstance(err, RevisionNotFoundError):
            return f"revision not found ({status})", status
        if isinstance(err, RepositoryNotFoundError):
            hint = "" if status == 404 else ": private? log in or pass --token"
            return f"repository not found{hint} ({status})", status
        if isinstance(err, RemoteEntryNotFoundError):
            return f"file not found ({status})", status
        if isinstance(err, HfHubHTTPError) and status is not None:
            return _http_reason(status), status
        if isinstance(err, OfflineModeIsEnabled):
            return "HF_HUB_OFFLINE is set: cannot reach the Hub", None
        if isinstance(err, httpx2.TimeoutException):
            return "timed out waiting for the Hub", None
        if isinstance(err, (httpx2.TransportError, ConnectionError)):
            return f"network error ({type(err).__name__})", None
    if isinstance(exc, LocalEntryNotFoundError):
        return "cannot reach the Hub and the file is not cached", None
    return f"Hub request failed ({type(exc).__name__})", None


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        node = node.__cause__ or node.__context__


def _status(err: BaseException) -> int | None:
    response = getattr(err, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _http_reason(status: int) -> str:
    reasons = {
        401: "authentication failed: invalid or missing token",
        403: "access denied",
        404: "not found",
        429: "rate limited by the Hub: try again later",
    }
    default = "Hub server error" if status >= 500 else "Hub request failed"
    return f"{reasons.get(status, default)} ({status})"


def _hub_errors() -> tuple[type[BaseException], ...]:
    import httpx2

    return (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        httpx2.HTTPError,
        ConnectionError,
        TimeoutError,
    )


def _matches(path: Path, sibling: RepoSibling) -> bool:
    """Whether a cached file still holds the bytes the Hub's tree lists for it."""
    data = path.read_bytes()
    if sibling.lfs is not None:
        return hashlib.sha256(data).hexdigest() == sibling.lfs.sha256
    return sibling.blob_id is None or git_hash(data) == sibling.blob_id


class HubSession:
    """Check Hub repos and open fix PRs; snapshots live in ``workdir`` (the caller owns it).

    Keep ``workdir`` until results are rendered: a result may still read tokenizer.json.
    """

    def __init__(
        self,
        workdir: str | Path,
        *,
        token: str | None = None,
        timeout: float | None = None,
        hf_api: HfApi | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.token = token  # None: huggingface_hub finds it (HF_TOKEN, `hf auth login`)
        self.timeout = timeout
        self.api = hf_api or HfApi(token=token)

    # --- reading -------------------------------------------------------------------------------
    def list_author(self, author: str) -> list[str]:
        """Model repo ids of a user or organisation."""
        try:
            return [m.id for m in self.api.list_models(author=author)]
        except _hub_errors() as exc:
            message, status = describe_error(exc)
            raise HubError(message, repo_id=author, status=status) from None

    def check(self, repo_id: str, revision: str | None = None) -> RepoResult:
        """Download the stop-relevant files of ``repo_id`` and analyze them (read-only)."""
        try:
            return self._check(repo_id, revision)
        except _hub_errors() as exc:
            message, status = describe_error(exc)
            log.debug("%s: %s", repo_id, message)
            error = HubError(message, repo_id=repo_id, status=status)
            return RepoResult(Path(repo_id), error=error, label=repo_id)

    def check_many(
        self,
        repo_ids: Iterable[str],
        revision: str | None = None,
        *,
        workers: int = 4,
        on_done: Callable[[RepoResult], None] | None = None,
    ) -> list[RepoResult]:
        """``check`` each repo concurrently; results come back in the order given."""
        ids = list(repo_ids)

        def _one(repo_id: str) -> RepoResult:
            result = self.check(repo_id, revision)
            if on_done is not None:
                on_done(result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(_one, ids))

    def _check(self, repo_id: str, revision: str | None) -> RepoResult:
        info = self.api.model_info(
            repo_id, revision=revision, files_metadata=True, timeout=self.timeout
        )
        sha = info.sha
        if sha is None:
            raise HubError("the Hub did not return a commit sha", repo_id=repo_id)
        tree = {s.rfilename: s for s in info.siblings or ()}
        folder = self.workdir / repo_id.replace("/", "--") / sha
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name in sorted(p for p in tree if is_relevant(p)):
            self._fetch(repo_id, sha, tree[name], folder)
        result = api.check(folder, label=repo_id)
        if TOKENIZER_JSON in tree and _needs_tokenizer_json(result):
            log.debug("%s: fetching tokenizer.json to resolve token ids", repo_id)
            self._fetch(repo_id, sha, tree[TOKENIZER_JSON], folder)
            result = api.check(folder, label=repo_id)
        extra: dict[str, object] = {"repo_id": repo_id, "revision": revision or "main", "sha": sha}
        return replace(
            result, path=Path(repo_id), error=_relabel(result.error, folder, repo_id), extra=extra
        )

    def _fetch(self, repo_id: str, sha: str, sibling: RepoSibling, folder: Path) -> None:
        name = sibling.rfilename
        cached = Path(
            hf_hub_download(
                repo_id, name, revision=sha, token=self.token, etag_timeout=self.timeout or 10
            )
        )
        if not _matches(cached, sibling):  # snapshot edited locally: take the Hub's bytes
            log.debug("%s: cached %s differs from the Hub; downloading it apart", repo_id, name)
            fresh = folder.parent / f"{sha}.fresh"
            # force_download: otherwise local_dir copies the (edited) cached file
            cached = Path(
                hf_hub_download(
                    repo_id,
                    name,
                    revision=sha,
                    token=self.token,
                    local_dir=fresh,
                    force_download=True,
                    etag_timeout=self.timeout or 10,
                )
            )
            if not _matches(cached, sibling):
                raise HubError(
                    f"{name}: downloaded bytes do not match the Hub's hash", repo_id=repo_id
                )
        dest = folder / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            dest.symlink_to(cached.resolve())
        except OSError:  # no symlinks (Windows without developer mode)
            shutil.copyfile(cached, dest)

    # --- pull requests ---------------------------------------------------------------------------
    def open_pr(self, result: RepoResult) -> PullRequest | None:
        """Open one PR with the generation_config.json fix, unless an eosfix PR has it already.

        Returns None when there is nothing to fix.
        """
        patch = next((p for p in result.patches if p.file == GENERATION_CONFIG), None)
        if result.check is None or patch is None:
            return None
        repo_id = result.name
        new_bytes = patch.new_text.encode("utf-8")
        try:
            existing = self.find_open_pr(repo_id, new_bytes)
            if existing is not None:
                return existing
            sha = str(result.extra.get("sha"))
            revision = str(result.extra.get("revision", "main"))
            info: CommitInfo = self.api.create_commit(
                repo_id,
                operations=[CommitOperationAdd(GENERATION_CONFIG, new_bytes)],
                commit_message=PR_TITLE,
                commit_description=pr_description(result),
                create_pr=True,
                revision=None if _SHA_RE.match(revision) else revision,
                parent_commit=sha,
            )
        except _hub_errors() as exc:
            message, status = describe_error(exc)
            raise HubError(
                f"cannot open a pull request: {message}", repo_id=repo_id, status=status
            ) from None
        if info.pr_url is None:  # the Hub saw no change: the file already has these bytes
            raise HubError("cannot open a pull request: the Hub reports no change", repo_id=repo_id)
        return PullRequest(info.pr_url, info.pr_num, created=True)

    def find_open_pr(self, repo_id: str, new_bytes: bytes) -> PullRequest | None:
        """An open eosfix PR whose generation_config.json is exactly ``new_bytes``."""
        prs = self.api.get_repo_discussions(
            repo_id, discussion_type="pull_request", discussion_status="open"
        )
        for pr in prs:
            if not pr.title.startswith(PR_TITLE_PREFIX) or pr.git_reference is None:
                continue
            where = self.workdir / "prs" / repo_id.replace("/", "--") / str(pr.num)
            try:
                path = hf_hub_download(
                    repo_id,
                    GENERATION_CONFIG,
                    revision=pr.git_reference,
                    local_dir=where,
                    force_download=True,
                    token=self.token,
                )
            except RemoteEntryNotFoundError:
                continue
            if Path(path).read_bytes() == new_bytes:
                return PullRequest(pr.url, pr.num, created=False)
        return None


def _needs_tokenizer_json(result: RepoResult) -> bool:
    """Whether some id can only come from tokenizer.json (transformers 5 layout, or unlisted)."""
    check = result.check
    if check is None:
        return result.error is not None and TOKENIZER_JSON in str(result.error)
    tok = check.repo.tokenizer_config
    if tok is None or tok.added_tokens_decoder is None:
        return True
    if any(t.id is None for t in check.terminators.terminators if t.kind != STOP_STRING):
        return True
    return check.tokenizer_eos is not None and check.tokenizer_eos.id is None


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


def pr_description(result: RepoResult) -> str:
    """The PR body: what ends a turn (evidence), what the config said, the diff, the runtimes."""
    check = result.check
    assert check is not None
    lines = [
        (
            "This pull request was opened by [eosfix](https://pypi.org/project/eosfix/). It "
            "changes only `eos_token_id` in `generation_config.json`, so that generation stops "
            "where the chat template ends an assistant turn."
        ),
        "",
        "### What ends an assistant turn",
        "",
    ]
    for t in check.terminators.terminators:
        templates = ", ".join(t.templates)
        lines.append(
            f"- `{t.content}` ({t.id_str}): {KIND_TEXT.get(t.kind, t.kind)} "
            f"(template {templates}, probe `{t.probe}`). Rendered:"
        )
        if t.evidence:
            lines += ["", "  ```text", *(f"  {line}" for line in t.evidence.splitlines()), "  ```"]
    lines += [
        "",
        "### What the configuration said",
        "",
        f"`eos_token_id` = `{check.stop.raw}` (from `{check.stop.source}`).",
        "",
    ]
    lines += [f"- **{f.code}** `{f.file}`: `{f.message}`" for f in check.findings]
    lines += ["", "### What changes", "", "```diff"]
    lines += [p.diff().rstrip("\n") for p in result.patches if p.file == GENERATION_CONFIG]
    lines += ["```", "", "### Which runtimes this affects", ""]
    table = runtime_table(check, result.patches)
    lines += [
        "| runtime | reads | stops at every turn end now | after this PR |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {row.runtime} | {row.reads} | {_yes(row.ok_before)} | {_yes(row.ok_after)} |"
        for row in table.rows
    ]
    lines += ["", runtimes_line(table), ""]
    return "\n".join(lines)


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def refusal_reason(result: RepoResult) -> str | None:
    """Why an upload must not go ahead, or None when the folder stops correctly."""
    if result.error is not None:
        return str(result.error)
    if result.status in (Status.FIXABLE, Status.PROBLEMS):
        assert result.check is not None
        errors = [
            f"{f.code} {f.message}" for f in result.check.findings if f.severity.value == "error"
        ]
        hint = " (eosfix can fix this: --fix / fix=True)" if result.status is Status.FIXABLE else ""
        return "would not stop at the end of a turn: " + "; ".join(errors) + hint
    return None


def check_folder(folder: str | Path, *, fix: bool = False) -> RepoResult:
    """Check (and with ``fix``, fix) a local folder before it is uploaded.

    After a fix the folder is checked again, so the result describes what would be uploaded.
    """
    if not fix:
        return api.check(folder)
    fixed = api.fix(folder)
    if fixed.error is not None or not fixed.written:
        return fixed
    return replace(api.check(folder), written=fixed.written)


def upload_checked(
    folder: str | Path, repo_id: str, *, fix: bool = False, **upload_folder_kwargs: Any
) -> CommitInfo:
    """Upload ``folder`` with ``HfApi.upload_folder`` only if it stops at every turn end.

    With ``fix=True`` the folder is fixed first (minimal atomic edit). Raises
    ``UploadRefusedError`` (an ``EosfixError``) and uploads nothing when the folder would
    not stop; other keyword arguments go to ``upload_folder`` (``revision``, ``create_pr``,
    ``commit_message``, ``token``...).

    Example::

        from eosfix.sources.hub import upload_checked
        upload_checked("./out", "me/model-mlx-4bit", fix=True, commit_message="Add weights")
    """
    result = check_folder(folder, fix=fix)
    reason = refusal_reason(result)
    if reason is not None:
        raise UploadRefusedError(f"refusing to upload: {reason}", path=folder, result=result)
    token = upload_folder_kwargs.pop("token", None)
    commit: CommitInfo = HfApi(token=token).upload_folder(
        repo_id=repo_id, folder_path=folder, **upload_folder_kwargs
    )
    return commit
