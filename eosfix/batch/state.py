"""A state file: every finished repo of a batch, one JSON line each, so a rerun goes on.

Each line is written whole (unbuffered, straight to the file) before the next repo is
reported, so an interrupted run (Ctrl-C) leaves every line complete; a write that fails part
way (a full disk) is cut back to the last whole line; a line cut short by a harder stop
(power loss, SIGKILL) is dropped when the file is read again. A later line for the same repo replaces an
earlier one. Only the repo id, commit and offset of each line stay in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import IO, Any

from eosfix.batch.pool import RETRY_CODE
from eosfix.batch.verdict import Verdict
from eosfix.core.errors import EosfixError


class StateError(EosfixError):
    """The state file cannot be read or written."""


class StateFile:
    """Records finished repos (``record``) and says which are done (``recorded``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.written = 0
        self._done: dict[str, tuple[str, int]] = {}  # repo id -> (sha, offset of its line)
        try:
            self._load()
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            self._out = os.open(self.path, flags | getattr(os, "O_BINARY", 0), 0o666)
            self._in: IO[bytes] = self.path.open("rb")
        except OSError as exc:
            raise StateError(
                f"cannot use as a state file: {exc.strerror or exc}", path=path
            ) from None

    def __len__(self) -> int:
        return len(self._done)

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):  # a line cut short: drop it, so appends stay whole
            with self.path.open("r+b") as f:
                f.truncate(len(complete))
        offset = 0
        for number, line in enumerate(complete.splitlines(keepends=True), 1):
            try:
                record = json.loads(line)
                repo_id, sha = record["repo_id"], record["sha"]
            except (ValueError, KeyError, TypeError):
                raise StateError(
                    f"line {number} is not an eosfix state record", path=self.path
                ) from None
            if isinstance(repo_id, str) and isinstance(sha, str):
                self._done[repo_id] = (sha, offset)
            offset += len(line)

    def recorded(self, repo_id: str, sha: str | None) -> dict[str, Any] | None:
        """The record of ``repo_id`` at commit ``sha``, unless it failed or could not finish
        (errors and EOS103 are retried)."""
        found = self._done.get(repo_id)
        if sha is None or found is None or found[0] != sha:
            return None
        self._in.seek(found[1])
        record: dict[str, Any] = json.loads(self._in.readline())
        unfinished = RETRY_CODE in record.get("codes", ())
        return None if record.get("verdict") == "error" or unfinished else record

    def record(
        self, repo_id: str, sha: str | None, verdict: Verdict, fields: dict[str, Any]
    ) -> None:
        """Append one finished repo, whole, and flush it."""
        line = {"repo_id": repo_id, "sha": sha, "verdict": verdict.name, **verdict.to_state()}
        line["extra"] = {k: v for k, v in fields.items() if k != "resumed"}
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            end = os.fstat(self._out).st_size
        except OSError as exc:
            raise StateError(f"cannot write: {exc.strerror or exc}", path=self.path) from None
        try:
            view = memoryview(data)
            while view:  # os.write may write part of it
                view = view[os.write(self._out, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):  # the last line is whole or absent
                os.ftruncate(self._out, end)
            raise StateError(f"cannot write: {exc.strerror or exc}", path=self.path) from None
        self.written += 1

    def close(self) -> None:
        """Nothing is buffered: closing cannot fail with a write error (or hide one)."""
        with contextlib.suppress(OSError):
            os.close(self._out)
        self._in.close()


def verdict_of_record(record: dict[str, Any]) -> tuple[Verdict, dict[str, Any]]:
    """The Verdict and extra output fields a record kept."""
    return Verdict.from_state(record), dict(record.get("extra") or {})
