"""Print the conformance matrix as a Markdown table: ``python -m tests.conformance.table``.

For each runtime and shape, in each state (before ``fix``, after ``fix``, after
``fix --config-json``): the stop set the runtime computed, and whether eosfix predicted exactly
that set. transformers, mlx-lm and mlx-vlm are asked in this process; vLLM, SGLang and
ExLlamaV2 in their virtualenvs (``python -m tests.conformance.venvs create`` first; a runtime
without one is left out); TGI's two paths, which cannot run here, are the sets their cited
source gives (cited.py), marked "(cited)". The tests in test_stop_sets.py,
test_external_runtimes.py and test_cited_runtimes.py assert the same; this prints it for people
(docs/runtimes.md holds a dated copy).
"""

from __future__ import annotations

import datetime
import re
import sys
import tempfile
from pathlib import Path

from tests.conformance import external
from tests.conformance.cited import CITED, Fails
from tests.conformance.harness import PROBES, STATES, Prediction, build_matrix
from tests.conformance.shapes import IM_END, SHAPES, SPECIAL, write_models

_TOKEN = re.compile(r"<\|[^<>\s]*\|>")


def _md(text: str) -> str:
    """``<|im_end|>`` as ``<\\|im_end\\|>``: a bare ``|`` would end a table cell."""
    return _TOKEN.sub(lambda m: m.group(0).replace("|", "\\|"), text)


def _cell(actual: frozenset[int] | str | Fails, predicted: Prediction) -> str:
    """A set, or what the runtime raised; where eosfix says the runtime cannot load the
    folder, ``=`` when that is what happened (a cited failure must name the file eosfix names)."""
    if isinstance(actual, Fails):
        agree = "=" if actual.file in predicted.refused else f"!= eosfix {sorted(predicted.ids)}"
        return f"cannot load ({actual.file}) {agree}"
    if isinstance(actual, str):
        said = "cannot load =" if predicted.refused else str(sorted(predicted.ids))
        return f"raises {actual.split(':')[0]}; eosfix {said}"
    verdict = "stops" if SPECIAL[IM_END] in actual else "misses"
    agree = "=" if actual == predicted.ids else f"!= eosfix {sorted(predicted.ids)}"
    return f"{sorted(actual)} {verdict} {agree}"


def _in_process(runtime: str, folder: Path) -> frozenset[int] | str:
    try:
        return PROBES[runtime](folder)
    except Exception as exc:  # noqa: BLE001 - the runtime's own failure is the result
        return f"{type(exc).__name__}: {exc}"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        matrix = build_matrix(root / "matrix", write_models(root / "models"))
        answers: dict[str, dict[Path, frozenset[int] | str]] = {}
        versions: dict[str, str] = {}
        for runtime in external.EXTERNAL:
            try:
                answer = external.ask(runtime, matrix.folders.values())
            except LookupError as exc:
                print(f"<!-- {runtime} left out: {exc} -->")
                continue
            answers[runtime], versions[runtime] = answer.sets, answer.version
        print(f"Run {datetime.date.today().isoformat()}; ids: <|endoftext|> 0, <|im_start|> 1, "
              f"<|im_end|> {SPECIAL[IM_END]} (the turn end); 'stops': the set holds it.\n")  # fmt: skip
        print("| runtime | shape | " + " | ".join(STATES) + " |")
        print("|---|---|" + "---|" * len(STATES))
        for runtime in [*PROBES, *answers, *CITED]:
            for shape in SHAPES:
                cells = []
                for i, state in enumerate(STATES):
                    folder = matrix.folders[shape.name, state]
                    predicted = matrix.predicted[shape.name, state][runtime]
                    actual: frozenset[int] | str | Fails
                    if runtime in PROBES:
                        actual = _in_process(runtime, folder)
                    elif runtime in CITED:
                        actual = CITED[runtime][shape.name][i]
                    else:
                        actual = answers[runtime][folder]
                    cells.append(_cell(actual, predicted))
                what = _md(f"{shape.name}: {shape.what}")
                label = f"{runtime} (cited)" if runtime in CITED else runtime
                print(f"| {label} | {what} | " + " | ".join(map(_md, cells)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
