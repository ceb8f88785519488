"""Every finding code eosfix reports, in one table: its severity, whether ``fix`` repairs it, a
title and the anchor of its section in the docs.

A check raises a finding with ``finding(code, file, message)``: severity and fixability come
from the table, so a code means the same thing wherever it is raised (a model folder, a GGUF
file, an ollama model). A few codes depend on the case (a stop id the user keeps with
``--keep-id`` is reported as a warning; an early stop that no file can change is not
fixable): ``finding`` takes an explicit override then, and the table's ``varies`` says so.
The JSON output carries the code, severity and fixability; docs/codes.md is generated from
this table and docs/_codes/ by tools/gen_codes.py (tests/test_docs.py checks it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One problem: a stable code, the file (or GGUF key) it is about, a one-line message."""

    code: str
    file: str
    message: str
    severity: Severity = Severity.ERROR
    fixable: bool = False


@dataclass(frozen=True)
class Code:
    code: str
    severity: Severity
    fixable: bool
    title: str
    varies: str = ""  # when severity or fixability differ from the defaults, and why

    @property
    def anchor(self) -> str:
        """The docs anchor of its section (``#eos012``)."""
        return self.code.lower()


_E, _W = Severity.ERROR, Severity.WARNING
CODES: dict[str, Code] = {
    c.code: c
    for c in (
        Code("EOS001", _E, True, "a turn terminator is not a stop id"),
        Code(
            "EOS002", _E, True,
            "no generation_config.json, and config.json's eos lacks a terminator",
        ),
        Code("EOS003", _E, True, "generation_config.json has no eos_token_id"),
        Code("EOS004", _W, False, "the tokenizer's eos_token is not a stop id"),
        Code("EOS005", _W, False, "turns end with plain text: a stop string is needed"),
        Code("EOS006", _E, False, "a terminator is not a single token of the vocabulary"),
        Code("EOS007", _W, False, "a terminator's id cannot be checked without tokenizer.json"),
        Code("EOS008", _W, False, "a terminator is not marked special"),
        Code("EOS009", _W, False, "no turn terminator found"),
        Code(
            "EOS010", _E, False,
            "what closes the last reply is also written inside a turn, and nothing else "
            "closes it",
        ),
        Code(
            "EOS011", _E, True,
            "a stop id the template writes inside an assistant turn: the reply is cut",
            varies="a warning when kept with --keep-id or in config.json without "
            "--config-json; not fixable when no key or file eosfix edits causes it",
        ),
        Code(
            "EOS012", _E, True,
            "a stop id that is an ordinary text token: replies are cut where they use it",
            varies="a warning when kept with --keep-id, in config.json without --config-json, "
            "or when llama.cpp stops on it by its text alone; not fixable when no key or "
            "file eosfix edits causes it",
        ),
        Code(
            "EOS013", _W, True, "a stop id that is no token: it never fires",
            varies="not fixable when no key or file eosfix edits holds it",
        ),
        Code("EOS014", _W, False, "eos_token_id is written twice in one JSON object"),
        Code(
            "EOS015", _E, True,
            "a runtime that reads generation_config.json misses a terminator the written "
            "list would give it",
        ),
        Code(
            "EOS016", _E, False,
            "what closes the last reply is also written by a tool-calling reply before more of "
            "its own text, and nothing else closes it",
        ),
        Code(
            "EOS017", _E, True,
            "a file runtimes read starts with a byte-order mark: their JSON readers refuse it",
            varies="not fixable in a file fix does not write (fix writes generation_config.json, "
            "and config.json with --config-json); a warning when no runtime opens the file in "
            "this folder",
        ),
        Code("EOS018", _E, True, "eos_token_id is not a token id or a list of ids"),
        Code(
            "EOS019", _E, False,
            "a chat template file is empty: every conversation renders as an empty prompt",
        ),
        Code(
            "EOS020", _E, True,
            "a file runtimes read is not JSON at all: each ignores it or cannot load the model",
            varies="not fixable in a file fix does not write (fix writes generation_config.json "
            "anew); a warning when no runtime opens the file in this folder",
        ),
        Code("EOS100", _E, False, "a template refused every probe"),
        Code("EOS101", _E, False, "a template exceeded a render limit"),
        Code("EOS102", _E, False, "a template tried to reach an attribute the sandbox hides"),
        Code(
            "EOS103", _E, False,
            "a template could not finish rendering in time on this machine: retry",
        ),
        Code(
            "EOS201", _E, True,
            "a GGUF's terminator is not in llama.cpp's end-of-generation set",
        ),
        Code(
            "EOS202", _E, False,
            "llama.cpp cannot hold every terminator in eot/eom: stop strings are needed",
        ),
        Code(
            "EOS203", _E, True,
            "ollama's Go engine (0.7.1 to 0.24.0) misses a terminator: eos_token_ids lacks it",
        ),
    )
}  # fmt: skip


def finding(
    code: str,
    file: str,
    message: str,
    *,
    severity: Severity | None = None,
    fixable: bool | None = None,
) -> Finding:
    """A finding of a registered code; ``severity``/``fixable`` override the table's default
    only for the codes whose ``varies`` says when."""
    entry = CODES[code]
    if (severity is not None or fixable is not None) and not entry.varies:
        raise ValueError(f"{code} has a fixed severity and fixability")
    return Finding(
        code,
        file,
        message,
        entry.severity if severity is None else severity,
        entry.fixable if fixable is None else fixable,
    )
