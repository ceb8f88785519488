"""The bot's journal: every accepted push and every outcome, one JSON line each, fsynced before
the webhook is answered, so a restart (even after ``kill -9``) loses no push.

- ``push``: a webhook was accepted (``id``, ``repo``, ``sha``, ``ref``, ``at``);
- ``done``: a push was handled (``id``, ``repo``, ``sha``, ``outcome``, optional ``pr``,
  ``error``, and ``checked``: the commit its branch was at, when that was not the pushed
  one); a push replaced by another while it waited is done too (``superseded``).

Pending = each repo's newest push, unless it is done: an older push of the repo never runs
again (the newer commit contains it), whether or not its ``superseded`` line made it to disk.
Delivery is at least once: a push handled but not yet marked done when the process died is
handled again, which is harmless (a check reads; a PR is updated, never doubled, and never
with an older commit's fix: ``eosfix.serve.bot``). A torn last line (a kill mid-write) is
ignored.

The file stays small: on opening, and whenever it has grown to four times what it must keep
(at least ``COMPACT_AT`` lines), it is rewritten to the pushes not yet done plus each repo's
last ``KEEP`` outcomes (what tells a redelivered push from a new one).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eosfix.core.fileio import fsync_dir, write_atomic

JOURNAL = "journal.jsonl"
KEEP = 8  # outcomes kept per repo
COMPACT_AT = 512  # lines, at least, before the file is rewritten


@dataclass(frozen=True)
class Push:
    """One accepted push to a watched repo's default branch."""

    id: str
    repo: str
    sha: str
    ref: str = "refs/heads/main"
    at: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """How a push was handled: ``checked`` (healthy), ``reported``, ``pr_opened``,
    ``pr_updated``, ``pr_unchanged``, ``pr_left`` (an eosfix PR by someone else, left as it
    is), ``would_open_pr`` (dry run), ``superseded`` (a newer push replaced it, or the branch
    had moved on), ``error``. ``checked``: the commit checked, when the branch was at
    another one than the push named (the outcome is that commit's too)."""

    outcome: str
    pr: str | None = None
    error: str | None = None
    checked: str | None = None


def new_push(repo: str, sha: str, ref: str) -> Push:
    return Push(uuid.uuid4().hex, repo, sha, ref, time.time())


class Journal:
    """The queue file of one bot (thread-safe; every write is fsynced)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / JOURNAL
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        self._open: dict[str, Push] = {}  # id -> push accepted and not done, oldest first
        self._last: dict[str, OrderedDict[str, Outcome]] = {}  # repo -> sha -> outcome
        self._replay()
        self._lines = 0
        self._fh = self._rewrite()

    # --- reading it back ------------------------------------------------------------------

    def _replay(self) -> None:
        if not self.path.exists():
            return
        pushes: list[Push] = []
        done: set[str] = set()
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    continue
                if rec.get("op") == "push":
                    pushes.append(
                        Push(rec["id"], rec["repo"], rec["sha"], rec.get("ref", ""), rec["at"])
                    )
                elif rec.get("op") == "done":
                    done.add(rec["id"])
                    out = Outcome(
                        rec["outcome"], rec.get("pr"), rec.get("error"), rec.get("checked")
                    )
                    self._remember(rec["repo"], rec["sha"], out)
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
        newest: dict[str, Push] = {}
        for push in pushes:
            newest[push.repo] = push  # a newer push of the same repo replaces an older one
        self._open = {p.id: p for p in pushes if newest[p.repo] is p and p.id not in done}

    def _remember(self, repo: str, sha: str, outcome: Outcome) -> None:
        kept = self._last.setdefault(repo, OrderedDict())
        for commit in dict.fromkeys((sha, outcome.checked or sha)):
            kept[commit] = outcome
            kept.move_to_end(commit)
        while len(kept) > KEEP:
            kept.popitem(last=False)

    # --- keeping it small -------------------------------------------------------------------

    def _rewrite(self) -> Any:
        """Write what must be kept to a new file (atomically) and open it for appending."""
        lines = [
            json.dumps({"op": "done", "id": "-", "repo": repo, "sha": sha, **asdict(out)})
            for repo, kept in self._last.items()
            for sha, out in kept.items()
        ]
        lines += [json.dumps({"op": "push", **asdict(p)}) for p in self._open.values()]
        write_atomic(self.path, ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
        fsync_dir(self.folder)
        self._lines = len(lines)
        return open(self.path, "a", encoding="utf-8")  # kept open

    def _append(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._lines += 1
        kept = len(self._open) + sum(len(k) for k in self._last.values())
        if self._lines > max(COMPACT_AT, 4 * kept):
            self._fh.close()
            self._fh = self._rewrite()

    # --- the bot's calls ------------------------------------------------------------------

    @property
    def pending(self) -> dict[str, Push]:
        """Each repo's newest push not yet done (what a start handles)."""
        with self._lock:
            return {p.repo: p for p in self._open.values()}

    def accept(self, push: Push) -> None:
        """Record a push before the webhook is answered (durable once this returns)."""
        with self._lock:
            self._open[push.id] = push
            self._append({"op": "push", **asdict(push)})

    def finish(self, push: Push, outcome: Outcome) -> None:
        with self._lock:
            self._open.pop(push.id, None)
            self._remember(push.repo, push.sha, outcome)
            self._append(
                {"op": "done", "id": push.id, "repo": push.repo, "sha": push.sha, **asdict(outcome)}
            )

    def last_outcome(self, repo: str, sha: str) -> Outcome | None:
        """The last outcome recorded for this commit of the repo (one of its latest)."""
        with self._lock:
            kept = self._last.get(repo)
            return kept.get(sha) if kept is not None else None

    def handled(self, repo: str, sha: str) -> Outcome | None:
        """The outcome of a push of this very commit, if one was handled (a redelivery); a
        push that ended in an error, or was superseded, is handled if it comes again."""
        out = self.last_outcome(repo, sha)
        return None if out is None or out.outcome in ("error", "superseded") else out

    def close(self) -> None:
        with self._lock:
            self._fh.close()
