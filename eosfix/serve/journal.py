"""The bot's journal: every accepted push and every outcome, one JSON line each, fsynced before
the webhook is answered, so a restart (even after ``kill -9``) loses no push.

- ``push``: a webhook was accepted (``id``, ``repo``, ``sha``, ``ref``);
- ``done``: a push was handled (``id``, ``repo``, ``sha``, ``outcome``, optional ``pr``, ``error``).

Pending = pushes without a ``done``. Delivery is at least once: a push handled but not yet
marked done when the process died is handled again, which is harmless (a check reads; a PR
is updated, never doubled). Only the newest pending push of a repo matters (the newer commit
contains the older one): opening the journal drops older ones. A torn last line (a kill
mid-write) is ignored. Opening compacts the file to what is pending plus each commit's last
outcome.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eosfix.core.fileio import fsync_dir, write_atomic

JOURNAL = "journal.jsonl"


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
    is), ``would_open_pr`` (dry run), ``superseded``, ``error``."""

    outcome: str
    pr: str | None = None
    error: str | None = None


def new_push(repo: str, sha: str, ref: str) -> Push:
    return Push(uuid.uuid4().hex, repo, sha, ref, time.time())


class Journal:
    """The queue file of one bot (thread-safe; every write is fsynced)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / JOURNAL
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        self.pending, self.last = self._replay()
        self._compact()
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open

    def _replay(self) -> tuple[dict[str, Push], dict[tuple[str, str], Outcome]]:
        """(newest pending push per repo, last outcome per (repo, sha))."""
        pushes: dict[str, Push] = {}
        done: dict[str, Outcome] = {}
        last: dict[tuple[str, str], Outcome] = {}
        order: list[Push] = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line
                if not isinstance(rec, dict):
                    continue
                if rec.get("op") == "push":
                    p = Push(rec["id"], rec["repo"], rec["sha"], rec.get("ref", ""), rec["at"])
                    pushes[p.id] = p
                    order.append(p)
                elif rec.get("op") == "done":
                    out = Outcome(rec["outcome"], rec.get("pr"), rec.get("error"))
                    done[rec["id"]] = out
                    last[(rec["repo"], rec["sha"])] = out
        pending: dict[str, Push] = {}
        for p in order:
            if p.id not in done:
                pending[p.repo] = p  # a newer push of the same repo replaces an older one
        return pending, last

    def _compact(self) -> None:
        lines = [
            json.dumps({"op": "done", "id": "-", "repo": repo, "sha": sha, **asdict(out)})
            for (repo, sha), out in self.last.items()
        ]
        lines += [json.dumps({"op": "push", **asdict(p)}) for p in self.pending.values()]
        write_atomic(self.path, ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
        fsync_dir(self.folder)

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def accept(self, push: Push) -> None:
        """Record a push before the webhook is answered (durable once this returns)."""
        self._append({"op": "push", **asdict(push)})

    def finish(self, push: Push, outcome: Outcome) -> None:
        self._append(
            {"op": "done", "id": push.id, "repo": push.repo, "sha": push.sha, **asdict(outcome)}
        )
        with self._lock:
            self.last[(push.repo, push.sha)] = outcome

    def handled(self, repo: str, sha: str) -> Outcome | None:
        """The outcome of a push of this very commit, if one was handled (a redelivery); a
        push that ended in an error is tried again."""
        with self._lock:
            out = self.last.get((repo, sha))
        return None if out is None or out.outcome == "error" else out

    def close(self) -> None:
        with self._lock:
            self._fh.close()
