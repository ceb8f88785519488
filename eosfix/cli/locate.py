"""Where each finding is, for CI annotations and SARIF: the file relative to the current
folder, and the line of the key the finding is about.

A finding points at the key of its JSON file that its code is about (the registry's
``Code.about``): a stop-id finding at ``eos_token_id`` (or ``text_config.eos_token_id``), a
template finding at the template file (``chat_template`` inside tokenizer_config.json), one
about how a token is declared (EOS008) at ``added_tokens_decoder``. A file that does not exist (EOS002
names the missing generation_config.json) points at config.json's ``eos_token_id`` instead
(what transformers reads then), else at the folder, and says where ``fix`` creates it; a
GGUF's finding names the GGUF file and its metadata key (the file is binary). A Hub repo
checked by id is named ``org/name/...``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eosfix.core.codes import CODES, Subject
from eosfix.core.jsonedit import find_value_span
from eosfix.core.repo import CONFIG
from eosfix.render.annotations import Location
from eosfix.result import RepoResult

_STOP_KEYS = (("eos_token_id",), ("text_config", "eos_token_id"))
# The keys a finding points at in its JSON file, by what its code is about (the registry says).
_KEYS = {
    Subject.STOP_IDS: _STOP_KEYS,
    Subject.TEMPLATE: (("chat_template",),),
    Subject.TOKENS: (("added_tokens_decoder",),),
}


def _base(r: RepoResult, cwd: Path) -> str:
    """The unit as CI names it: relative to ``cwd`` when below it, else absolute."""
    if r.hub is not None:  # a Hub repo checked by id
        return r.hub.repo_id
    path = r.path.absolute()
    try:
        return path.relative_to(cwd.absolute()).as_posix() or "."
    except ValueError:
        return os.path.normpath(path)


def _line(text: str, keys: tuple[tuple[str, ...], ...]) -> int | None:
    for key_path in keys:
        try:
            span = find_value_span(text, key_path)
        except ValueError:  # the path crosses a value that is not an object
            continue
        if span is not None:
            return text.count("\n", 0, span[0]) + 1
    return None


def locate(r: RepoResult, cwd: Path) -> dict[tuple[str, str], Location]:
    """(code, file) of each finding of ``r`` -> where it is; ``("", "")`` -> the unit."""
    base = _base(r, cwd)
    out = {("", ""): Location(base)}
    if r.check is None:
        return out
    for f in r.check.findings:
        if r.container == "gguf":
            out[(f.code, f.file)] = Location(base, key=f.file or None)
            continue
        name = f.file.split(", ")[0]  # a template finding may name several template files
        if not name:
            out[(f.code, f.file)] = Location(base)
            continue
        file = name if base == "." else f"{base}/{name}"
        json_file = r.check.repo.files.get(name)
        if json_file is None and not (r.check.repo.root / name).exists():
            out[(f.code, f.file)] = _instead(r, base, name, file)
            continue
        line = None if json_file is None else _line(json_file.text, _KEYS[CODES[f.code].about])
        out[(f.code, f.file)] = Location(file, line)
    return out


def _instead(r: RepoResult, base: str, name: str, file: str) -> Location:
    """A finding about a file that does not exist (EOS002: generation_config.json): CI
    cannot show it there, so config.json's ``eos_token_id`` (else the folder), saying where
    ``fix`` creates the file."""
    assert r.check is not None
    created = any(getattr(p, "created", False) and p.file == name for p in r.patches)
    note = f"eosfix fix creates {file}" if created else f"{file} does not exist"
    cfg = r.check.repo.files.get(CONFIG)
    if cfg is None:
        return Location(base, note=note)
    where = CONFIG if base == "." else f"{base}/{CONFIG}"
    return Location(where, _line(cfg.text, _STOP_KEYS), note=note)


def locate_all(results: Sequence[RepoResult], cwd: Path) -> list[dict[tuple[str, str], Location]]:
    return [locate(r, cwd) for r in results]
