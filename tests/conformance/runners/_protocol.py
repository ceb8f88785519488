"""The protocol every runner speaks: folders in, one JSON document out.

A runner is a script run by the Python of the runtime's own virtualenv (it imports neither
eosfix nor the tests): ``python RUNNER --out FILE [--scan N] FOLDER...``. For each folder it asks
the runtime's own code for the set of token ids generation stops on, and confirms every id below
``--scan`` (and every id of the set) with the runtime's own per-token stop check, so the set is
what the runtime's loop does, not only what its fields hold. It writes
``{"runtime", "version", "details", "sets": {folder: {"ids": [...]} or {"error": "Type: msg"}}}``.
A folder the runtime refuses is an ``error`` for that folder, never the runner's failure.
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
    parser.add_argument("--out", required=True)
    parser.add_argument("--scan", type=int, default=256)
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    sets: dict[str, dict[str, object]] = {}
    # The first folder's stop_set imports the runtime (thousands of modules): Python's cyclic
    # collector, run again and again over their growing heap, was a third of vLLM's and
    # SGLang's import time. It is off until then, and what the imports made is frozen out
    # of later collections; nothing the runtime computes depends on when cycles are freed.
    gc.disable()
    for folder in args.folders:
        try:
            sets[folder] = {"ids": stop_set(folder, args.scan)}
        except Disagrees:
            raise
        except Exception as exc:  # noqa: BLE001 - the runtime's refusal is the result
            traceback.print_exc(file=sys.stderr)
            sets[folder] = {"error": f"{type(exc).__name__}: {exc}"}
        if not gc.isenabled():
            gc.freeze()
            gc.enable()
    document = {"runtime": runtime, "version": version, "details": details, "sets": sets}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
    # The answer is written: tearing down torch and the runtime's modules at exit only costs
    # time (0.3-0.5 s measured).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
