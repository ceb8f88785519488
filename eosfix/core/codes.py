"""Every finding code eosfix reports, in one table: one entry per code, bound to its own name
(``EOS001``...), holding all eosfix knows about it: its severity, whether ``fix`` repairs it, a
title, the anchor of its section in the docs, what it is about (where CI points at it), whether
it is about llama.cpp's own stop set (an ollama model decides those from ollama's), and the
stop-id kind it reports. Other modules refer to a code by its name and read these fields; none
keeps a list of codes of its own, and none spells a code as a string.

A check raises a finding with ``finding(EOS001, file, message)``: severity and fixability come
from the entry, so a code means the same thing wherever it is raised (a model folder, a GGUF
file, an ollama model). A few codes depend on the case (a stop id the user keeps with
``--keep-id`` is reported as a warning; an early stop that no file can change is not
fixable): ``finding`` takes an explicit override then, and the entry's ``varies`` says so.
The JSON output carries the code (its string), severity and fixability; docs/codes.md is
generated from this table and docs/_codes/ by tools/gen_codes.py (tests/test_docs.py checks
it).
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


class Finding(NamedTuple):
    """One problem: a stable code, the file (or GGUF key) it is about, a one-line message."""

    code: str
    file: str
    message: str
    severity: Severity = Severity.ERROR
    fixable: bool = False


class Subject(enum.Enum):
    """What a finding is about, which says where CI points at it in a JSON file
    (``eosfix.cli.locate``)."""

    STOP_IDS = "stop_ids"  # a list of stop ids: ``eos_token_id`` (or ``text_config.eos_token_id``)
    TEMPLATE = "template"  # the chat template: ``chat_template`` (in tokenizer_config.json)
    TOKENS = "tokens"  # how a token is declared: ``added_tokens_decoder``


class Code(NamedTuple):
    """One finding code and everything eosfix knows about it; every other module reads these
    fields from the entry, never a list of codes of its own."""

    code: str
    severity: Severity
    fixable: bool
    title: str
    varies: str = ""  # when severity or fixability differ from the defaults, and why
    about: Subject = Subject.STOP_IDS
    # About which ids a GGUF's keys make llama.cpp (or ollama's Go engine) stop on: for an
    # ollama model, ollama's own stop set (its release, its params) decides these instead.
    llamacpp_stop_set: bool = False
    # The code of a stop id of this kind (``eosfix.decide.stopids``), whatever holds it: a
    # file's list, a GGUF key. "": no stop-id kind has it.
    stop_id_kind: str = ""

    @property
    def anchor(self) -> str:
        """The docs anchor of its section (``#eos012``)."""
        return self.code.lower()


# One row per code, each bound to its own name: checks raise ``finding(EOS001, ...)``; the
# order is the docs' and SARIF's.
# fmt: off
_E, _W = Severity.ERROR, Severity.WARNING
_TEMPLATE, _TOKENS = Subject.TEMPLATE, Subject.TOKENS
EOS001 = Code("EOS001", _E, True, "a turn terminator is not a stop id")
EOS002 = Code(
    "EOS002", _E, True, "no generation_config.json, and config.json's eos lacks a terminator"
)
EOS003 = Code("EOS003", _E, True, "generation_config.json has no eos_token_id")
EOS004 = Code("EOS004", _W, False, "the tokenizer's eos_token is not a stop id")
EOS005 = Code("EOS005", _W, False, "turns end with plain text: a stop string is needed",
              about=_TEMPLATE)
EOS006 = Code("EOS006", _E, False, "a terminator is not a single token of the vocabulary",
              about=_TEMPLATE)
EOS007 = Code("EOS007", _W, False, "a terminator's id cannot be checked without tokenizer.json",
              about=_TEMPLATE)
EOS008 = Code("EOS008", _W, False, "a terminator is not marked special", about=_TOKENS)
EOS009 = Code("EOS009", _W, False, "no turn terminator found", about=_TEMPLATE)
EOS010 = Code(
    "EOS010", _E, False,
    "what closes the last reply is also written inside a turn, and nothing else closes it",
    about=_TEMPLATE,
)
EOS011 = Code(
    "EOS011", _E, True,
    "a stop id the template writes inside an assistant turn: the reply is cut",
    varies="a warning when kept with --keep-id or in config.json without --config-json; "
    "not fixable when no key or file eosfix edits causes it",
    llamacpp_stop_set=True, stop_id_kind="in_turn",
)
EOS012 = Code(
    "EOS012", _E, True,
    "a stop id that is an ordinary text token: replies are cut where they use it",
    varies="a warning when kept with --keep-id, in config.json without --config-json, or "
    "when llama.cpp stops on it by its text alone; not fixable when no key or file eosfix "
    "edits causes it",
    llamacpp_stop_set=True, stop_id_kind="ordinary",
)
EOS013 = Code(
    "EOS013", _W, True, "a stop id that is no token: it never fires",
    varies="not fixable when no key or file eosfix edits holds it",
    llamacpp_stop_set=True, stop_id_kind="out_of_vocab",
)
EOS014 = Code("EOS014", _W, False, "eos_token_id is written twice in one JSON object")
EOS015 = Code(
    "EOS015", _E, True,
    "a runtime that reads generation_config.json misses a terminator the written list would "
    "give it",
)
EOS016 = Code(
    "EOS016", _E, False,
    "what closes the last reply is also written by a tool-calling reply before more of its own "
    "text, and nothing else closes it",
    about=_TEMPLATE,
)
EOS017 = Code(
    "EOS017", _E, True,
    "a file runtimes read starts with a byte-order mark: their JSON readers refuse it",
    varies="not fixable in a file fix does not write (fix writes generation_config.json, and "
    "config.json with --config-json); a warning when no runtime opens the file in this folder",
)
EOS018 = Code("EOS018", _E, True, "eos_token_id is not a token id or a list of ids")
EOS019 = Code("EOS019", _E, False,
              "a chat template file is empty: every conversation renders as an empty prompt",
              about=_TEMPLATE)
EOS020 = Code(
    "EOS020", _E, True,
    "a file runtimes read is not JSON at all: each ignores it or cannot load the model",
    varies="not fixable in a file fix does not write (fix writes generation_config.json anew); "
    "a warning when no runtime opens the file in this folder",
)
EOS100 = Code("EOS100", _E, False, "a template refused every probe", about=_TEMPLATE)
EOS101 = Code("EOS101", _E, False, "a template exceeded a render limit", about=_TEMPLATE)
EOS102 = Code("EOS102", _E, False, "a template tried to reach an attribute the sandbox hides",
              about=_TEMPLATE)
EOS103 = Code("EOS103", _E, False,
              "a template could not finish rendering in time on this machine: retry",
              about=_TEMPLATE)
EOS201 = Code("EOS201", _E, True,
              "a GGUF's terminator is not in llama.cpp's end-of-generation set",
              llamacpp_stop_set=True)
EOS202 = Code("EOS202", _E, False,
              "llama.cpp cannot hold every terminator in eot/eom: stop strings are needed",
              llamacpp_stop_set=True)
EOS203 = Code(
    "EOS203", _E, True,
    "ollama's Go engine (0.7.1 to 0.24.0) misses a terminator: eos_token_ids lacks it",
    llamacpp_stop_set=True,
)
# fmt: on

CODES: dict[str, Code] = {c.code: c for c in list(globals().values()) if isinstance(c, Code)}


def finding(
    code: Code,
    file: str,
    message: str,
    *,
    severity: Severity | None = None,
    fixable: bool | None = None,
) -> Finding:
    """A finding of a registered code; ``severity``/``fixable`` override the table's default
    only for the codes whose ``varies`` says when."""
    if (severity is not None or fixable is not None) and not code.varies:
        raise ValueError(f"{code.code} has a fixed severity and fixability")
    return Finding(
        code.code,
        file,
        message,
        code.severity if severity is None else severity,
        code.fixable if fixable is None else fixable,
    )
