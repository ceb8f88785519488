"""Verdicts: what one analysis of a repo folder found, compact enough to share and to keep.

A ``Verdict`` is made in a worker process from a full ``RepoResult`` and sent back pickled:
a few ids and codes, no texts (unless a ``Detail`` asks for the JSON entry or the text block:
the caller injects that renderer, so the batch engine imports none).
Repos whose stop-relevant files are identical share one Verdict, so nothing in it may name
the repo: an error's file is relative to the folder, and the text block is rendered with
``LABEL`` where the repo's name goes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from eosfix import pipeline
from eosfix.core.codes import EOS005, EOS013
from eosfix.core.errors import EosfixError
from eosfix.core.outcome import problem_of, verdict_of
from eosfix.result import RepoResult
from eosfix.targets.hub import needs_tokenizer_json

LABEL = "\ue000"  # stands for the repo's name in Verdict.text (a private-use character)

# A JSON entry's members in order: (key, its value as the report writes it: json.dumps with
# indent=2, ensure_ascii=False, nested in an entry of the "repos" list).
Members = tuple[tuple[str, str], ...]


def with_error(members: Members, message: str) -> Members:
    """``members`` with ``error`` set to ``message``: in its place, or added last (as a dict's
    update). A string is written alike at any nesting."""
    out = dict(members)
    out["error"] = json.dumps(message, ensure_ascii=False)
    return tuple(out.items())


@dataclass(frozen=True)
class Detail:
    """What a worker renders of each result besides its verdict, for the output format.

    ``kind`` "json": ``render(result)`` is the repo's JSON entry without its path and name,
    as ``Members`` (``Verdict.detail``): each value already written as the report writes it,
    so a worker encodes it once per shared analysis and the main process only joins texts;
    "text": it is the repo's text block, rendered with LABEL for the repo's name
    (``Verdict.text``). The CLI passes the renderer; it goes to the worker processes pickled
    by reference, so it is a top-level function (or a partial of one).
    """

    kind: Literal["json", "text"]
    render: Callable[[RepoResult], Any]


@dataclass(frozen=True)
class Verdict:
    """What one analysis (or fix) of a folder found: a few ids and codes, no texts."""

    status: str  # ok | fixable | problems | no_template | not_a_model | error
    terminators: tuple[tuple[str, int | None], ...] = ()
    eos: tuple[int, ...] | None = None  # current stop ids, as transformers reads them
    eos_source: str | None = None
    eos_list: bool = False  # eos_token_id is written as a list (a one-id list shows as [id])
    proposed: tuple[int, ...] | None = None
    runs_on: tuple[str, ...] = ()  # runtimes that miss a terminator now (RuntimeTable)
    stops_early: tuple[str, ...] = ()  # runtimes that stop now at an id that cuts a reply
    # The runtimes that load it, by name (a GGUF: llama.cpp and ollama; not transformers):
    # the ones a count of "stops in X" may count it for.
    loads: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()  # finding codes
    has_patches: bool = False
    written: tuple[str, ...] = ()
    error: str | None = None
    error_file: str | None = None  # the file the error is about, relative to the folder
    needs_tokenizer_json: bool = False  # some id can only come from tokenizer.json
    detail: Members | None = None  # result_to_dict() without path/name, encoded (JSON output)
    text: str | None = None  # render_repo_text() with LABEL for the name (text output)
    # A GGUF repo (``eosfix.batch.gguf_audit.repo_verdict``): its files summarised, a file that
    # differs named ("12 GGUF files alike", "Q8_0 differs in ...: would be fixed"); else None.
    gguf: str | None = None
    # A GGUF repo whose ``params`` file a pull request would set (what ``ollama run hf.co``
    # stops on): that file's name; None when no params file would help (its header is what
    # needs the fix) or it is no GGUF repo.
    params_file: str | None = None

    @property
    def name(self) -> str:
        """The verdict of the table and the counts: fixed | warned | ... | the status."""
        return verdict_of(self.status, written=bool(self.written), has_findings=bool(self.codes))

    @property
    def problem(self) -> str | None:
        """What is wrong (``eosfix.core.outcome.PROBLEMS``), for a fixable or problems verdict."""
        return problem_of(
            self.name,
            runs_on=bool(self.runs_on),
            stops_early=bool(self.stops_early),
            never_fires=EOS013.code in self.codes,
            needs_stop_string=EOS005.code in self.codes,
        )

    @functools.cached_property
    def cells(self) -> tuple[str, str, str]:
        """(ends a turn, stops on, note after the verdict) of the table, made once per
        verdict: the rows of repos sharing an analysis share these strings."""
        terms = "\n".join(f"{c} {i}" if i is not None else c for c, i in self.terminators)
        eos = "" if self.status == "error" else ids_text(self.eos, as_list=self.eos_list)
        if self.eos_source not in (None, "none", "generation_config.json") and eos:
            eos += f" (from {self.eos_source})"  # never "(from none)": "(not set)" says it
        note = ""
        if self.name in ("fixable", "fixed", "problems") and self.proposed is not None:
            note += f" -> {ids_text(self.proposed, as_list=True)}"  # always written as a list
        if self.error:
            note += f": {self.error}"
        if self.gguf:
            note += f" ({self.gguf})"
        return terms or "-", eos, note

    def to_state(self) -> dict[str, Any]:
        """The fields a state file keeps (JSON-ready): everything but detail and text."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("detail", "text")
            and (f.name not in ("gguf", "params_file") or getattr(self, f.name) is not None)
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Verdict:
        """The Verdict a state file line recorded (lists back to tuples)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"detail", "text"}
        kwargs = {k: _tuples(v) for k, v in data.items() if k in names}
        return cls(**kwargs)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def ids_text(ids: tuple[int, ...] | None, *, as_list: bool = False) -> str:
    """``151645`` for an id written alone, ``[151645]`` for a list (of one or more)."""
    if ids is None:
        return "(not set)"
    if len(ids) == 1 and not as_list:
        return str(ids[0])
    return "[" + ", ".join(map(str, ids)) + "]"


def _relative(exc: EosfixError, root: Path) -> str | None:
    """The error's file inside the unit's folder; "" for the unit itself (a GGUF file)."""
    if exc.path is not None:
        try:
            rel = Path(exc.path).relative_to(root).as_posix()
        except ValueError:
            return None
        return "" if rel == "." else rel
    return None


def to_verdict(result: RepoResult, detail: Detail | None) -> Verdict:
    """The compact verdict of a RepoResult (whose check, probes and texts are then dropped)."""
    extra: Members | None = None
    if detail is not None and detail.kind == "json":
        extra = tuple((k, v) for k, v in detail.render(result) if k not in ("path", "name"))
    text = None
    if detail is not None and detail.kind == "text":
        text = detail.render(result._replace(label=LABEL))
    needs = needs_tokenizer_json(result)
    if result.error is not None:
        rel = _relative(result.error, result.path)
        if rel is None:
            message = str(result.error)
        else:  # named by its file in the unit, or (the unit itself) by the message alone
            message = f"{rel}: {result.error.message}" if rel else result.error.message
        if extra is not None:
            extra = with_error(extra, message)
        return Verdict(
            "error",
            error=message,
            error_file=rel,
            needs_tokenizer_json=needs,
            detail=extra,
            text=text,
        )
    c = result.check
    assert c is not None
    planned = result.before if result.before is not None else c  # what fix wrote, if it did
    table = result.runtimes
    return Verdict(
        status=c.status.value,
        terminators=tuple((t.content, t.id) for t in c.terminators.terminators),
        eos=c.stop.ids,
        eos_source=c.stop.source,
        eos_list=isinstance(c.stop.raw, list),
        proposed=planned.proposed,
        runs_on=table.runs_on if table is not None else (),
        stops_early=table.stops_early if table is not None else (),
        loads=tuple(r.runtime for r in table.applicable) if table is not None else (),
        codes=tuple(f.code for f in c.findings),
        has_patches=bool(result.patches),
        written=result.written,
        needs_tokenizer_json=needs,
        detail=extra,
        text=text,
    )


def analyze_gguf(path: Path, detail: Detail | None, keep_ids: tuple[int, ...] = ()) -> Verdict:
    """Check one GGUF file (read only), as ``eosfix check FILE`` does. Runs in a worker."""
    return to_verdict(pipeline.check_folder(path, keep_ids=keep_ids), detail)


def analyze_folder(
    path: Path, detail: Detail | None, keep_ids: tuple[int, ...] = (), model: bool = True
) -> Verdict:
    """Check one folder (read only). Runs in a worker process. ``keep_ids``: --keep-id;
    ``model``: False for a repo the source knows holds no model (tokenizer files only)."""
    return to_verdict(pipeline.check_folder(path, keep_ids=keep_ids, model=model), detail)
