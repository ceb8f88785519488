"""Writing to the Hub: one fix pull request per repo (never a duplicate), and checked uploads.

Vocabulary:

- **eosfix PR**: a pull request whose title starts with ``PR_TITLE_PREFIX`` and that changes
  only generation_config.json. A repo whose open eosfix PR already holds the exact bytes
  eosfix would propose gets no second one.
- **PR plan**: how a batch opens PRs: at most ``max_prs`` new ones (in the batch's order),
  or none with ``dry_run`` (then it says which it *would* open). Writes go one at a time.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi

from eosfix import pipeline
from eosfix.batch.run import Unit
from eosfix.containers.folder.plan import FilePatch
from eosfix.core.errors import EosfixError
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck, Status
from eosfix.decide.stopids import IN_TURN_KIND, ORDINARY
from eosfix.decide.verdicts import RuntimeTable
from eosfix.pipeline import RepoResult
from eosfix.render.report import placement_text, runtimes_line
from eosfix.sources.hubhttp import describe_error, hub_errors

if TYPE_CHECKING:
    from eosfix.sources.hub import HubReader

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


def _fix_bytes(result: RepoResult) -> bytes | None:
    patch = next(
        (p for p in result.patches if isinstance(p, FilePatch) and p.file == GENERATION_CONFIG),
        None,
    )
    return None if result.check is None or patch is None else patch.new_text.encode("utf-8")


def open_pr(hf_api: HfApi, reader: HubReader, result: RepoResult) -> PullRequest | None:
    """Open one PR with the generation_config.json fix, unless an eosfix PR has it already.

    ``result.extra`` holds the repo's ``sha`` and ``revision``. Returns None when there is
    nothing to fix; raises PrError when the Hub refuses.
    """
    new_bytes = _fix_bytes(result)
    if new_bytes is None:
        return None
    repo_id = result.name
    try:
        existing = find_open_pr(hf_api, reader, repo_id, new_bytes)
        if existing is not None:
            return existing
        revision = str(result.extra.get("revision", "main"))
        info: CommitInfo = hf_api.create_commit(
            repo_id,
            operations=[CommitOperationAdd(GENERATION_CONFIG, new_bytes)],
            commit_message=PR_TITLE,
            commit_description=pr_description(result),
            create_pr=True,
            revision=None if _SHA_RE.match(revision) else revision,
            parent_commit=str(result.extra.get("sha")),
        )
    except hub_errors() as exc:
        message, _ = describe_error(exc)
        raise PrError(f"cannot open a pull request: {message}", path=repo_id) from None
    if info.pr_url is None:  # the Hub saw no change: the file already has these bytes
        raise PrError("cannot open a pull request: the Hub reports no change", path=repo_id)
    return PullRequest(info.pr_url, info.pr_num, created=True)


@dataclass
class PrPlan:
    """Pull requests across a batch: ``max_prs`` new ones at most; ``dry_run`` opens none."""

    hf_api: HfApi
    reader: HubReader
    max_prs: int | None = None
    dry_run: bool = False
    new: int = 0  # opened (or, in a dry run, that would be)
    failed: int = 0
    keep_ids: tuple[int, ...] = ()  # stop ids the fix keeps (--keep-id)

    def wants(self, unit: Unit) -> bool:
        v = unit.verdict
        return v is not None and v.has_patches and not unit.extra.get("pr_url")

    def handle(self, unit: Unit) -> Unit:
        """Open (or find) the PR of one fixable repo; its outcome goes into ``unit.extra``."""
        assert unit.path is not None
        item = unit.item
        fields = item.fields()
        result = dataclasses.replace(
            pipeline.check(unit.path, label=item.repo_id, keep_ids=self.keep_ids),
            extra={"sha": fields.get("sha"), "revision": fields.get("revision", "main")},
        )
        extra: dict[str, Any] = dict(unit.extra)
        try:
            extra.update(self._decide(result))
        except PrError as exc:
            self.failed += 1
            extra.update(pr=f"error: {exc.message}", pr_error=exc.message)
        return unit.but(extra=extra)

    def _decide(self, result: RepoResult) -> dict[str, Any]:
        new_bytes = _fix_bytes(result)
        if new_bytes is None:
            return {}
        over = self.max_prs is not None and self.new >= self.max_prs
        if self.dry_run or over:
            try:
                found = find_open_pr(self.hf_api, self.reader, result.name, new_bytes)
            except hub_errors() as exc:
                raise PrError(f"cannot look for pull requests: {describe_error(exc)[0]}") from None
            if found is not None:
                return {"pr_url": found.url, "pr_created": False, "pr": "already open"}
            if over:
                return {"pr": f"not opened: --max-prs {self.max_prs} reached"}
            self.new += 1
            return {"pr": "would open (dry run)"}
        pr = open_pr(self.hf_api, self.reader, result)
        if pr is None:
            return {}
        self.new += pr.created
        return {
            "pr_url": pr.url,
            "pr_created": pr.created,
            "pr": "opened" if pr.created else "already open",
        }


def pr_description(result: RepoResult) -> str:
    """The PR body: what ends a turn (evidence), what the config said, what is removed and
    why (evidence), the diff, the runtimes before and after."""
    check = result.check
    assert check is not None
    lines = [
        (
            "This pull request was opened by [eosfix](https://pypi.org/project/eosfix/). It "
            "changes only `eos_token_id` in `generation_config.json`, so that generation stops "
            "where the chat template ends an assistant turn, and nowhere inside one."
        ),
        "",
        "### What ends an assistant turn",
        "",
    ]
    have = set(check.stop.ids or ())
    for t in check.terminators.terminators:
        templates = ", ".join(t.templates)
        added = " **Added by this PR.**" if t.id is not None and t.id not in have else ""
        lines.append(
            f"- `{t.content}` ({t.id_str}): {placement_text(t)} "
            f"(template {templates}, probe `{t.probe}`).{added} Rendered:"
        )
        lines += _fenced(t.evidence)
    lines += [
        "",
        "### What the configuration said",
        "",
        f"`eos_token_id` = `{check.stop.raw}` (from `{check.stop.source}`).",
        "",
    ]
    lines += [f"- **{f.code}** `{f.file}`: `{f.message}`" for f in check.findings]
    lines += _removed_lines(check)
    lines += ["", "### What changes", "", "```diff"]
    lines += [p.diff().rstrip("\n") for p in result.patches if p.file == GENERATION_CONFIG]
    lines += ["```", "", "### Which runtimes this affects", ""]
    if result.runtimes is not None:
        lines += _runtime_lines(result.runtimes)
    return "\n".join(lines)


def _fenced(text: str) -> list[str]:
    if not text:
        return []
    return ["", "  ```text", *(f"  {line}" for line in text.splitlines()), "  ```"]


def _removed_lines(check: RepoCheck) -> list[str]:
    """Each id the PR takes out of the list: which token it is, and why it must go."""
    kept = set(check.proposed or ())
    removed = [i for i in dict.fromkeys(check.stop.ids or ()) if check.proposed and i not in kept]
    if not removed:
        return []
    lines = ["", "### What is removed, and why", ""]
    for token_id in removed:
        s = check.review.by_id(token_id)
        if s is None:
            continue
        if s.kind == IN_TURN_KIND:
            lines.append(
                f"- `{s.token}` (id {s.id}): the chat template writes it *inside* an assistant "
                f"turn ({s.reason}), so generation that stops there ends the reply before it "
                "is complete. Rendered:"
            )
            lines += _fenced(s.evidence)
        elif s.kind == ORDINARY:
            lines.append(
                f"- `{s.text}` (id {s.id}): an ordinary text token, not a special or added "
                f"token: {s.reason}."
            )
        else:
            lines.append(f"- `{s.id}`: no token has this id ({s.reason}); it never fires.")
    lines.append("")
    lines.append("The other ids keep their order; the tokenizer's `eos_token` is never removed.")
    return lines


def _runtime_lines(table: RuntimeTable) -> list[str]:
    head = "| runtime | reads | stops at every turn end now | stops inside a reply now |"
    lines = [f"{head} after this PR |", "| --- | --- | --- | --- | --- |"]
    for row in table.rows:
        if row.runtime in table.not_applicable:
            lines.append(f"| {row.runtime} | {row.reads} | n/a (no config.json) | | |")
            continue
        # a pipe splits a table cell even inside a code span unless escaped
        early = ", ".join(f"`{text}`".replace("|", "\\|") for text in row.early_before) or "no"
        stops = _yes(not row.misses_before)
        lines.append(f"| {row.runtime} | {row.reads} | {stops} | {early} | {_yes(row.ok_after)} |")
    return [*lines, "", runtimes_line(table), ""]


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


# --- uploads ---------------------------------------------------------------------------------


class UploadRefusedError(EosfixError):
    """``upload_checked`` refused: the folder would not stop at the end of a turn."""

    def __init__(self, message: str, *, path: str | Path, result: RepoResult) -> None:
        super().__init__(message, path=path)
        self.result = result


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
