"""The protocol every runner speaks: folders in, one JSON document out.

A runner is a script run by the Python of the runtime's own virtualenv (it imports neither
eosfix nor the tests): ``python RUNNER --out FILE [--scan N] FOLDER...``. For each folder it asks
the runtime's own code for the set of token ids generation stops on, and confirms every id below
``--scan`` (and every id of the set) with the runtime's own per-token stop check, so the set is
what the runtime's loop does, not only what its fields hold. It writes
``{"runtime", "version", "details", "sets": {folder: {"ids": [...]} or {"error": "Type: msg"}}}``.
A folder the runtime refuses is an ``error`` for that folder, never the runner's failure.

``python RUNNER --serve [--scan N]`` answers one folder at a time instead: it writes
``{"runtime", "version", "details"}`` as its first line on standard output, then for each folder
read from standard input (one path a line) one line ``{"folder", "ids"}`` or ``{"folder",
"error"}``, until standard input ends. Whatever the runtime itself prints goes to standard error.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import NoReturn


class Disagrees(AssertionError):
    """The runtime's stop check disagrees with the set its fields hold."""


def confirm(declared: Iterable[object], stops: Callable[[int], bool], scan: int) -> list[int]:
    """The token ids of ``declared`` (the values the runtime's fields hold) as a sorted list,
    after checking ``stops(i)`` for every id below ``scan`` and every id a value equals.

    A value counts as the ids that compare equal to it, as the runtime's ``token in ...``
    does: ``2.0`` and ``True`` are 2 and 1; a string, ``None`` or a list equals no id."""
    values = list(declared)
    equal = {int(v) for v in values if isinstance(v, (int, float)) and v == int(v)}
    ids = set()
    for token_id in sorted(set(range(scan)) | equal):
        listed = any(token_id == v for v in values)
        if stops(token_id) != listed:
            raise Disagrees(f"id {token_id}: stop check {stops(token_id)}, set {values!r}")
        if listed:
            ids.add(token_id)
    return sorted(ids)


def main(
    runtime: str,
    version: str,
    details: dict[str, str],
    stop_set: Callable[[str, int], list[int]],
) -> NoReturn:
    parser = argparse.ArgumentParser(description=f"{runtime}'s stop set for each folder")
    parser.add_argument("--out")
    parser.add_argument("--serve", action="store_true", help="folders from standard input")
    parser.add_argument("--scan", type=int, default=256)
    parser.add_argument("folders", nargs="*")
    args = parser.parse_args()
    if args.serve == bool(args.out or args.folders):
        parser.error("either --out FILE FOLDER... or --serve")
    header = {"runtime": runtime, "version": version, "details": details}
    if args.serve:
        answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)  # what the runtime prints is no answer
        answers.write(json.dumps(header) + "\n")
        answers.flush()
        for line in sys.stdin:
            folder = line.rstrip("\n")
            answers.write(json.dumps({"folder": folder, **_answer(stop_set, folder, args.scan)}))
            answers.write("\n")
            answers.flush()
    else:
        sets = {folder: _answer(stop_set, folder, args.scan) for folder in args.folders}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({**header, "sets": sets}, f, indent=1)
    # The answer is written: tearing down torch and the runtime's modules at exit only costs
    # time (0.3-0.5 s measured).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _answer(stop_set: Callable[[str, int], list[int]], folder: str, scan: int) -> dict[str, object]:
    """``{"ids": [...]}`` for ``folder``, or ``{"error": ...}`` when the runtime refuses it
    (a Disagrees is the runner's failure, raised)."""
    # The first folder's stop_set imports the runtime (thousands of modules): Python's cyclic
    # collector, run again and again over their growing heap, was a third of vLLM's and
    # SGLang's import time. It is off until then, and what the imports made is frozen out
    # of later collections; nothing the runtime computes depends on when cycles are freed.
    first = not _IMPORTED
    if first:
        gc.disable()
    try:
        return {"ids": stop_set(folder, scan)}
    except Disagrees:
        raise
    except Exception as exc:  # noqa: BLE001 - the runtime's refusal is the result
        traceback.print_exc(file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if first:
            _IMPORTED.append(True)
            gc.freeze()
            gc.enable()


_IMPORTED: list[bool] = []  # whether a folder was asked (the runtime imported) in this process
