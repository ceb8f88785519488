"""The bot's worker: each accepted push checked at its revision, then acted on by policy.

- One repo at a time per repo: a push that arrives while its repo is being handled waits, and
  only the newest waiting push of a repo is handled (the newer commit contains the older).
- ``workers`` repos at once; the check and the Hub writes run in threads.
- A push is retried with a growing pause when the Hub fails in a way that passes (5xx, 429,
  network); a redelivered push of a commit already handled is not handled again.
- ``pr``: the fix PR is opened, or the open eosfix PR is kept or brought up to date (never a
  second one); ``report``: a log line, and with ``comment`` one discussion per repo commented.
- ``dry_run`` writes nothing to the Hub and says what it would have done.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from eosfix.batch.hubapi import HubSession
from eosfix.core.outcome import verdict_of
from eosfix.pipeline import RepoResult
from eosfix.serve.config import ServeConfig
from eosfix.serve.journal import Journal, Outcome, Push
from eosfix.sources.hub import HubError
from eosfix.sources.hubwrite import PrOutcome

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
    """A Hub failure worth trying again: no answer, a 5xx or a 429."""
    status = getattr(error, "status", None)
    return status is None or status == 429 or status >= 500


def report_markdown(result: RepoResult) -> str:
    """A short report for a discussion: what eosfix found, and how to fix it. The repo's
    texts (file names, messages quoting its tokens) show as text, never as Markdown."""
    from eosfix.render.markdown import code, escape

    check = result.check
    assert check is not None
    lines = [
        f"eosfix checked commit {code(str(result.extra.get('sha')))} and found:",
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
        """Accept a push: durable in the journal first, then queued."""
        await asyncio.to_thread(self.journal.accept, push)
        self.metrics["accepted"] += 1
        with self._lock:
            if push.repo in self.pending:
                self.metrics["superseded"] += 1
            self.pending[push.repo] = push
        self._spawn(push.repo)

    def _spawn(self, repo: str) -> None:
        if repo in self.running or self._stopping:
            return
        self.running.add(repo)
        task = asyncio.get_running_loop().create_task(self._drain(repo))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, repo: str) -> None:
        assert self._slots is not None
        try:
            while not self._stopping:
                with self._lock:
                    push = self.pending.pop(repo, None)
                if push is None:
                    return
                async with self._slots:
                    self.metrics["in_flight"] += 1
                    try:
                        outcome = await asyncio.to_thread(self.handle, push)
                    finally:
                        self.metrics["in_flight"] -= 1
                await asyncio.to_thread(self.journal.finish, push, outcome)
                self.metrics[f"outcome_{outcome.outcome}"] += 1
        finally:
            self.running.discard(repo)

    async def stop(self, grace: float) -> None:
        """Take no new work; give work in flight ``grace`` seconds. What is not finished stays
        pending in the journal and is handled after the next start."""
        self._stopping = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    def depth(self) -> int:
        with self._lock:
            return len(self.pending)

    # --- one push -------------------------------------------------------------------------

    def handle(self, push: Push) -> Outcome:
        """Check the repo at the pushed commit and act by policy (runs in a thread)."""
        done = self.journal.handled(push.repo, push.sha)
        if done is not None:
            self.metrics["redelivered"] += 1
            return done
        error: BaseException | None = None
        for attempt in range(1, self.config.attempts + 1):
            try:
                return self._handle_once(push)
            except HubError as exc:
                error = exc
                if not _transient(exc) or attempt == self.config.attempts:
                    break
                self.metrics["retries"] += 1
                self.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
        self.metrics["errors"] += 1
        message = getattr(error, "message", str(error))
        self._log(push, "error", error=message)
        return Outcome("error", error=message)

    def _handle_once(self, push: Push) -> Outcome:
        result = self.session.check(push.repo, revision=push.sha)
        self.metrics["checks"] += 1
        if result.error is not None:
            if isinstance(result.error, HubError):
                raise result.error
            self._log(push, "error", error=str(result.error))
            return Outcome("error", error=str(result.error))
        verdict = _verdict(result)
        if verdict not in _NEEDS_FIX:
            self._log(push, "checked", verdict=verdict)
            return Outcome("checked")
        if self.config.policy == "pr" and result.patches:
            return self._pull_request(push, result, verdict)
        return self._report(push, result, verdict)

    def _pull_request(self, push: Push, result: RepoResult, verdict: str) -> Outcome:
        if self.config.dry_run:
            self._log(push, "would_open_pr", verdict=verdict)
            return Outcome("would_open_pr")
        pr = self.session.open_pr(result)
        if pr is None:  # nothing generation_config.json can carry
            return self._report(push, result, verdict)
        outcome = _PR_OUTCOMES[pr.outcome]
        fields = {"reason": pr.left} if pr.left else {}
        self._log(push, outcome, verdict=verdict, pr=pr.url, **fields)
        return Outcome(outcome, pr=pr.url)

    def _report(self, push: Push, result: RepoResult, verdict: str) -> Outcome:
        url = None
        if self.config.comment and not self.config.dry_run:
            url = self._comment(push.repo, report_markdown(result))
        self._log(push, "reported", verdict=verdict, discussion=url)
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
            from eosfix.sources.hubhttp import describe_error

            message, status = describe_error(exc)
            raise HubError(f"cannot comment: {message}", repo_id=repo_id, status=status) from None
        self.metrics["comments"] += 1
        return str(created.url)

    def _log(self, push: Push, outcome: str, **fields: Any) -> None:
        log.info(
            "push handled",
            extra={"fields": {"repo": push.repo, "sha": push.sha, "outcome": outcome, **fields}},
        )


def _verdict(result: RepoResult) -> str:
    c = result.check
    return verdict_of(
        result.status.value,
        written=False,
        has_findings=c is not None and bool(c.findings),
        has_patches=bool(result.patches),
    )
