"""Text and JSON for a checked GGUF: what ends a turn, what llama.cpp stops on, what changes."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

import click

from eosfix.containers.gguf.plan import EOG_SOURCE, GgufCheck, stop_instructions
from eosfix.pipeline import RepoResult
from eosfix.runtimes.llamacpp import LLAMA_CPP_VERSION, EogSet, key_name

KIND_TEXT = {
    "turn_end": "written after every reply",
    "tool_call": "written after a tool call",
    "next_turn_opener": "opens the next turn (replies have no closing token)",
    "stop_string": "plain text: needs a stop string",
}
RUNTIMES_TEXT = "llama.cpp (and llama-cpp-python, LM Studio, ollama, which run it)"


def is_gguf_check(check: object) -> bool:
    return getattr(check, "container", None) == "gguf"


def _ids(ids: Iterable[int]) -> str:
    return "[" + ", ".join(str(i) for i in sorted(ids)) + "]"


def _slot(c: GgufCheck, role: str) -> str:
    """``eot 100 <|user|>``; ``(by text)`` when llama.cpp found it by its text, not a key."""
    assert c.model is not None
    token_id, found = c.model.specials.get(role), c.model.specials.detected.get(role, ())
    if token_id is None and found:
        texts = " or ".join(str(c.model.token_text(i)) for i in found)
        return f"{role} {texts} (by text, llama.cpp picks one)"
    if token_id is None:
        return f"{role} -"
    return f"{role} {token_id} {c.model.token_text(token_id)}" + (" (by text)" if found else "")


def _eog_line(c: GgufCheck, eog: EogSet) -> str:
    slots = ", ".join(_slot(c, r) for r in ("eos", "eot", "eom"))
    return f"stops on {_ids(eog.ids)}  ({slots}; + token texts; {LLAMA_CPP_VERSION.split(' (')[0]})"


def _edits_text(c: GgufCheck) -> str:
    assert c.plan is not None
    return ", ".join(f"{e.key} -> {e.new} {e.token}" for e in c.plan.edits)


def _how(c: GgufCheck) -> str:
    assert c.plan is not None
    if c.plan.in_place:
        return "in place: only those 4-byte values"
    return "rewrite: new header, tensor data copied and hash-checked"


def _early(c: GgufCheck, eog: EogSet) -> str:
    """``stops inside a turn at <|end|>`` for the ids of ``eog`` that cut a reply."""
    cut = [s for s in c.cutting if s.id in eog.ids]
    if not cut:
        return ""
    inside = all(s.kind == "in_turn" for s in cut)
    names = ", ".join(s.token or str(s.id) if s.kind == "in_turn" else s.label for s in cut)
    return f"stops {'inside a turn' if inside else 'mid-reply'} at {names}"


def _runtimes_line(c: GgufCheck) -> str:
    terms = [t for t in c.id_terminators if t.id is not None]
    if not terms:
        return "nothing to compare: no terminator has a token id"
    assert c.eog is not None
    missed = [t.content for t in terms if t.id not in c.eog.ids]
    early = _early(c, c.eog)
    if not missed and not early:
        return f"{RUNTIMES_TEXT} stops at every terminator"
    now = [f"would not stop on {' '.join(missed)}"] if missed else []
    now += [early] if early else []
    if c.plan is not None:
        still = _early(c, c.plan.eog_after)
        after = f"stops on all; still {still}" if still else "stops on all"
    elif missed:
        after = "still not (no free key: use stop strings)"
    else:
        after = f"still {early}"
    return f"{RUNTIMES_TEXT} {'; '.join(now)}; after fix: {after}"


def _instead_lines(c: GgufCheck) -> list[str]:
    texts = c.stop_strings_needed
    if not texts:
        return []
    how = stop_instructions(texts)
    return [
        f"  instead       stop on {' '.join(repr(t) for t in texts)} as text:",
        *(
            f"                {prog}: {line}"
            for prog, text in how.items()
            for line in text.splitlines()
        ),
    ]


def diff_text(r: RepoResult, c: GgufCheck) -> str:
    """The key edits as a unified-diff-like block (the file is binary)."""
    if c.plan is None:
        return ""
    lines = [f"--- a/{r.path.name} (GGUF metadata)", f"+++ b/{r.path.name} (GGUF metadata)"]
    for e in c.plan.edits:
        lines += [f"-{e.key}: {e.old_str}", f"+{e.key}: {e.new}  # {e.token}"]
    return "\n".join(lines)


def _finding_line(r: RepoResult, code: str, file: str, message: str, error: bool) -> str:
    where = f"{r.name}/{file}" if file else r.name
    color = "red" if error else "yellow"
    return f"{where}: {click.style(code, fg=color, bold=True)} {message}"


def _findings(r: RepoResult, findings: Iterable[Any], label: str = "") -> list[str]:
    return [
        f"  {label:<13} " * bool(label)
        + ("" if label else "  ")
        + _finding_line(r, f.code, f.file, f.message, f.severity.value == "error")
        for f in findings
    ]


def _written_lines(r: RepoResult, before: GgufCheck, now: GgufCheck) -> list[str]:
    """A file was written: what llama.cpp stopped on, what was fixed and written, what now."""
    assert before.eog is not None
    assert before.plan is not None
    assert now.eog is not None
    remaining = {(f.code, f.file) for f in now.findings}
    write = r.extra.get("write")
    target = write.get("path") if isinstance(write, dict) else None
    other = target is not None and target != str(r.path)  # --output: the original stays
    into = f" into {shlex.quote(str(target))}" if other else ""
    kept = f"; {r.name} is unchanged" if other else ""
    return [
        f"  llama.cpp     stopped on {_ids(before.eog.ids)}, before the fix",
        *_findings(r, [f for f in before.findings if (f.code, f.file) not in remaining], "fixed"),
        f"  wrote         {_edits_text(before)}{into}  ({_how(before)}){kept}",
        f"  llama.cpp     {'the new file ' * other}{_eog_line(now, now.eog)}",
        *_findings(r, now.findings),
    ]


def render_gguf_text(r: RepoResult, *, fixing: bool = False, show_diff: bool = False) -> str:
    c = r.check
    assert isinstance(c, GgufCheck)
    assert c.eog is not None
    if not c.repo.templates:
        return f"{r.name}: no chat template in the GGUF: nothing to check"
    lines = [click.style(r.name, bold=True)]
    for t in c.terminators.terminators:
        kind = KIND_TEXT.get(t.kind, t.kind)
        lines.append(
            f"  ends a turn   {t.content}  {t.id_str}, {kind} (template {', '.join(t.templates)})"
        )
    if not c.terminators.terminators:
        lines.append("  ends a turn   (nothing found)")
    if r.written and isinstance(r.before, GgufCheck):
        lines += _written_lines(r, r.before, c)
    else:
        lines.append(f"  llama.cpp     {_eog_line(c, c.eog)}")
        lines += _findings(r, c.findings)
    if c.plan is not None:
        run = "" if fixing else f"  (run: eosfix fix {shlex.quote(str(r.path))})"
        lines.append(f"  fix           {_edits_text(c)}  ({_how(c)}){run}")
        lines.append(f"  after fix     stops on {_ids(c.plan.eog_after.ids)}")
    lines += _instead_lines(c)
    lines.append(f"  runtimes      {_runtimes_line(c)}")
    if show_diff and c.plan is not None:
        lines.append(diff_text(r, c))
    return "\n".join(lines)


def _eog_dict(c: GgufCheck, eog: EogSet, planned: GgufCheck | None = None) -> dict[str, Any]:
    """llama.cpp's set and the eos/eot/eom ids of ``c``'s file; with ``planned``, as its
    plan's key edits leave them."""
    assert c.model is not None
    edits = {e.key: e.new for e in (planned.plan.edits if planned and planned.plan else ())}
    return {
        "eog": sorted(eog.ids),
        "uncertain": sorted(eog.uncertain),
        **{r: edits.get(key_name(r), c.model.specials.get(r)) for r in ("eos", "eot", "eom")},
    }


def _early_dict(c: GgufCheck, eog: EogSet) -> dict[str, int]:
    return {(s.text or s.token or str(s.id)): s.id for s in c.cutting if s.id in eog.ids}


def gguf_result_dict(r: RepoResult, base: dict[str, Any]) -> dict[str, Any]:
    """The JSON of one GGUF: ``base`` (the shared keys) plus the llama.cpp view."""
    c = r.check
    assert isinstance(c, GgufCheck)
    assert c.eog is not None
    # After a write, ``before`` holds the plan that was written; ``c`` is the file as written.
    planned = r.before if r.written and isinstance(r.before, GgufCheck) else c
    assert planned.eog is not None
    drop = ("eos_token_id", "eos_token_id_source", "proposed_eos_token_id", "runtimes", "changes")
    out = {k: v for k, v in base.items() if k not in drop}
    if isinstance(out.get("before"), dict):
        out["before"] = {k: v for k, v in out["before"].items() if k in ("status", "findings")}
    out["container"] = "gguf"
    out["llama_cpp"] = {
        "version": LLAMA_CPP_VERSION,
        "source": EOG_SOURCE,
        "before": _eog_dict(planned, planned.eog),
        "after": None if planned.plan is None else _eog_dict(c, planned.plan.eog_after, planned),
        "stops_before": {t.content: t.id in planned.eog.ids for t in planned.id_terminators},
        "stops_early_before": _early_dict(planned, planned.eog),
        "stops_early_after": (
            None if planned.plan is None else _early_dict(planned, planned.plan.eog_after)
        ),
    }
    out["changes"] = [
        {"key": e.key, "old": e.old, "new": e.new, "token": e.token}
        for e in (planned.plan.edits if planned.plan is not None else ())
    ]
    out["in_place"] = None if planned.plan is None else planned.plan.in_place
    texts = c.stop_strings_needed
    out["stop_instead"] = {"texts": list(texts), **stop_instructions(texts)} if texts else None
    return out


def loop_section(c: GgufCheck) -> list[str]:
    """explain's closing section for a GGUF: llama.cpp's set before and after, loop ids."""
    assert c.eog is not None
    ids = c.plan.eog_after.ids if c.plan is not None else c.eog.ids
    where = "after `eosfix fix`" if c.plan is not None else "as the file is"
    lines = [
        click.style(f"llama.cpp ({LLAMA_CPP_VERSION})", bold=True),
        f"  {_eog_line(c, c.eog)}",
        (
            f"  reads {key_name('eos')}, {key_name('eot')}, {key_name('eom')}, the FIM ids and "
            "token texts; LM Studio, llama-cpp-python and ollama use the same rule"
        ),
        "",
        click.style("For a hand-written generation loop", bold=True),
        f"  stop when the sampled id is in {_ids(ids)}  (llama.cpp's set {where})",
    ]
    if c.stop_strings_needed:
        lines.append(
            f"  and stop on the text {list(c.stop_strings_needed)} (no single id holds it)"
        )
    return lines
