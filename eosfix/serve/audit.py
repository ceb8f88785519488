"""The page's audit of a Hub user or organisation: ``eosfix hub --author``'s batch
(``eosfix.batch.hub.HubSource`` in a ``Run``), in a thread, with its progress polled by the page
(``GET /audit/{id}/progress``, JSON), a chart of the repos that stop in each runtime and of the
verdicts, a table of every repo (sortable by script, each linking its check), and the run's
CSV and JSON downloads written by ``eosfix.render.batch`` (the schema of ``eosfix hub --format
csv|json``).

Bounded: at most ``RUNNING`` audits at once (503 past it), the first ``MAX_REPOS`` repos of an
author (then the run stops whole, as Ctrl-C does, and the page says so), the last ``KEPT``
audits kept in memory (nothing on disk). Read without a token (not the bot's, not a
visitor's): public repos only.
"""

from __future__ import annotations

import io
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from eosfix.batch.hub import HubSource
from eosfix.batch.run import Result, Run
from eosfix.core.outcome import VERDICTS
from eosfix.render.auditrows import AuditRow, audit_row
from eosfix.render.batch import JSON_DETAIL, write_csv, write_json
from eosfix.render.words import no_model_repos
from eosfix.runtimes import RUNTIMES
from eosfix.sources.hub.read import HubReader

RUNNING = 2
MAX_REPOS = 1000
KEPT = 20
CHECKED = frozenset(("fixed", "fixable", "problems", "warned", "ok"))  # a verdict per runtime


@dataclass
class Audit:
    id: str
    author: str
    done: int = 0
    listed: int = 0
    finished: bool = False
    capped: bool = False
    error: str | None = None
    rows: list[AuditRow] = field(default_factory=list)
    csv: str = ""
    json: str = ""

    @property
    def empty(self) -> str | None:
        """What an audit that found no model repo at all says (as ``eosfix hub --author``
        does, which exits 2); None otherwise."""
        if not self.finished or self.rows or self.error:
            return None
        return no_model_repos(self.author, author=True)

    def progress(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "listed": self.listed,
            "finished": self.finished,
            "capped": self.capped,
            "error": self.error,
        }

    def chart(self) -> dict[str, Any]:
        """Per runtime, of the checked repos it loads (a GGUF repo: llama.cpp and ``ollama run
        hf.co``, never transformers), how many stop at every turn end (and never inside a
        reply) now and how many do not; per verdict, how many repos. ``checked``: the repos
        with a verdict per runtime (a chat template and a model), of ``done`` checked."""
        checked = [r for r in self.rows if r.verdict in CHECKED]
        known = [rt.name for rt in RUNTIMES]
        names = [*known, *sorted({n for r in checked for n in r.loads} - set(known))]
        runtimes = []
        for name in names:
            loading = [r for r in checked if name in r.loads]
            bad = sum(1 for r in loading if name in r.runs_on or name in r.stops_early)
            if loading:
                runtimes.append(
                    {"name": name, "loads": len(loading), "stops": len(loading) - bad,
                     "misses": bad}
                )  # fmt: skip
        verdicts = Counter(r.verdict for r in self.rows)
        words = Counter(r.words for r in self.rows)
        return {
            "done": len(self.rows),
            "checked": len(checked),
            "runtimes": runtimes,
            "verdicts": [{"name": v, "count": verdicts[v]} for v in VERDICTS if verdicts[v]],
            "words": sorted(words.items(), key=lambda kv: (-kv[1], kv[0])),
            # a pull request fixes these (as eosfix hub --pr opens them); the header of a GGUF
            # repo's files no pull request can change: a new file fixes those
            "to_fix": sum(1 for r in self.rows if r.pr_file is not None),
            "new_files": sum(
                1 for r in self.rows if r.verdict == "fixable" and r.gguf and r.pr_file is None
            ),
            "failing": [r for r in runtimes if r["misses"]],
            "stopping": [r for r in runtimes if not r["misses"]],
        }


class _Replay:
    """A finished run, iterated again for a second output (its results were kept)."""

    def __init__(self, run: Run, results: list[Result]) -> None:
        self.run = run
        self.source = run.source
        self.results = results
        self.interrupted = run.interrupted
        self.exit_code = run.exit_code

    def __iter__(self) -> Any:
        return iter(self.results)

    def summary(self) -> dict[str, Any]:
        return self.run.summary()


class Audits:
    """The audits of one app."""

    def __init__(self) -> None:
        self.audits: dict[str, Audit] = {}
        self.lock = threading.Lock()

    def running(self) -> int:
        return sum(1 for a in self.audits.values() if not a.finished)

    def start(self, author: str) -> Audit | None:
        """A new audit of ``author`` in a thread, or None when ``RUNNING`` already run."""
        with self.lock:
            if self.running() >= RUNNING:
                return None
            audit = Audit(secrets.token_urlsafe(9), author)
            self.audits[audit.id] = audit
            for old in list(self.audits)[:-KEPT]:
                if self.audits[old].finished:
                    del self.audits[old]
        threading.Thread(target=self._run, args=(audit,), daemon=True).start()
        return audit

    def _run(self, audit: Audit) -> None:
        try:
            source = HubSource(HubReader(token=False), author=audit.author)
            run = Run(source, detail=JSON_DETAIL)
            results: list[Result] = []
            try:
                for result in run:
                    results.append(result)
                    audit.rows.append(audit_row(result))
                    audit.done = len(results)
                    audit.listed = max(source.seen, audit.done)
                    if audit.done >= MAX_REPOS and not audit.capped:
                        audit.capped = True
                        run.stop()
            finally:
                source.close()
            if source.errors:
                audit.error = "; ".join(f"{name}: {why}" for name, why in source.errors)
            replay = cast(Run, _Replay(run, results))
            out = io.StringIO()
            write_json(replay, out)
            audit.json = out.getvalue()
            out = io.StringIO()
            write_csv(replay, out)
            audit.csv = out.getvalue()
        except Exception as exc:  # noqa: BLE001 - the page says what stopped it
            audit.error = f"the audit stopped: {exc}"
        finally:
            audit.finished = True
