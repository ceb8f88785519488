"""The bot's worker: each accepted push checked at its branch's head, then acted on by policy.

- A push is handled by checking its branch's head at that moment, whatever commit the webhook
  named: the Hub does not promise to deliver webhooks in the order of their commits, and a
  webhook may name a commit it does not know. The outcome is recorded for the push and, when
  the head was another commit (``checked``), for that commit too (its own webhook, arriving
  after, is then a redelivery). A push whose branch head was handled already is done,
  ``superseded``.
- One repo at a time per repo: a push that arrives while its repo is being handled waits, and
  only one waiting push of a repo is kept (which one does not matter: it checks the head);
  the one it replaced is done, ``superseded``.
- ``workers`` repos at once; the check and the Hub writes run in threads. A push waiting for a
  worker is still queued (``depth``).
- A push is retried with a growing pause when the Hub fails in a way that passes (5xx, 429,
  no answer); any other failure (a repo that does not exist, a file eosfix cannot read) is the
  push's outcome at once. A redelivered push of a commit already handled is not handled, nor
  counted, again.
- Nothing is written to the Hub for a commit the branch has moved on from (a push delivered
  late, or one the journal kept across a restart): its outcome is ``superseded``, and the
  newer commit's push writes. So a PR never goes back to an older commit's fix.
- ``pr``: the fix PR is opened, or the open eosfix PR is kept or brought up to date (never a
  second one); ``report``: a log line, and with ``comment`` one discussion per repo commented.
- ``dry_run`` writes nothing to the Hub and says what it would have done.
- A crash while handling one push (a bug) is that push's ``error`` outcome, counted
  (``crashed``) and logged with its traceback; the worker goes on. Failed outcomes are logged
  as warnings, crashes as errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from eosfix.core.outcome import verdict_of
from eosfix.result import RepoResult
from eosfix.serve.config import ServeConfig
from eosfix.serve.journal import Journal, Outcome, Push
from eosfix.sources.hub.http import describe_error, hub_errors
from eosfix.sources.hub.read import HubEntry, HubError
from eosfix.sources.hub.write import PrOutcome
from eosfix.targets.session import HubSession

log = logging.getLogger("eosfix.serve")

REPORT_TITLE = "[eosfix] Generation may not stop at the end of each assistant turn"
_NEEDS_FIX = ("fixable", "problems")

# What became of the fix PR (HubSession.open_pr), as the journal and /metrics name it.
_PR_OUTCOMES = {
    PrOutcome.OPENED: "pr_opened",
    PrOutcome.UPDATED: "pr_updated",
    PrOutcome.UNCHANGED: "pr_unchanged",
    PrOutcome.LEFT: "pr_left",  # an eosfix PR someone else opened: not pushed onto
    PrOutcome.WOULD_UPDATE: "would_update_pr",
    PrOutcome.CARRIED_OVER: "pr_unchanged",
}


def _transient(error: BaseException) -> bool:
    """A Hub failure worth trying again: no answer (no status), a 5xx or a 429."""
    status = getattr(error, "status", None)
    return status is None or status == 429 or status >= 500


def report_markdown(result: RepoResult) -> str:
    """A short report for a discussion: what eosfix found, and how to fix it. The repo's
    texts (file names, messages quoting its tokens) show as text, never as Markdown."""
    from eosfix.render.markdown import code, escape

    check = result.check
    assert check is not None
    lines = [
        f"eosfix checked commit {code(str(result.hub.sha if result.hub else None))} and found:",
        "",
        *(f"- **{f.code}** {code(f.file)}: {escape(f.message)}" for f in check.findings),
        "",
        (
            "`pip install eosfix && eosfix fix ./your-model` repairs what can be repaired; "
            "`eosfix explain ./your-model` shows the evidence."
        ),
    ]
    return "\n".join(lines)


class Bot:
    """Pushes in (``submit``), outcomes into the journal; counts for ``/metrics``."""

    def __init__(
        self,
        config: ServeConfig,
        journal: Journal,
        session: HubSession | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from eosfix.render.pr import pr_description

        self.config = config
        self.journal = journal
        self.session = session or HubSession(token=config.token, describe=pr_description)
        self.sleep = sleep
        self.metrics: Counter[str] = Counter()
        self.pending: dict[str, Push] = dict(journal.pending)
        self.running: set[str] = set()
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._slots: asyncio.Semaphore | None = None

    # --- the queue ------------------------------------------------------------------------

    def start(self) -> None:
        """Start handling what the journal kept from the last run (inside the event loop)."""
        self._slots = asyncio.Semaphore(self.config.workers)
        for repo in list(self.pending):
            self._spawn(repo)

    async def submit(self, push: Push) -> None:
        """Accept a push: durable in the journal first, then queued; a push of the repo that
        was waiting is done (superseded)."""
        await asyncio.to_thread(self.journal.accept, push)
        self.metrics["accepted"] += 1
        with self._lock:
            replaced = self.pending.get(push.repo)
            self.pending[push.repo] = push
        if replaced is not None:
            await self._finish(replaced, Outcome("superseded"))
        self._spawn(push.repo)

    def _spawn(self, repo: str) -> None:
        if repo in self.running or self._stopping:
            return
        self.running.add(repo)
        task = asyncio.get_running_loop().create_task(self._drain(repo))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, repo: str) -> None:
        """Handle the repo's pushes, newest first, one at a time. Never raises: a failure
        is the push's outcome (``handle``), a journal that cannot be written is logged."""
        assert self._slots is not None
        try:
            while not self._stopping:
                async with self._slots:  # waiting here, the push is still queued
                    with self._lock:
                        taken = None if self._stopping else self.pending.pop(repo, None)
                    if taken is None:
                        return
                    self.metrics["in_flight"] += 1
                    try:  # in flight until its outcome is recorded and counted
                        outcome, fresh = await asyncio.to_thread(self._handle, taken)
                        await self._finish(taken, outcome, count=fresh)
                    finally:
                        self.metrics["in_flight"] -= 1
        except Exception:  # the task must not die unseen
            self.metrics["crashed"] += 1
            log.exception("worker crashed", extra={"fields": {"repo": repo}})
        finally:
            self.running.discard(repo)

    async def _finish(self, push: Push, outcome: Outcome, *, count: bool = True) -> None:
        """Record the outcome in the journal and count it (``count``: not a redelivery)."""
        try:
            await asyncio.to_thread(self.journal.finish, push, outcome)
        except OSError as exc:  # a full disk: the push stays pending for the next start
            self.metrics["journal_errors"] += 1
            log.error(
                "cannot record an outcome in the journal",
                extra={"fields": {"repo": push.repo, "sha": push.sha, "error": str(exc)}},
            )
        if count:
            self.metrics[f"outcome_{outcome.outcome}"] += 1
            if outcome.outcome == "error":
                self.metrics["errors"] += 1

    async def stop(self, grace: float) -> None:
        """Take no new work; give work in flight ``grace`` seconds. What is not finished stays
        pending in the journal and is handled after the next start."""
        self._stopping = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    def waiting(self, repo: str) -> str | None:
        """The commit of the repo's push waiting for a worker, if one is."""
        with self._lock:
            push = self.pending.get(repo)
        return push.sha if push is not None else None

    def depth(self) -> int:
        """Pushes accepted and not yet taken by a worker."""
        with self._lock:
            return len(self.pending)

    # --- one push -------------------------------------------------------------------------

    def handle(self, push: Push) -> Outcome:
        """Check the repo at the pushed commit and act by policy (runs in a thread); a
        redelivery gets the earlier outcome. Never raises."""
        return self._handle(push)[0]

    def _handle(self, push: Push) -> tuple[Outcome, bool]:
        """``handle``, and whether the outcome is new (to count; not for a redelivery)."""
        done = self.journal.handled(push.repo, push.sha)
        if done is not None:
            self.metrics["redelivered"] += 1
            return done, False
        try:
            return self._attempts(push), True
        except Exception as exc:  # a bug: this push fails, the bot goes on
            self.metrics["crashed"] += 1
            fields = {"repo": push.repo, "sha": push.sha, "outcome": "error"}
            log.exception("push crashed", extra={"fields": fields})
            return Outcome("error", error=f"internal error: {type(exc).__name__}: {exc}"), True

    def _attempts(self, push: Push) -> Outcome:
        error: HubError | None = None
        for attempt in range(1, self.config.attempts + 1):
            try:
                return self._handle_once(push)
            except HubError as exc:
                error = exc
                if not _transient(exc) or attempt == self.config.attempts:
                    break
                self.metrics["retries"] += 1
                self.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
        assert error is not None
        self._log(push, "error", error=error.message)
        return Outcome("error", error=error.message)

    def _handle_once(self, push: Push) -> Outcome:
        result = self.session.check(push.repo, revision=_branch(push))
        self.metrics["checks"] += 1
        if result.error is not None:
            if isinstance(result.error, HubError):
                raise result.error
            self._log(push, "error", error=str(result.error))
            return Outcome("error", error=str(result.error))
        checked = _commit_of(result) or push.sha
        if checked != push.sha and self.journal.handled(push.repo, checked) is not None:
            reason = f"the branch is at {checked}, handled already"
            self._log(push, "superseded", checked=checked, reason=reason)
            return Outcome("superseded")
        outcome = self._act(push, result, checked)
        if checked == push.sha or outcome.outcome in ("superseded", "error"):
            return outcome
        return dataclasses.replace(outcome, checked=checked)

    def _act(self, push: Push, result: RepoResult, checked: str) -> Outcome:
        """Act by policy on the check of ``checked``, the branch's head when it was read."""
        at = {} if checked == push.sha else {"checked": checked}
        verdict = _verdict(result)
        if verdict not in _NEEDS_FIX:
            self._log(push, "checked", verdict=verdict, **at)
            return Outcome("checked")
        writes = not self.config.dry_run and (self.config.policy == "pr" or self.config.comment)
        head = self._head(push) if writes else checked
        if head != checked:  # pushed to while checked: that push writes (it may be on its way)
            self._log(push, "superseded", verdict=verdict, reason=f"the branch is at {head}", **at)
            return Outcome("superseded")
        if self.config.policy == "pr" and result.patches:
            return self._pull_request(push, result, verdict, at)
        return self._report(push, result, verdict, at)

    def _head(self, push: Push) -> str | None:
        """The commit the pushed branch is at now."""
        try:
            return self.session.reader.resolve(HubEntry(push.repo, _branch(push))).sha
        except hub_errors() as exc:
            message, status = describe_error(exc)
            raise HubError(message, repo_id=push.repo, status=status) from None

    def _pull_request(
        self, push: Push, result: RepoResult, verdict: str, at: dict[str, str]
    ) -> Outcome:
        if self.config.dry_run:
            self._log(push, "would_open_pr", verdict=verdict, **at)
            return Outcome("would_open_pr")
        pr = self.session.open_pr(result)
        if pr is None:  # nothing generation_config.json can carry
            return self._report(push, result, verdict, at)
        outcome = _PR_OUTCOMES[pr.outcome]
        fields = {"reason": pr.left} if pr.left else {}
        self._log(push, outcome, verdict=verdict, pr=pr.url, **at, **fields)
        return Outcome(outcome, pr=pr.url)

    def _report(self, push: Push, result: RepoResult, verdict: str, at: dict[str, str]) -> Outcome:
        url = None
        if self.config.comment and not self.config.dry_run:
            url = self._comment(push.repo, report_markdown(result))
        self._log(push, "reported", verdict=verdict, discussion=url, **at)
        return Outcome("reported", pr=url)

    def _comment(self, repo_id: str, text: str) -> str:
        """Comment on the open eosfix discussion of the repo, or open one."""
        api = self.session.api
        try:
            for d in api.get_repo_discussions(repo_id, discussion_type="discussion"):
                if d.status == "open" and d.title == REPORT_TITLE:
                    api.comment_discussion(repo_id, d.num, text)
                    self.metrics["comments"] += 1
                    return str(d.url)
            created = api.create_discussion(repo_id, title=REPORT_TITLE, description=text)
        except Exception as exc:  # noqa: BLE001 - huggingface_hub raises many kinds
            message, status = describe_error(exc)
            raise HubError(f"cannot comment: {message}", repo_id=repo_id, status=status) from None
        self.metrics["comments"] += 1
        return str(created.url)

    def _log(self, push: Push, outcome: str, **fields: Any) -> None:
        """One line per push handled; a failed one is a warning."""
        level = logging.WARNING if outcome == "error" else logging.INFO
        log.log(
            level,
            "push handled",
            extra={"fields": {"repo": push.repo, "sha": push.sha, "outcome": outcome, **fields}},
        )


def _branch(push: Push) -> str:
    return push.ref.removeprefix("refs/heads/")


def _commit_of(result: RepoResult) -> str | None:
    """The commit a check read (the revision it was asked for, resolved by the Hub)."""
    return result.hub.sha if result.hub is not None else None


def _verdict(result: RepoResult) -> str:
    c = result.check
    return verdict_of(
        result.status.value,
        written=False,
        has_findings=c is not None and bool(c.findings),
        has_patches=bool(result.patches),
    )
