"""The runners' protocol (runners/_protocol.py), run by this Python with a stand-in runtime: the
same answers whether every folder is handed over at once (``--out``) or asked one at a time
(``--serve``), and what the runtime prints never mixed into the answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conformance.external import RUNNERS

# A runtime that prints on standard output as vLLM's logger does, refuses one folder and stops
# on the ids a folder's stop.json lists.
STAND_IN = f"""
import json, sys
sys.path.insert(0, {str(RUNNERS)!r})
from _protocol import confirm, main

def stop_set(folder, scan):
    print("INFO loading", folder)
    ids = json.load(open(folder + "/stop.json"))
    return confirm(ids, lambda i: i in ids, scan)

main("Stand-in", "1.0", {{"lib": "2.0"}}, stop_set)
"""


def _folders(tmp_path: Path) -> list[Path]:
    folders = []
    for name, content in (("a", "[2, 7]"), ("refused", "not json"), ("b", "[0]")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "stop.json").write_text(content)
        folders.append(folder)
    return folders


def test_serve_answers_each_folder_as_out_answers_them_all(tmp_path):
    runner = tmp_path / "stand_in.py"
    runner.write_text(STAND_IN)
    folders = _folders(tmp_path)
    out = tmp_path / "sets.json"
    subprocess.run(
        [sys.executable, str(runner), "--out", str(out), "--scan", "8", *map(str, folders)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    whole = json.loads(out.read_text())

    served = subprocess.run(
        [sys.executable, str(runner), "--serve", "--scan", "8"],
        input="".join(f"{f}\n" for f in folders), capture_output=True, text=True, check=True,
    )  # fmt: skip
    header, *lines = (json.loads(line) for line in served.stdout.splitlines())
    assert header == {k: whole[k] for k in ("runtime", "version", "details")}
    assert [line.pop("folder") for line in lines] == [str(f) for f in folders]
    assert lines == [whole["sets"][str(f)] for f in folders]
    assert lines[0] == {"ids": [2, 7]}
    assert "error" in lines[1]
    assert "INFO loading" in served.stderr  # the runtime's own output, not an answer


def test_a_disagreement_ends_the_served_runner(tmp_path):
    runner = tmp_path / "disagrees.py"
    runner.write_text(STAND_IN.replace("lambda i: i in ids", "lambda i: i == 0"))
    (folder,) = [f for f in _folders(tmp_path) if f.name == "a"]
    served = subprocess.run(
        [sys.executable, str(runner), "--serve", "--scan", "8"],
        input=f"{folder}\n", capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert served.returncode != 0
    assert len(served.stdout.splitlines()) == 1  # the header, and no answer for the folder
    assert "Disagrees" in served.stderr
