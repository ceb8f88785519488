"""Does an ollama model stop at the end of every turn, and what makes it stop?

ollama runs the model's GGUF blob on the engine its release picks
(``eosfix.runtimes.ollama.engines.gguf_stops``: llama-server after ollama's compatibility
layer from 0.30.0 on; before that its Go engine or its vendored llama.cpp, by architecture),
and also stops on every ``stop`` string of the model's params layer (``PARAMETER stop``).

The blob goes through the GGUF check (what ``eosfix check BLOB`` says), and every finding of
it applies to the model, but for those about which ids llama.cpp stops on (EOS011-EOS013,
EOS201-EOS203): for those, ollama's own stop set decides here. A terminator it misses is what
a Modelfile can add (a stop string); an id it stops on that cuts a reply no Modelfile can take
away: the blob itself must be fixed, into a new file (the store is content-addressed and never
edited). A Modelfile's ``stop`` replaces the base model's list, so the existing stops are kept
in it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from eosfix.containers.gguf.container import open_gguf
from eosfix.containers.ollama.read import OllamaModel
from eosfix.containers.paths import is_gguf
from eosfix.core.codes import CODES, Finding, Severity
from eosfix.core.errors import EosfixError, RepoLoadError
from eosfix.decide.check import RepoCheck, check
from eosfix.decide.runtime_table import cutting_ids
from eosfix.decide.stopids import StopId
from eosfix.runtimes.ollama import stops_on
from eosfix.runtimes.ollama.engines import OllamaStops
from eosfix.runtimes.ollama.modelfile import stop_line

# Findings about llama.cpp's own stop set: ollama's set (``OllamaResult.ollama``) decides them.
STOP_SET_CODES = frozenset(c.code for c in CODES.values() if c.llamacpp_stop_set)

OK, NO_TEMPLATE, DOES_NOT_STOP, STOPS_EARLY, PROBLEMS, ERROR = (
    "ok", "no_template", "does_not_stop", "stops_early", "problems", "error",
)  # fmt: skip


@dataclass(frozen=True)
class OllamaResult:
    """One model of the store: the GGUF check of its blob, what ollama stops on, the verdict.

    ``stops``: terminator text -> whether ollama stops there (an id of its set, or a stop
    string); ``early``: ids of its set that cut a reply; ``findings``: the blob's findings that
    apply to the model (``STOP_SET_CODES`` left out: ``stops`` and ``early`` say it).
    """

    model: OllamaModel
    check: RepoCheck | None = None
    ollama: OllamaStops | None = None
    stops: dict[str, bool] | None = None
    early: tuple[StopId, ...] = ()
    findings: tuple[Finding, ...] = ()
    error: EosfixError | None = None

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(t for t, ok in (self.stops or {}).items() if not ok)

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def status(self) -> str:
        """ok, no_template, does_not_stop, stops_early, problems or error (first that holds)."""
        if self.error is not None or self.check is None:
            return ERROR
        if not self.check.repo.templates:
            return NO_TEMPLATE
        if self.missing:
            return DOES_NOT_STOP
        if self.early:
            return STOPS_EARLY
        return PROBLEMS if self.problems else OK

    @property
    def ok(self) -> bool:
        return self.status == OK

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


def check_model(model: OllamaModel, version: str | None = None) -> OllamaResult:
    """Check one model of the store for ollama ``version`` (None: the latest eosfix read): its
    GGUF blob and its stop params."""
    try:
        blob = model.model_blob
        if blob is None:
            raise RepoLoadError("the manifest names no model layer", path=model.manifest)
        if not blob.is_file():
            raise RepoLoadError("model blob missing from the store", path=blob)
        if not is_gguf(blob):
            raise RepoLoadError("model layer is not a GGUF file: not checked", path=blob)
        gguf = open_gguf(blob)
        result = check(gguf.repo, gguf.keys)
        stops = gguf.ollama_stops((), version, model.has_projector)
    except EosfixError as exc:
        return OllamaResult(model, error=exc)
    except OSError as exc:
        return OllamaResult(model, error=RepoLoadError(str(exc), path=model.manifest))
    terms = {t.content: t.id for t in result.terminators.terminators}
    early = cutting_ids(result, stops.ids) if result.repo.templates else ()
    findings = tuple(f for f in result.findings if f.code not in STOP_SET_CODES)
    return OllamaResult(
        model, result, stops, stops_on(stops.ids, model.stop, terms), early, findings
    )


def modelfile(result: OllamaResult) -> str | None:
    """The Modelfile that makes the model stop at every terminator, or None if it does (or
    when only the blob can be fixed: ``OllamaResult.blob_fix``)."""
    if result.check is None or not result.missing:
        return None
    stops = list(dict.fromkeys([*result.model.stop, *result.missing]))
    lines = [
        f"# eosfix: {result.model.name} does not stop on {' '.join(result.missing)}",
        "# create it with: ollama create NEW_NAME -f THIS_FILE",
        f"FROM {result.model.name}",
        *(stop_line(s) for s in stops),
    ]
    return "\n".join(lines) + "\n"


def modelfile_name(name: str) -> str:
    """A file name for a model's Modelfile: ``hf.co/org/repo:q4`` -> ``hf.co_org_repo_q4``."""
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in name)
    return f"{safe}.Modelfile"
