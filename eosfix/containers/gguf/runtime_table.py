"""llama.cpp's and ollama's verdicts on a GGUF file: what each stops on now and once the
planned keys are written (``eosfix.decide.runtime_table`` turns the sets into rows); for a
GGUF on the Hub, ``ollama run hf.co/...`` instead of ollama reading the file alone."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.containers.gguf.eos_ids import ollama_view
from eosfix.containers.gguf.format import CONTROL, field_key
from eosfix.containers.gguf.hubparams import OllamaParams, ParamsPlan, plan_params
from eosfix.containers.gguf.plan import GgufEdit, GgufValue
from eosfix.containers.gguf.read import GgufModel
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import RowInputs, RuntimeTable, build_table
from eosfix.runtimes import Pins, llamacpp, ollama
from eosfix.runtimes.ollama import hub
from eosfix.runtimes.ollama.engines import OllamaStops, gguf_stops
from eosfix.runtimes.ollama.hub import visible_ids

# llama.cpp reading a GGUF (not a folder a converter would turn into one).
GGUF_READER = dataclasses.replace(
    llamacpp.RUNTIME,
    reads="tokenizer.ggml eos/eot/eom + token texts",
    note="LM Studio, llama-cpp-python and ollama's llama.cpp engines run it",
    remedy="",
)
# ollama reading a GGUF blob: the engine its release runs the architecture on
# (eosfix.runtimes.ollama.engines.gguf_stops), not ``ollama create`` from a folder.
OLLAMA_READER = dataclasses.replace(ollama.RUNTIME, remedy="")


def values(patches: Sequence[object]) -> dict[str, GgufValue]:
    """key -> the value to write, for the planned edits."""
    return {e.key: e.value for e in patches if isinstance(e, GgufEdit)}


def ollama_stops(
    model: GgufModel,
    patches: Sequence[object] = (),
    version: str | None = None,
    has_projector: bool = False,
) -> OllamaStops:
    """What ollama ``version`` (None: the latest eosfix read) stops on for the file, with
    ``patches`` written."""
    view = ollama_view(model, values(patches), has_projector=has_projector)
    return gguf_stops(view, version)


def runtime_table(
    model: GgufModel, check: RepoCheck, patches: Sequence[GgufEdit], pins: Pins | None
) -> RuntimeTable:
    """llama.cpp's and ollama's sets now and once the planned keys are written."""
    now = frozenset(check.stop.ids or ())
    after = now if check.proposed is None else frozenset(check.proposed)
    llama = RowInputs(GGUF_READER, GGUF_READER.current, (now, after, after))
    version = (pins or {}).get(ollama.RUNTIME.name)
    before_o, after_o = ollama_stops(model, (), version), ollama_stops(model, patches, version)
    rule = dataclasses.replace(
        OLLAMA_READER.rule_for(version),
        reads=f"{before_o.engine}: {before_o.reads}",
        source=before_o.source,
    )
    note = f"ollama {before_o.version} runs {model.architecture or 'it'} on {before_o.engine}"
    if before_o.rewrites:
        changed = ", ".join(f"{field_key(k)} -> {v}" for k, v in before_o.rewrites.items())
        note += f"; its compatibility layer rewrites {changed}"
    sets = (before_o.ids, after_o.ids, after_o.ids)
    row = RowInputs(OLLAMA_READER, rule, sets, pinned=version, note=note)
    return build_table(check, [llama, row])


@dataclass(frozen=True)
class HubTable(RuntimeTable):
    """The verdicts of a GGUF on the Hub, and the params file a pull request would write
    (``params_plan``), planned here once, for the ollama release the verdicts are for: the
    table's "after" column is what that file makes ollama stop on."""

    params_plan: ParamsPlan | None = None


def hub_runtime_table(
    model: GgufModel,
    check: RepoCheck,
    patches: Sequence[GgufEdit],
    pins: Pins | None,
    params: OllamaParams,
) -> HubTable:
    """A GGUF on the Hub: llama.cpp's set (LM Studio runs it too), and what ``ollama run
    hf.co/...`` stops on: its engine's set for the file plus the stop strings of the params
    the Hub hands it, those it can see (``eosfix.runtimes.ollama.hub``); after the fix, with
    the planned keys and the planned params (``eosfix.containers.gguf.hubparams``), planned
    for the pinned release (``--runtime ollama==X``; else the latest eosfix read)."""
    now = frozenset(check.stop.ids or ())
    after = now if check.proposed is None else frozenset(check.proposed)
    llama = RowInputs(GGUF_READER, GGUF_READER.current, (now, after, after))
    pinned = (pins or {}).get(ollama.RUNTIME.name)
    before_o, after_o = ollama_stops(model, (), pinned), ollama_stops(model, patches, pinned)
    plan = plan_params(check, model, params, before_o.ids)
    stops_after = plan.after if plan is not None else params.stop
    terms = {t.content: t.id for t in check.terminators.terminators}
    types = model.token_types or ()

    def control(token_id: int) -> bool:
        return token_id < len(types) and types[token_id] == CONTROL

    def seen(stops: Sequence[str]) -> frozenset[int]:
        return visible_ids(stops, model.vocab.text_ids, terms, control, before_o.version)

    ids_before, ids_after = before_o.ids | seen(params.stop), after_o.ids | seen(stops_after)
    stops = json.dumps(list(params.stop), ensure_ascii=False)
    note = f"stop {stops} from {params.source_text}; ollama {before_o.version} on {before_o.engine}"
    if params.problem is not None:
        note = f"the repo's params file is refused ({params.problem}); " + note
    row = RowInputs(hub.RUNTIME, hub.RUNTIME.rule_for(pinned), (ids_before, ids_after, ids_after),
                    pinned=pinned, note=note)  # fmt: skip
    table = build_table(check, [llama, row])
    fields = {f.name: getattr(table, f.name) for f in dataclasses.fields(table)}
    return HubTable(**fields, params_plan=plan)
