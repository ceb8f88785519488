"""Print the conformance matrix as a Markdown table: ``python -m tests.conformance.table``.

For each runtime and shape, in each state (before ``fix``, after ``fix``, after
``fix --config-json``): the stop set the runtime computed, and whether eosfix predicted exactly
that set. The tests in test_stop_sets.py assert the same; this prints it for people.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.conformance.harness import PROBES, STATES, predict
from tests.conformance.shapes import IM_END, SHAPES, SPECIAL, build, write_models


def _cell(runtime: str, folder: Path, state: str) -> str:
    predicted = predict(folder, runtime, state)
    try:
        actual = PROBES[runtime](folder)
    except Exception as exc:  # noqa: BLE001 - the runtime's own failure is the result
        return f"raises {type(exc).__name__}; eosfix {sorted(predicted.ids)}"
    verdict = "stops" if SPECIAL[IM_END] in actual else "misses"
    agree = "=" if actual == predicted.ids else f"!= eosfix {sorted(predicted.ids)}"
    return f"{sorted(actual)} {verdict} {agree}"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = write_models(root / "models")
        print("| runtime | shape | " + " | ".join(STATES) + " |")
        print("|---|---|" + "---|" * len(STATES))
        for runtime in PROBES:
            for shape in SHAPES:
                cells = [
                    _cell(runtime, build(shape, root / runtime / state / shape.name, models), state)
                    for state in STATES
                ]
                print(f"| {runtime} | {shape.name}: {shape.what} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
