"""A GGUF repo as one row of an audit (``eosfix hub``): the verdict of its worst group of alike
files (``eosfix.targets.gguf_hub`` checks them), its files summarised, a group that differs
named, and the result whose ``params`` file a pull request carries."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eosfix.batch.verdict import Detail, Verdict, to_verdict
from eosfix.result import RepoResult
from eosfix.sources.hub.gguf import quant_label
from eosfix.targets.gguf_hub import GgufRepoCheck
from eosfix.targets.pr import params_result

# A repo's verdict is its worst group's: the first of these its groups came to (a quant that
# would not stop outweighs the others that do; one that cannot be read, those that are fine).
_WORST_FIRST = ("problems", "fixable", "fixed", "error", "warned", "ok", "no_template",
                "not_a_model")  # fmt: skip


def repo_verdict(checked: GgufRepoCheck, detail: Detail | None) -> tuple[Verdict, list[Any]]:
    """An audit's one verdict for a GGUF repo (``eosfix hub``): the verdict of its worst group
    of alike files (the biggest group when they agree), its JSON entry or text block that
    group's, and ``Verdict.gguf`` the files summarised, each group that differs named
    ("Q8_0 differs in tokenizer.ggml.eos_token_id: would be fixed"), ``Verdict.params_file``
    the file a pull request would set (``params_fix``). Also each group as JSON
    (``groups``): its files, its verdict, what it differs in."""
    repo_id = checked.entry.repo_id
    results = [r._replace(path=Path(repo_id)) for r in checked.results]
    plain = [to_verdict(r, None) for r in results]
    worst = min(range(len(plain)), key=lambda i: _WORST_FIRST.index(plain[i].name))
    chosen = to_verdict(results[worst], detail) if detail is not None else plain[worst]
    if detail is not None and detail.kind == "text":  # named by its file, not the repo alone
        chosen = dataclasses.replace(chosen, text=detail.render(checked.results[worst]))
    groups = [_group_json(r, v) for r, v in zip(results, plain, strict=True)]
    params = params_fix(checked)
    params_file = params.ollama_hub.file if params is not None and params.ollama_hub else None
    note = _files_note(checked, results, plain)
    return dataclasses.replace(chosen, gguf=note, params_file=params_file), groups


def params_fix(checked: GgufRepoCheck) -> RepoResult | None:
    """The result whose ``params`` file a pull request carries (``eosfix.targets.pr``)."""
    return params_result(checked.results)


def _group_json(result: RepoResult, v: Verdict) -> dict[str, Any]:
    group = result.gguf
    file = group.file if group is not None else None
    return {
        "file": file,
        "quant": quant_label(file or ""),
        "files": [f.path for f in group.files] if group is not None else [],
        "verdict": v.name,
        "problem": v.problem,
        "differs_in": list(group.differs_in) if group is not None else [],
        "error": v.error,
    }


def _files_note(
    checked: GgufRepoCheck, results: Sequence[RepoResult], verdicts: Sequence[Verdict]
) -> str:
    """``12 GGUF files alike``, ``11 of 12 GGUF files alike; Q8_0 differs in ...: ...``."""
    n = len(checked.files)
    read = [(r, v) for r, v in zip(results, verdicts, strict=True) if _read(r)]
    words = []
    if read:
        alike = len(_files(read[0][0]))
        words.append(
            ("1 GGUF file" if n == 1 else f"{n} GGUF files alike")
            if alike == n
            else f"{alike} of {n} GGUF files alike"
        )
    for result, v in read[1:]:
        others = len(_files(result)) - 1
        more = f" and {others} more" if others > 0 else ""
        differs = ", ".join(result.gguf.differs_in if result.gguf else ()) or "its stop fields"
        words.append(f"{_name(result)}{more} differs in {differs}: {verdict_words(v)}")
    words += [f"{_name(r)} cannot be read" for r in results if not _read(r)]
    return "; ".join(words)


def _read(result: RepoResult) -> bool:
    """A group of files read (not a file that could not be)."""
    return result.gguf is not None and result.gguf.read


def _files(result: RepoResult) -> tuple[str, ...]:
    return tuple(f.path for f in result.gguf.files) if result.gguf is not None else ()


def _name(result: RepoResult) -> str:
    file = result.gguf.file if result.gguf is not None else result.name
    return quant_label(file) or file


def verdict_words(v: Verdict) -> str:
    """A short verdict for a note: "would be fixed", "stops correctly"..."""
    words = {"fixable": "would be fixed", "problems": "problems eosfix cannot fix",
             "ok": "stops correctly", "warned": "stops correctly, with warnings",
             "no_template": "no chat template", "error": "error"}  # fmt: skip
    return words.get(v.name, v.name)
