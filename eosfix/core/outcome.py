"""What a command comes to: the verdict of each repo, and the one exit-code rule.

Every command and every batch exits through ``exit_code`` (README "Exit codes"): 2 when a
path was not checked or could not be read, something outside the repos failed, or nothing
was checked at all; 1 when files were changed, a fix is pending or a problem cannot be fixed
(and, with ``strict``, when a repo has warnings only); else 0. Warnings alone (a stop string
needed, an id that cannot be checked) exit 0. 130 when the user interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

from collections.abc import Mapping

EXIT_OK = 0  # nothing to fix / nothing changed
EXIT_FINDINGS = 1  # findings (check) or files changed (fix); warnings too with --strict
EXIT_INPUT = 2  # usage error, a path not checked, or an input that cannot be read
EXIT_INTERNAL = 3  # a bug: rerun with EOSFIX_DEBUG=1 for the traceback
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports SIGINT

# What one repo (or cache snapshot, or GGUF file) comes to, in the order summaries list them:
# the one vocabulary of every output (the ``verdict`` of check's, cache's and hub's JSON, the
# CSV column, the tables' words; docs/schema/). ``not_a_model``: tokenizer files only (no
# config.json, no generation_config.json): no runtime loads a model from it.
VERDICTS = (
    "fixed", "fixable", "problems", "warned", "ok", "no_template", "not_a_model", "error",
)  # fmt: skip
_FAILING = frozenset(("fixed", "fixable", "problems"))
QUIET = frozenset(("ok", "no_template", "not_a_model"))  # nothing to say: left out by --quiet


# What is wrong with a repo that needs a fix (``fixable``) or has problems eosfix cannot fix
# (``problems``), as every output says it (JSON ``problem``, the CSV column, the tables'
# words), from the per-runtime verdicts of the files as they are: ``runs_on``: some runtime
# misses a terminator (generation runs past the turn end); ``stops_early``: some runtime stops
# at an id that cuts a reply; both; ``never_fires``: only ids that are no token (EOS013); and
# for a ``warned`` repo whose turns end with plain text (EOS005), ``needs_stop_string``: no
# stop id can end its turns, so every runtime runs on unless it is given the text to stop on.
PROBLEMS = ("runs_on", "stops_early", "runs_on_and_stops_early", "never_fires", "needs_stop_string")


def problem_of(
    verdict: str,
    *,
    runs_on: bool,
    stops_early: bool,
    never_fires: bool = False,
    needs_stop_string: bool = False,
) -> str | None:
    """One of PROBLEMS for a ``fixable`` or ``problems`` verdict, or for a ``warned`` one whose
    turns end with plain text; else None (nothing is wrong, or the verdict says it all:
    ``not_a_model``, ``no_template``, ``error``)."""
    if verdict == "warned" and needs_stop_string:
        return "needs_stop_string"
    if verdict not in ("fixable", "problems"):
        return None
    if runs_on and stops_early:
        return "runs_on_and_stops_early"
    if runs_on or stops_early:
        return "runs_on" if runs_on else "stops_early"
    return "never_fires" if never_fires else None


def verdict_of(status: str, *, written: bool, has_findings: bool, has_patches: bool = False) -> str:
    """One of VERDICTS from a check's status ("ok", "fixable", "problems", "no_template",
    "not_a_model", "error"): ``error`` (not checked), ``fixed`` (files written), ``fixable`` (a fix is planned,
    e.g. config.json's with --config-json), ``warned`` (stops on every id but has warnings),
    else the status itself."""
    if status == "error":
        return "error"
    if written:
        return "fixed"
    if has_patches and status == "ok":
        return "fixable"
    if status == "ok" and has_findings:
        return "warned"
    return status


def exit_code(counts: Mapping[str, int], *, strict: bool = False, failed: bool = False) -> int:
    """The exit code of a command from how many repos came to each verdict.

    ``failed``: something that is not a repo's verdict could not be done (a path not checked,
    a listing, a corrupted cache entry, a pull request): exit 2 like an unreadable repo.
    ``strict``: warnings fail too.
    """
    if failed or counts.get("error") or not any(counts.values()):
        return EXIT_INPUT
    failing = _FAILING | {"warned"} if strict else _FAILING
    return EXIT_FINDINGS if any(counts.get(v) for v in failing) else EXIT_OK


class Interrupted(Exception):
    """Ctrl-C or SIGTERM stopped a command: it exits 130 with one line on stderr,
    ``interrupted`` and, when given, what was kept (``interrupted: 5 repos recorded...``)."""

    def __init__(self, kept: str | None = None) -> None:
        super().__init__(kept)
        self.kept = kept

    def __str__(self) -> str:
        return "interrupted" + (f": {self.kept}" if self.kept else "")
