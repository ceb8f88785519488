"""The ``params`` document ``ollama run hf.co/...`` gets for a GGUF on the Hub, and the one a
pull request writes so that ollama stops where turns end.

``ollama_params``: the repo's ``params`` file when it has one (taken as the whole document:
whether the Hub merges it with its conversion is not public), else the Hub's conversion of
the file's chat template (``eosfix.runtimes.ollama.hub.convert``, with eosfix's sandboxed
renderer standing in for ``@huggingface/jinja``).

``plan_params``: the stop list that makes ollama stop at every terminator and nowhere inside a
reply, as a complete params document: every other key kept (the repo's file edited in place,
byte for byte elsewhere; else the conversion's params with ``stop`` set). A stop string whose
token the template writes inside a turn, or an ordinary text token, is taken out (it cuts
replies wherever ollama can see it); each terminator ollama's set for the file misses is added
(it makes ollama before 0.30 stop; from 0.30 on, a control token's text is invisible to stop
strings, and only the GGUF's own keys make ollama stop there). Nothing when the list needs no
change. Pure; the terminators come from the template and the tokens, never from this.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from eosfix.containers.gguf.read import GgufModel
from eosfix.core.jsonedit import set_json_value
from eosfix.decide.check import RepoCheck
from eosfix.decide.runtime_table import cutting_ids
from eosfix.runtimes.ollama.hub import Converted, Render, convert, params_stop

PARAMS_FILE = "params"
FROM_FILE, FROM_CONVERSION = "params file", "conversion"


@dataclass(frozen=True)
class OllamaParams:
    """The params document the Hub hands ollama for one GGUF: its text (None: none), where it
    comes from (the repo's ``params`` file, or the Hub's ``conversion``), the conversion (when
    it is the source) and, for a params file ollama refuses, why."""

    text: str | None
    source: str
    conversion: Converted | None = None
    problem: str | None = None
    file_text: str | None = None  # the repo's params file as it is (valid or not)

    @property
    def from_file(self) -> bool:
        """The repo's own params file (else the Hub's conversion of the template)."""
        return self.source == FROM_FILE

    @property
    def stop(self) -> tuple[str, ...]:
        if self.problem is not None:
            return ()
        return params_stop(self.text) or ()

    @property
    def source_text(self) -> str:
        """Where the stop list comes from, in a few words."""
        if self.source == FROM_FILE:
            return "the repo's params file"
        conv = self.conversion
        path = conv.path if conv is not None else "none"
        return f"the Hub's conversion of the chat template ({path})"


def ollama_params(model: GgufModel, repo_file: bytes | None, render: Render) -> OllamaParams:
    """What ollama gets: the repo's ``params`` file (``repo_file``), else the conversion of
    the GGUF's default chat template, rendered with the text of its bos and eos tokens."""
    if repo_file is not None:
        raw = repo_file.decode("utf-8", "replace")
        try:
            text = repo_file.decode("utf-8")
            params_stop(text)
        except (UnicodeDecodeError, ValueError) as exc:
            why = "not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
            return OllamaParams(None, FROM_FILE, problem=why, file_text=raw)
        return OllamaParams(text, FROM_FILE, file_text=text)
    template = next((t.source for t in model.repo.templates if t.name == "default"), None)
    special = model.repo.special_tokens
    conv = convert(template, special.get("bos_token"), special.get("eos_token"), render)
    return OllamaParams(conv.params, FROM_CONVERSION, conv)


@dataclass(frozen=True)
class ParamsPlan:
    """The params document a pull request writes: ``old`` (None: the repo has no params file)
    and ``new`` texts, the stop list before and after, what was taken out and added."""

    old: str | None
    new: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]


def planned_stops(
    check: RepoCheck, model: GgufModel, current: Sequence[str], stops_now: frozenset[int]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(the stop list, what it takes out, what it adds): see the module. ``stops_now``: the
    ids ollama's own set for the file stops on."""
    text_ids = model.vocab.text_ids
    ids = {s: text_ids.get(s) for s in current}
    cutting = {s.id for s in cutting_ids(check, [i for i in ids.values() if i is not None])}
    removed = tuple(s for s in current if ids[s] in cutting)
    kept = [s for s in current if s not in removed]
    added = tuple(
        dict.fromkeys(
            t.content
            for t in check.terminators.terminators
            if (t.id is None or t.id not in stops_now)
            and not any(s and s in t.content for s in kept)
        )
    )
    return tuple(dict.fromkeys([*kept, *added])), removed, added


def plan_params(
    check: RepoCheck, model: GgufModel, params: OllamaParams, stops_now: frozenset[int]
) -> ParamsPlan | None:
    """The params document that fixes the stop list, or None when it needs no change (or the
    file has no chat template)."""
    if not check.repo.templates:
        return None
    before = params.stop
    after, removed, added = planned_stops(check, model, before, stops_now)
    if not removed and not added and params.problem is None:
        return None
    if params.source == FROM_FILE and params.text is not None:
        new = set_json_value(params.text, ("stop",), list(after))
        return ParamsPlan(params.text, new, before, after, removed, added)
    base = json.loads(params.text) if params.text else {}  # the conversion's params
    document = {**base, "stop": list(after)}
    new = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return ParamsPlan(params.file_text, new, before, after, removed, added)
