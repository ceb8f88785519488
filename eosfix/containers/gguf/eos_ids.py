"""What ollama reads of a GGUF, and the ``tokenizer.ggml.eos_token_ids`` list its Go engine
needs (``eosfix.runtimes.ollama.engines``, docs/ollama.md).

llama.cpp (and so ollama's llama.cpp runner, and llama-server from ollama 0.30.0 on) never
reads ``tokenizer.ggml.eos_token_ids``; the eot/eom keys eosfix writes serve them. ollama's
Go engine (0.7.1 to 0.24.0, for the architectures ``OllamaEngineRequired`` lists) reads
``eos_token_id`` and that list, as an ARRAY of INT32 only (``fs/ggml`` ``KV.Ints``), and never
eot/eom (gemma3/gemma4 aside, which read eot): a terminator held only in eot/eom is no stop
there. So eosfix writes the list when, and only when, a release's Go engine runs this file's
``general.architecture`` and, with the planned eot/eom, would still miss a terminator, or
its list holds an id that cuts a reply. The list written: the items already there (any
integer type) that are tokens and cut nothing, else the eos; then every terminator. The Go
engine stops on every item, so nothing written inside a turn goes in it; with eos first,
positions 1 and 2 are terminators, which is what llama-server's compatibility layer takes
as eot/eom for GLM-4-MoE-Lite blobs that lack those keys. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from eosfix.analysis.terminators import STOP_STRING, Terminator, TerminatorSet
from eosfix.containers.gguf.earlystop import classify_ids
from eosfix.containers.gguf.format import EOS_IDS_KEY, TEMPLATE_KEY, ValueType, id_slot
from eosfix.containers.gguf.plan import ArrayEdit, GgufValue
from eosfix.containers.gguf.read import GgufModel
from eosfix.core.codes import EOS013, EOS203, Finding, Severity, finding
from eosfix.core.repo import TokenInfo
from eosfix.decide.stopids import CODE_BY_KIND, OUT_OF_VOCAB, StopId, what_it_is
from eosfix.runtimes.ollama.compat import OllamaGguf
from eosfix.runtimes.ollama.engines import LAST_GO, go_list_versions, go_stops

INT32 = ValueType.INT32.name
EOT_READERS = ("gemma3", "gemma4")  # Go models that also read eot_token_id


def ollama_view(
    model: GgufModel,
    values: Mapping[str, GgufValue] | None = None,
    *,
    has_projector: bool = False,
) -> OllamaGguf:
    """The file as ollama reads it (``values``: keys as ``fix`` would write them;
    ``has_projector``: the ollama manifest has a projector layer)."""
    values = values or {}
    key_ids = dict(model.vocab.key_ids)
    key_ids.update({id_slot(k) or k: v for k, v in values.items() if isinstance(v, int)})
    ids, type_name = model.eos_token_ids
    listed = values.get(EOS_IDS_KEY)
    if isinstance(listed, tuple):
        ids, type_name = listed, INT32
    template = model.header.value(TEMPLATE_KEY)
    return OllamaGguf(
        vocab=model.vocab._replace(key_ids=key_ids),
        architecture=model.architecture,
        eos_token_ids=ids,
        eos_token_ids_type=type_name or INT32,
        chat_template=template if isinstance(template, str) else None,
        key_names=frozenset(model.header.fields) | frozenset(values),
        tensor_shapes=model.tensor_shapes,
        has_projector=has_projector,
    )


@dataclass(frozen=True)
class ListPlan:
    """The list to write (None: none needed) and the findings about the list."""

    edit: ArrayEdit | None
    findings: tuple[Finding, ...]


def _ids(ids: Collection[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _engine(arch: str, first: str) -> str:
    reads = "eos_token_id and an INT32 eos_token_ids"
    if arch in EOT_READERS:
        reads += " (and eot_token_id)"
    return f"ollama {first} to {LAST_GO} runs {arch} on its Go engine, which stops on {reads} only"


def plan_eos_ids(
    model: GgufModel,
    ts: TerminatorSet,
    eos: TokenInfo | None,
    slots: Mapping[str, GgufValue],
    keep: Collection[int] = (),
) -> ListPlan:
    """The ``eos_token_ids`` list ollama's Go engine needs, given the eot/eom ``slots`` the
    plan writes for llama.cpp, and the findings (EOS203; EOS011-EOS013 for its items)."""
    arch = model.architecture
    versions = go_list_versions(arch)
    if not versions:
        return ListPlan(None, ())
    items, type_name = model.eos_token_ids
    read = items if type_name == INT32 and items else ()  # what the Go engine reads
    review = {s.id: s for s in classify_ids(model, ts, eos, read)}
    cutting = [review[i] for i in dict.fromkeys(read) if review[i].cuts and i not in keep]
    dead = [review[i] for i in dict.fromkeys(read) if review[i].kind == OUT_OF_VOCAB]
    terms = [t for t in ts.terminators if t.kind != STOP_STRING and t.id is not None]
    view = ollama_view(model, slots)
    missing: dict[int, Terminator] = {}
    first = None
    for v in versions:
        stops = go_stops(view, v)
        lost = [t for t in terms if t.id not in stops]
        if lost and first is None:
            first = v
        missing.update({t.id: t for t in lost if t.id is not None})
    if not missing and not cutting:
        return ListPlan(None, tuple(_dead_findings(dead, None, versions[0], arch)))
    edit = _list_edit(model, ts, eos, items, type_name, terms, keep)
    out: list[Finding] = []
    if missing:
        names = ", ".join(f"{t.content} ({t.id})" for t in missing.values())
        retyped = (
            f"; its {type_name} list reads as empty there" if items is not None and not read else ""
        )
        msg = f"{_engine(arch, first or versions[0])}: not on {names}{retyped}; fix: {_fix(edit)}"
        out.append(finding(EOS203, EOS_IDS_KEY, msg))
    for s in cutting:
        msg = (
            f"{_engine(arch, versions[0])}: it stops on {what_it_is(s)}; eos_token_ids holds "
            f"it; fix: {_fix(edit)}"
        )
        out.append(finding(CODE_BY_KIND[s.kind], EOS_IDS_KEY, msg, fixable=True))
    out += _dead_findings(dead, edit, versions[0], arch)
    return ListPlan(edit, tuple(out))


def _fix(edit: ArrayEdit) -> str:
    return f"{EOS_IDS_KEY} = {_ids(edit.new)} (INT32)"


def _dead_findings(
    dead: list[StopId], edit: ArrayEdit | None, first: str, arch: str
) -> list[Finding]:
    """Items no token has: they never fire; dropped when the list is written anyway."""
    out = []
    for s in dead:
        msg = f"{EOS_IDS_KEY} holds {what_it_is(s)} ({_engine(arch, first)})"
        if edit is not None:
            out.append(finding(EOS013, EOS_IDS_KEY, f"{msg}; fix: {_fix(edit)}", fixable=True))
        else:
            out.append(finding(EOS013, EOS_IDS_KEY, msg, severity=Severity.WARNING,
                               fixable=False))  # fmt: skip
    return out


def _list_edit(
    model: GgufModel,
    ts: TerminatorSet,
    eos: TokenInfo | None,
    items: tuple[int, ...] | None,
    type_name: str,
    terms: list[Terminator],
    keep: Collection[int],
) -> ArrayEdit:
    """The items already listed that are tokens and cut nothing (else the eos), then every
    terminator, once each."""
    base = list(items or ()) or ([eos.id] if eos is not None and eos.id is not None else [])
    review = {s.id: s for s in classify_ids(model, ts, eos, base)}
    kept = [
        i for i in base
        if i in keep or not (review[i].cuts or review[i].kind == OUT_OF_VOCAB or i < 0)
    ]  # fmt: skip
    new = tuple(dict.fromkeys([*kept, *(t.id for t in terms if t.id is not None)]))
    tokens = tuple(model.token_text(i) or str(i) for i in new)
    return ArrayEdit(EOS_IDS_KEY, items, type_name, new, tokens)
