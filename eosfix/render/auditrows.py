"""A batch's result as the row its CSV, its Markdown and the page's audit table show
(``AuditRow``), made once from what the batch keeps of it (``eosfix.batch.run.Result``: its
verdict, its table row, its pull request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eosfix.core.repo import GENERATION_CONFIG
from eosfix.render.words import verdict_words

if TYPE_CHECKING:
    from eosfix.batch.run import Result


@dataclass(frozen=True)
class AuditRow:
    """One result of a batch (``eosfix hub``, ``eosfix cache``, the page's audit), as its CSV,
    its Markdown and the page's audit table show it."""

    repo_id: str
    revision: str  # the revision asked (a Hub repo), the refs (a cache snapshot)
    commit: str
    revision_cell: str  # the tables': short sha, then its refs
    verdict: str
    problem: str | None
    runs_on: tuple[str, ...]
    stops_early: tuple[str, ...]
    loads: tuple[str, ...]  # the runtimes that load it (the ones it may count for)
    codes: tuple[str, ...]
    terminators: tuple[tuple[str, int | None], ...]
    eos: str  # current stop ids, as the file writes them
    eos_cell: str  # the tables': the ids, and where they come from unless generation_config
    proposed: str  # the ids after the fix, always written as a list ("" when none)
    note: str  # after the verdict in a table: " -> [ids]", ": error", " (GGUF files)"
    error: str
    gguf: str | None  # a GGUF repo's files summarised
    pr_words: str
    pr_url: str | None
    downloads: int
    # The file a pull request fixes, as ``eosfix hub --pr`` opens one: a repo's
    # generation_config.json, a GGUF repo's params file; None: no pull request can (nothing
    # to fix, or only a GGUF file's header, which needs a new file).
    pr_file: str | None = None

    @property
    def words(self) -> str:
        return verdict_words(self.verdict, self.problem)

    @property
    def pull_request(self) -> str:
        """The CSV's cell: the pull request's address, else what became of it."""
        return self.pr_url or self.pr_words


def audit_row(result: Result) -> AuditRow:
    """The row of one batch result (its verdict and pull request, as the run yields it)."""
    from eosfix.batch.verdict import ids_text

    v, row = result.verdict, result.row()
    fields = result.item.fields()
    if "sha" in fields:  # a Hub repo: the revision asked, then its commit
        revision, commit = fields["revision"], fields["sha"] or ""
    else:  # a cache snapshot: its refs, then its commit
        revision, commit = " ".join(fields.get("refs", ())), fields["revision"]
    state = result.unit.pr
    url = state.url if state is not None else None
    words = (state.words or "") if state is not None else ""
    eos = "" if v.status == "error" else ids_text(v.eos, as_list=v.eos_list)
    proposed = ids_text(v.proposed, as_list=True) if v.proposed is not None else ""
    downloads = getattr(result.item, "downloads", 0)
    if v.gguf is not None:
        pr_file = v.params_file
    else:  # what batch.prs opens a pull request for
        pr_file = GENERATION_CONFIG if v.has_patches and v.status != "error" else None
    return AuditRow(
        row.repo_id, revision, commit, row.revision, row.verdict, row.problem or None,
        tuple(v.runs_on), tuple(v.stops_early), tuple(v.loads), tuple(v.codes),
        tuple(v.terminators), eos, row.eos, proposed, row.note, v.error or "", v.gguf, words,
        url if isinstance(url, str) else None, downloads if isinstance(downloads, int) else 0,
        pr_file,
    )  # fmt: skip
