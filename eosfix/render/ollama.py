"""A model of ollama's store as text and JSON: what ollama stops on, each terminator, the ids
that cut a reply, the findings that apply, and the Modelfile that fixes it. Everything comes
from the result's ``ollama`` field (``eosfix.containers.ollama.container.OllamaVerdict``):
this module formats."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from eosfix.core.outcome import verdict_of
from eosfix.result import RepoResult


def model_dict(r: RepoResult) -> dict[str, Any]:
    """The JSON entry of one model (``eosfix ollama --format json``)."""
    from eosfix.containers.gguf.format import field_key
    from eosfix.runtimes.llamacpp import LLAMA_CPP_VERSION

    v = r.ollama
    assert v is not None
    m = v.model
    out: dict[str, Any] = {
        "name": m.name,
        "manifest": str(m.manifest),
        "blob": str(m.model_blob) if m.model_blob else None,
        "stop": list(m.stop),
        "has_go_template": bool(m.template),
        "has_projector": m.has_projector,
        "status": v.word if r.error is None else "error",
        "verdict": verdict_of(
            r.status.value, written=False, has_findings=bool(v.findings and r.error is None)
        ),
    }
    if r.error is not None:
        return {**out, "error": str(r.error)}
    c, o = r.check, v.ollama
    assert c is not None
    assert o is not None
    out.update(
        terminators=[
            {"content": t.content, "id": t.id, "kind": t.kind} for t in c.terminators.terminators
        ],
        llama_cpp={"version": LLAMA_CPP_VERSION, "eog": sorted(c.stop.ids or ())},
        ollama={
            "version": o.version,
            "engine": o.engine,
            "stop_ids": sorted(o.ids),
            "reads": o.reads,
            "source": o.source,
            "rewrites": {
                field_key(k): list(v) if isinstance(v, tuple) else v for k, v in o.rewrites.items()
            },
        },
        stops=v.stops,
        stops_early=[
            {"id": s.id, "kind": s.kind, "token": s.token, "text": s.text, "reason": s.reason}
            for s in v.early
        ],
        findings=[
            {
                "code": f.code,
                "severity": f.severity.value,
                "file": f.file,
                "message": f.message,
                "fixable": f.fixable,
            }
            for f in v.findings
        ],
        modelfile=v.modelfile,
        blob_fix=v.blob_fix,
    )
    return out


def model_lines(r: RepoResult) -> list[str]:
    """One model's block: what its release stops on, each terminator, what to do."""
    from eosfix.decide.stopids import CODE_BY_KIND, what_it_is
    from eosfix.render.finding import finding_line

    v = r.ollama
    assert v is not None
    name = v.model.name
    if r.error is not None:
        return [f"{click.style('error', fg='red', bold=True)}: {name}: {r.error}"]
    c, o = r.check, v.ollama
    assert c is not None
    assert o is not None
    if not c.repo.templates:
        return [f"{name}: no chat template in its GGUF: nothing to check"]
    ids = ", ".join(str(i) for i in sorted(o.ids))
    stops = ", ".join(json.dumps(s, ensure_ascii=False) for s in v.model.stop) or "none"
    lines = [
        click.style(name, bold=True),
        f"  ollama         {o.version} ({o.engine}) stops on [{ids}]   PARAMETER stop: {stops}",
    ]
    for t in c.terminators.terminators:
        ok = (v.stops or {}).get(t.content)
        mark = click.style("stops", fg="green") if ok else click.style("never stops", fg="red")
        lines.append(f"  ends a turn    {t.content}  {t.id_str}: {mark}")
    for s in v.early:
        code = click.style(CODE_BY_KIND[s.kind].code, fg="red", bold=True)
        lines.append(f"  stops early    {code} ollama stops on {what_it_is(s)}")
    if v.blob_fix is not None:
        lines.append(f"  fix the blob   no Modelfile can take a stop id away: {v.blob_fix}")
    lines += ["  " + finding_line(name, f) for f in v.findings]
    if v.modelfile is not None:
        text = v.modelfile
        lines += ["  Modelfile that fixes it:", *(f"    {line}" for line in text.splitlines())]
    return lines


def summary(results: Sequence[RepoResult]) -> str:
    """``3 models, 1 would not stop at every turn end, ...``."""
    n = len(results)
    if not n:
        return "no models in the store: nothing checked"
    words = [r.ollama.word if r.ollama is not None else "error" for r in results]
    count = {s: words.count(s) for s in
             ("does_not_stop", "stops_early", "problems", "no_template", "error")}  # fmt: skip
    parts = [
        f"{n} model{'s' * (n != 1)}, {count['does_not_stop']} would not stop at every turn end"
    ]
    parts += [f"{count['stops_early']} stop inside a reply"] if count["stops_early"] else []
    parts += [f"{count['problems']} with other problems"] if count["problems"] else []
    parts += [f"{count['no_template']} without a chat template"] if count["no_template"] else []
    parts += [f"{count['error']} could not be read"] if count["error"] else []
    return ", ".join(parts)


def render_ollama_text(results: Sequence[RepoResult]) -> str:
    """Every model's block, then the summary (``eosfix ollama``)."""
    blocks = ["\n".join(model_lines(r)) for r in results]
    return "\n\n".join([*blocks, summary(results)])


def render_ollama_json(results: Sequence[RepoResult]) -> str:
    """``{"models": [...]}`` (``eosfix ollama --format json``)."""
    return json.dumps({"models": [model_dict(r) for r in results]}, indent=2, ensure_ascii=False)
