"""One checked repo as typed rows, read once from its result: every output formats these.
One module: each row type beside the one function that makes it from the result, so that a
field added to a row is filled where it is declared.

``repo_rows(result)`` turns a ``RepoResult`` into ``RepoRows``: the verdict line, each
terminator, each stop id with whether the reader stops on it now and after the fix, one row
per runtime with its state now and after the fix, the fix's changes, the command that does it
and what a pull request carries, a GGUF file's header advice and what ``ollama run hf.co``
gets (``eosfix.render.hubrows``), the notes. The text block (``eosfix.render.text``), the
JSON entry (``eosfix.render.report``), the explain view's runtime table and the page
(``eosfix.serve``) format them; a batch's result is an ``AuditRow``
(``eosfix.render.auditrows``), which its CSV, its Markdown and the page's audit table format.

Rows hold what the result holds, and name it in the words of ``eosfix.render.words``; they
decide nothing (every verdict, stop set and plan comes from the check and the container's plan).
"""

from __future__ import annotations

import functools
import itertools
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from eosfix.analysis.terminators import STOP_STRING, Placement, Terminator
from eosfix.core.codes import CODES, EOS005, EOS013
from eosfix.core.outcome import problem_of, verdict_of
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import Severity
from eosfix.render.hubrows import GgufRows, OllamaHubRow, gguf_rows, is_hub_gguf, ollama_hub_row
from eosfix.render.words import placement_text, probe_words, stop_source_text, verdict_words
from eosfix.result import RepoResult

if TYPE_CHECKING:
    from eosfix.decide.check import RepoCheck
    from eosfix.decide.runtime_table import RuntimeRow, RuntimeTable

NOT_APPLICABLE = "n/a (no config.json)"


class VerdictRow(NamedTuple):
    """A repo's verdict line: its verdict (``eosfix.core.outcome.VERDICTS``), what is wrong
    (``problem``), the runtimes that run on past a turn's end or stop inside a reply now, and
    the texts no stop id can hold (a turn that ends with plain text)."""

    name: str
    container: str
    status: str
    verdict: str
    problem: str | None = None
    runs_on: tuple[str, ...] = ()
    stops_early: tuple[str, ...] = ()
    stop_strings: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        return verdict_words(self.verdict, self.problem)


class TerminatorRow(NamedTuple):
    """A token (or text) that ends a turn: ``optional`` when it ends only the whole chat."""

    content: str
    id: int | None
    kind: str
    placements: tuple[Placement, ...]
    templates: tuple[str, ...]
    probe: str
    evidence: str
    id_source: str | None
    optional: bool = False

    @property
    def required(self) -> bool:
        return not self.optional

    @property
    def placement(self) -> str:
        """Where the template writes it, in words."""
        return placement_text(self)  # type: ignore[arg-type]  # placements and kind

    @property
    def id_str(self) -> str:
        return f"id {self.id}" if self.id is not None else "no id"

    @property
    def seen(self) -> str:
        """Where a probe showed it, in words (``in a conversation that ends with a reply (the
        chat template)``); empty when no probe did."""
        return probe_words(self.probe) if self.probe else ""

    @property
    def stop_string(self) -> bool:
        return self.kind == STOP_STRING


class StopIdRow(NamedTuple):
    """A stop id: what token it is and why it is (or is not) a good place to stop; ``now``
    and ``after``: whether the container's reader stops on it now and once the fix is
    written; ``listed`` False for an id only the fix adds (no file lists it now)."""

    id: int
    kind: str
    token: str | None
    text: str | None
    reason: str
    now: bool
    after: bool
    listed: bool = True


class RuntimeState(NamedTuple):
    """One runtime in one state (now, after the fix, after ``fix --config-json``): each
    terminator with whether it stops there (None: the terminator has no id), and the ids of
    its set that cut a reply (token text -> id)."""

    stops: Mapping[str, bool | None]
    early: Mapping[str, int]
    applicable: bool = True
    texts: frozenset[str] = frozenset()  # the terminators that are plain text

    @property
    def missed(self) -> tuple[str, ...]:
        return tuple(c for c, ok in self.stops.items() if ok is False)

    @property
    def needs_text(self) -> tuple[str, ...]:
        """Plain-text turn ends: only a stop string stops there."""
        return tuple(c for c, ok in self.stops.items() if ok is None and c in self.texts)

    @property
    def state(self) -> str:
        """``na`` (cannot load it), ``bad`` (misses a terminator or cuts a reply), ``text``
        (stops nowhere by id: needs a stop string), ``unknown`` (no terminator has an id),
        ``ok``."""
        if not self.applicable:
            return "na"
        if self.missed or self.early:
            return "bad"
        if self.needs_text:
            return "text"
        return "ok" if any(self.stops.values()) else "unknown"

    @property
    def words(self) -> str:
        """``stops``, ``misses <|im_end|>``, ``stops early at <|end|>``, ``needs a stop
        string``: as the explain table and the page's grid write it."""
        if not self.applicable:
            return NOT_APPLICABLE
        if self.missed:
            cell = "misses " + " ".join(self.missed)
        elif any(self.stops.values()):
            cell = "stops; needs a stop string" if self.needs_text else "stops"
        else:
            cell = "needs a stop string" if self.needs_text else "-"
        if not self.early:
            return cell
        cut = f"stops early at {' '.join(self.early)}"
        return f"{cell}; {cut}" if self.missed else cut


class RuntimeLine(NamedTuple):
    """One runtime's row of the check's table (``RuntimeRow``): its state now, after the fix
    and with ``fix --config-json`` (each made when first read: the JSON entry reads the
    table's own sets), and what its rule stands on; ``applicable`` False when the runtime
    cannot load the container, ``texts`` the terminators that are plain text."""

    row: RuntimeRow
    applicable: bool = True
    texts: frozenset[str] = frozenset()

    @property
    def runtime(self) -> str:
        return self.row.runtime  # its name (the chart's)

    @property
    def label(self) -> str:
        return self.row.label  # ``name==version`` when a version was asked for

    @property
    def now(self) -> RuntimeState:
        return RuntimeState(
            self.row.stops_before, self.row.early_before, self.applicable, self.texts
        )

    @property
    def after(self) -> RuntimeState:
        return RuntimeState(self.row.stops_after, self.row.early_after, self.applicable, self.texts)

    @property
    def with_config_json(self) -> RuntimeState:
        row = self.row
        return RuntimeState(
            row.stops_with_config_json, row.early_with_config_json, self.applicable, self.texts
        )

    @property
    def versions(self) -> str:
        return self.row.versions

    @property
    def basis(self) -> str:
        return self.row.basis

    @property
    def reads(self) -> str:
        return self.row.reads

    @property
    def source(self) -> str:
        return self.row.source

    @property
    def note(self) -> str:
        return self.row.note


class FindingRow(NamedTuple):
    code: str
    severity: Severity
    file: str
    message: str
    fixable: bool

    @property
    def title(self) -> str:
        return CODES[self.code].title if self.code in CODES else ""


class ChangeRow(NamedTuple):
    """One planned (or written) edit: a file's new text or a GGUF key's new value."""

    file: str  # the file, or the GGUF key
    summary: str
    how: str
    data: Mapping[str, Any]  # as ``--format json`` gives it

    @property
    def diff(self) -> str:
        return str(self.data.get("diff") or "")

    @property
    def key(self) -> str | None:
        key = self.data.get("key")
        return None if key is None else str(key)


class Action(NamedTuple):
    """What to do about a result: ``pr_file`` the file a fix pull request carries (a repo's
    generation_config.json, a GGUF repo's ``params``; None: no pull request can), and
    ``command`` the one command that does the fix (None: nothing to write)."""

    command: str | None = None
    pr_file: str | None = None


class BeforeRows(NamedTuple):
    """What ``fix`` found before it wrote: the check that planned the writes."""

    status: str
    eos_now: Any
    eos_source: str
    stop_source: str
    findings: tuple[FindingRow, ...]


@dataclass(frozen=True)
class RepoRows:
    """Everything one result shows, as rows (see the module). An error result has its
    ``verdict`` and ``error`` only. The rows only some outputs show (the command, a GGUF's
    header advice, the control tokens an excerpt marks...) are made when first read, from
    the ``result`` they are the rows of: the JSON entry of a batch's ten thousand results
    pays for none of them."""

    verdict: VerdictRow
    error: str | None = None
    terminators: tuple[TerminatorRow, ...] = ()
    additional: tuple[TerminatorRow, ...] = ()
    in_turn: tuple[str, ...] = ()
    stop_ids: tuple[StopIdRow, ...] = ()
    eos_now: Any = None  # eos_token_id as read
    eos_source: str | None = None
    proposed: tuple[int, ...] | None = None
    findings: tuple[FindingRow, ...] = ()
    runtimes: tuple[RuntimeLine, ...] = ()
    changes: tuple[ChangeRow, ...] = ()
    written: tuple[str, ...] = ()
    stop_strings: tuple[str, ...] = ()  # texts to stop on as strings
    blocked: str | None = None
    before: BeforeRows | None = None  # after ``fix`` wrote: what it found
    result: RepoResult | None = field(default=None, repr=False, compare=False)
    fix_flags: tuple[str, ...] = ()  # the options given, kept in the command

    @functools.cached_property
    def stop_source(self) -> str:
        """Where the stop ids come from, in words."""
        c = self.result.check if self.result is not None else None
        return stop_source_text(c) if c is not None else ""

    @functools.cached_property
    def action(self) -> Action:
        return _action(self.result, self.fix_flags) if self.result is not None else Action()

    @functools.cached_property
    def gguf(self) -> GgufRows | None:
        return gguf_rows(self.result) if self.result is not None else None

    @functools.cached_property
    def ollama_hub(self) -> OllamaHubRow | None:
        return ollama_hub_row(self.result) if self.result is not None else None

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.result.notes) if self.result is not None else ()

    @functools.cached_property
    def control_tokens(self) -> tuple[str, ...]:
        """Every control token the templates write, and the tokenizer's eos: what an excerpt
        marks."""
        c = self.result.check if self.result is not None else None
        return _control_tokens(c) if c is not None else ()

    @property
    def compare(self) -> bool:
        """Some terminator has an id: runtimes can be compared."""
        table = self.result.runtimes if self.result is not None else None
        return table is not None and any(i is not None for i in table.terminators.values())

    @property
    def config_json_written(self) -> bool:
        table = self.result.runtimes if self.result is not None else None
        return table is not None and table.config_json_written

    @property
    def modelfile(self) -> tuple[str, ...]:
        """ollama's ``PARAMETER stop`` lines: each terminator and each text to stop on, once."""
        from eosfix.runtimes.ollama.modelfile import stop_line  # only the page shows them

        texts = [*(t.content for t in self.terminators if t.content), *self.stop_strings]
        return tuple(dict.fromkeys(stop_line(t) for t in texts))

    @property
    def stops_now(self) -> tuple[StopIdRow, ...]:
        return tuple(s for s in self.stop_ids if s.now)

    @property
    def stops_after(self) -> tuple[StopIdRow, ...]:
        return tuple(s for s in self.stop_ids if s.after)

    @property
    def unchecked(self) -> tuple[StopIdRow, ...]:
        return tuple(s for s in self.stop_ids if s.kind == "unchecked" and s.listed)


def verdict_name(r: RepoResult, status: str | None = None) -> str:
    """The result's verdict (``eosfix.core.outcome.VERDICTS``); ``status``: its status, when
    known already."""
    c = r.check
    return verdict_of(
        r.status.value if status is None else status,
        written=bool(r.written),
        has_findings=c is not None and bool(c.findings),
        has_patches=bool(r.patches),
    )


def verdict_row(r: RepoResult) -> VerdictRow:
    """The verdict line of a result (an error's too)."""
    if r.error is not None or r.check is None:
        return VerdictRow(r.name, r.container, "error", "error")
    c = r.check
    codes = {f.code for f in c.findings}
    status = r.status.value
    name = verdict_name(r, status)
    table = r.runtimes
    runs_on, early = (table.runs_on, table.stops_early) if table is not None else ((), ())
    problem = problem_of(
        name,
        runs_on=bool(runs_on),
        stops_early=bool(early),
        never_fires=EOS013.code in codes,
        needs_stop_string=EOS005.code in codes,
    )
    texts = c.stop_strings_needed
    return VerdictRow(r.name, r.container, status, name, problem, runs_on, early, texts)


def _control_tokens(c: RepoCheck) -> tuple[str, ...]:
    tokens = [tok for ta in c.terminators.templates for tok, _ in ta.positions]
    if c.tokenizer_eos is not None and c.tokenizer_eos.content:
        tokens.append(c.tokenizer_eos.content)
    return tuple(dict.fromkeys(tokens))


def _finding_rows(c: RepoCheck) -> tuple[FindingRow, ...]:
    return tuple(FindingRow(f.code, f.severity, f.file, f.message, f.fixable) for f in c.findings)


def _before(r: RepoResult) -> BeforeRows | None:
    b = r.before
    if b is None:
        return None
    return BeforeRows(
        b.status.value, b.stop.raw, b.stop.source, stop_source_text(b), _finding_rows(b)
    )


def terminator_row(t: Terminator, *, optional: bool = False) -> TerminatorRow:
    return TerminatorRow(
        t.content, t.id, t.kind, t.placements, t.templates, t.probe, t.evidence, t.id_source,
        optional,
    )  # fmt: skip


def _stop_ids(r: RepoResult) -> tuple[StopIdRow, ...]:
    """Every stop id the repo lists (``RepoCheck.review``), then each id only the fix adds."""
    c = r.check
    assert c is not None
    now = set(c.stop.ids or ())
    after = now if c.proposed is None else set(c.proposed)
    rows = [
        StopIdRow(s.id, s.kind, s.token, s.text, s.reason, s.id in now, s.id in after)
        for s in c.review.stop_ids
    ]
    listed = {s.id for s in c.review.stop_ids}
    tokens = {t.id: t.content for t in c.terminators.terminators if t.id is not None}
    for i in c.proposed or ():
        if i not in listed:
            listed.add(i)
            kind = "terminator" if i in tokens else "eos"
            rows.append(StopIdRow(i, kind, tokens.get(i), tokens.get(i), "", i in now, True, False))
    return tuple(rows)


def runtime_lines(
    table: RuntimeTable, texts: frozenset[str] = frozenset()
) -> tuple[RuntimeLine, ...]:
    """A row per runtime of the check's table (``texts``: the plain-text terminators)."""
    skipped = table.not_applicable
    return tuple(RuntimeLine(row, row.runtime not in skipped, texts) for row in table.rows)


def fix_command(r: RepoResult, flags: tuple[str, ...] | list[str] = ()) -> str:
    """The command that writes the planned fix, shell-quoted, with the flags that were given;
    for a Hugging Face cache snapshot, ``eosfix cache --fix`` (it replaces links safely); for
    a Hub repo checked by id, ``eosfix hub ID --pr`` (with its --keep-id flags)."""
    if r.hub is not None:  # a Hub repo checked by id: a pull request
        pairs = itertools.pairwise(flags)
        keep = [word for flag, value in pairs if flag == "--keep-id" for word in (flag, value)]
        return shlex.join(["eosfix", "hub", r.hub.repo_id, "--pr", *keep])
    folder = r.container == "folder"  # a folder's options; a single file (GGUF) takes none
    if r.cache is not None and folder:
        note = "; it writes generation_config.json only" if "--config-json" in flags else ""
        return r.cache.fix_command + note
    return shlex.join(["eosfix", "fix", str(r.path), *(flags if folder else ())])


def _action(r: RepoResult, flags: tuple[str, ...] | list[str]) -> Action:
    hub_gguf = is_hub_gguf(r)
    if r.ollama_hub is not None and r.ollama_hub.plan is not None and r.hub is not None:
        return Action(shlex.join(["eosfix", "hub", r.hub.repo_id, "--pr"]), r.ollama_hub.file)
    if not r.patches or hub_gguf:
        return Action()
    pr_file = None
    if r.hub is not None and any(p.file == GENERATION_CONFIG for p in r.patches):
        pr_file = GENERATION_CONFIG
    return Action(fix_command(r, flags), pr_file)


def repo_rows(r: RepoResult, fix_flags: tuple[str, ...] | list[str] = ()) -> RepoRows:
    """The rows of one result (``fix_flags``: the options given, kept in the command)."""
    verdict = verdict_row(r)
    if r.error is not None or r.check is None:
        return RepoRows(verdict, str(r.error) if r.error is not None else None, result=r)
    c = r.check
    ts = c.terminators
    texts = frozenset(t.content for t in ts.terminators if t.kind == STOP_STRING)
    table = r.runtimes
    return RepoRows(
        verdict,
        terminators=tuple(terminator_row(t) for t in ts.terminators),
        additional=tuple(terminator_row(t, optional=True) for t in ts.additional),
        in_turn=tuple(ts.in_turn),
        stop_ids=_stop_ids(r),
        eos_now=c.stop.raw,
        eos_source=c.stop.source,
        proposed=c.proposed,
        findings=_finding_rows(c),
        runtimes=runtime_lines(table, texts) if table is not None else (),
        changes=tuple(ChangeRow(p.file, p.summary, p.how, p.as_json()) for p in r.patches),
        written=tuple(r.written),
        stop_strings=verdict.stop_strings,
        blocked=str(r.blocked) if r.blocked is not None else None,
        before=_before(r),
        result=r,
        fix_flags=tuple(fix_flags),
    )
