"""An ollama model as a container: does it stop at the end of every turn, and what makes it stop?

ollama runs the model's GGUF blob on the engine its release picks
(``eosfix.runtimes.ollama.engines.gguf_stops``: llama-server after ollama's compatibility
layer from 0.30.0 on; before that its Go engine or its vendored llama.cpp, by architecture),
and also stops on every ``stop`` string of the model's params layer (``PARAMETER stop``).

The blob goes through the GGUF check (what ``eosfix check BLOB`` says: the pipeline's, with
``Ollama``, which reads the blob as ``Gguf`` does), and every finding of it applies to the
model, but for those about which ids llama.cpp stops on (EOS011-EOS013, EOS201-EOS203): for
those, ollama's own stop set decides here (``judge``: ``OllamaVerdict``, the result's
``ollama`` field). A terminator it misses is what a Modelfile can add (a stop string); an id it
stops on that cuts a reply no Modelfile can take away: the blob itself must be fixed, into a
new file (the store is content-addressed and never edited, so nothing is planned here). A
Modelfile's ``stop`` replaces the base model's list, so the existing stops are kept in it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.containers.gguf.container import Gguf, open_gguf
from eosfix.containers.ollama.read import OllamaModel
from eosfix.containers.paths import is_gguf
from eosfix.core.codes import CODES, Finding, Severity
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.decide.check import RepoCheck, Status
from eosfix.decide.runtime_table import RuntimeTable, cutting_ids
from eosfix.decide.stopids import StopId
from eosfix.runtimes import Pins, ollama
from eosfix.runtimes.ollama import stops_on
from eosfix.runtimes.ollama.engines import OllamaStops
from eosfix.runtimes.ollama.modelfile import stop_line

# Findings about llama.cpp's own stop set: ollama's set (``OllamaVerdict.ollama``) decides them.
STOP_SET_CODES = frozenset(c.code for c in CODES.values() if c.llamacpp_stop_set)

# What ollama makes of a model, in the words of ``eosfix ollama --format json``'s ``status``,
# and the one status every result has.
WORDS = {
    "ok": Status.OK, "no_template": Status.NO_TEMPLATE, "does_not_stop": Status.FIXABLE,
    "stops_early": Status.PROBLEMS, "problems": Status.PROBLEMS, "error": Status.ERROR,
}  # fmt: skip


@dataclass(frozen=True)
class OllamaVerdict:
    """What ollama makes of one model of its store: ``ollama`` the set its release stops on,
    ``stops``: terminator text -> whether ollama stops there (an id of its set, or a stop
    string); ``early``: ids of its set that cut a reply; ``findings``: the blob's findings that
    apply to the model (``STOP_SET_CODES`` left out: ``stops`` and ``early`` say it);
    ``word``: ok, no_template, does_not_stop, stops_early, problems or error."""

    model: OllamaModel
    word: str = "error"
    ollama: OllamaStops | None = None
    stops: dict[str, bool] | None = None
    early: tuple[StopId, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def status(self) -> Status:
        return WORDS[self.word]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(t for t, ok in (self.stops or {}).items() if not ok)

    @property
    def blob_fix(self) -> str | None:
        """How to fix the blob when ollama stops inside a reply (no Modelfile can)."""
        blob = self.model.model_blob
        if not self.early or blob is None:
            return None
        new = shlex.quote(modelfile_name(self.model.name).removesuffix(".Modelfile") + ".gguf")
        return (
            f"eosfix fix {shlex.quote(str(blob))} --output {new}, then a Modelfile with FROM "
            f"./{new} and the model's TEMPLATE and PARAMETER lines "
            f"(ollama show --modelfile {shlex.quote(self.model.name)})"
        )

    @property
    def modelfile(self) -> str | None:
        """The Modelfile that makes the model stop at every terminator, or None if it does
        (or when only the blob can be fixed: ``blob_fix``)."""
        if self.stops is None or not self.missing:
            return None
        stops = list(dict.fromkeys([*self.model.stop, *self.missing]))
        lines = [
            f"# eosfix: {self.model.name} does not stop on {' '.join(self.missing)}",
            "# create it with: ollama create NEW_NAME -f THIS_FILE",
            f"FROM {self.model.name}",
            *(stop_line(s) for s in stops),
        ]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Ollama(Gguf):
    """A model of the store through the pipeline: its blob's repo and keys, as ``Gguf``
    reads them; nothing is planned (the store is never written); the verdicts are llama.cpp's
    and ollama's for the blob (``Gguf.runtime_table``), and ``judge`` says what ollama makes
    of the model with its params."""

    manifest: OllamaModel | None = None
    kind = "ollama"

    def plan(self, check: RepoCheck, *, config_json: bool = False) -> tuple[()]:
        return ()

    def write_blocker(
        self, patches: Sequence[object], *, replace_symlinks: bool | None = None
    ) -> EosfixError | None:
        return None

    def runtime_table(
        self, check: RepoCheck, patches: Sequence[object], pins: Pins | None
    ) -> RuntimeTable:
        return super().runtime_table(check, (), pins)

    def judge(self, check: RepoCheck, pins: Pins | None) -> tuple[RepoCheck, OllamaVerdict]:
        """The check as it applies to the model (the findings about llama.cpp's own set left
        out), and what ollama (the release ``pins`` names, else the latest eosfix read) makes
        of the model."""
        assert self.manifest is not None
        model = self.manifest
        version = (pins or {}).get(ollama.RUNTIME.name)
        stops = self.ollama_stops((), version, model.has_projector)
        terms = {t.content: t.id for t in check.terminators.terminators}
        early = cutting_ids(check, stops.ids) if check.repo.templates else ()
        findings = tuple(f for f in check.findings if f.code not in STOP_SET_CODES)
        on = stops_on(stops.ids, model.stop, terms)
        missing = [t for t, ok in on.items() if not ok]
        problems = [f for f in findings if f.severity is Severity.ERROR]
        word = (
            "no_template" if not check.repo.templates
            else "does_not_stop" if missing
            else "stops_early" if early
            else "problems" if problems
            else "ok"
        )  # fmt: skip
        verdict = OllamaVerdict(model, word, stops, on, early, findings)
        return RepoCheck(
            check.repo, check.terminators, check.stop, check.tokenizer_eos, None, findings,
            check.review, check.keep_ids, check.unplaced, check.instead, check.model,
        ), verdict  # fmt: skip


def open_ollama(model: OllamaModel) -> Ollama:
    """Read the model's GGUF blob (``RepoLoadError`` naming what is missing)."""
    blob = model.model_blob
    if blob is None:
        raise RepoLoadError("the manifest names no model layer", path=model.manifest)
    if not blob.is_file():
        raise RepoLoadError("model blob missing from the store", path=blob)
    if not is_gguf(blob):
        raise RepoLoadError("model layer is not a GGUF file: not checked", path=blob)
    return Ollama(open_gguf(blob).model, model)


def modelfile_name(name: str) -> str:
    """A file name for a model's Modelfile: ``hf.co/org/repo:q4`` -> ``hf.co_org_repo_q4``."""
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in name)
    return f"{safe}.Modelfile"
