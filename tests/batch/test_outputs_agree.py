"""What `eosfix cache` and `eosfix hub` say about each repo agrees with `eosfix check` on the
same files, in every format, with one vocabulary.

The samples are put on the stand-in Hub as one organisation and into a Hugging Face cache;
each output is compared with `eosfix check --format json` of the sample folder.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.conftest import SAMPLES, sample_names
from tests.support.cachebuilder import CacheBuilder, chatml_files, git_sha1
from tests.support.hubrepos import sample_files

SAMPLES_ON_HUB = [n for n in sample_names() if (SAMPLES / n / "tokenizer_config.json").exists()]


def check_entry(run_eosfix, name: str) -> dict:
    result = run_eosfix("check", SAMPLES / name, "--format", "json")
    (entry,) = json.loads(result.stdout)["repos"]
    return entry


@pytest.fixture
def sample_org(fake_hub):
    for name in SAMPLES_ON_HUB:
        fake_hub.add_repo(f"samples/{name}", sample_files(name))
    return fake_hub


def test_every_format_says_what_check_says_is_wrong(sample_org, run_eosfix):
    """Runs on (a runtime misses a terminator), stops early (a runtime stops at an id that
    cuts a reply), both, never fires: the words of the tables, the CSV's and the JSON's
    ``problem`` and the runtimes named are those of `eosfix check` on the same files. A repo
    whose list holds ids that cut replies is never called "won't stop"."""
    hub = json.loads(run_eosfix("hub", "--author", "samples", "--format", "json").stdout)
    rows = {
        r["repo_id"]: r
        for r in csv.DictReader(
            io.StringIO(run_eosfix("hub", "--author", "samples", "--format", "csv").stdout)
        )
    }
    report = run_eosfix("hub", "--author", "samples", "--format", "markdown").stdout
    markdown = report.split("\n\n", 1)[0]  # the table (the report's sections follow)
    table = run_eosfix("hub", "--author", "samples").stdout
    words = {
        "runs_on": "runs on",
        "stops_early": "stops early",
        "runs_on_and_stops_early": "runs on and stops early",
        "never_fires": "lists ids that never fire",
        "needs_stop_string": "needs a stop string",
    }
    seen = set()
    for entry in hub["repos"]:
        name = entry["repo_id"].split("/")[1]
        mine = check_entry(run_eosfix, name)
        runs_on = [r["runtime"] for r in mine["runtimes"] if r["applicable"] and any(
            v is False for v in r["stops_before"].values())]  # fmt: skip
        early = [r["runtime"] for r in mine["runtimes"] if r["applicable"] and r[
            "stops_early_before"]]  # fmt: skip
        for got in (entry, mine):
            assert got["runs_on"] == runs_on, name
            assert got["stops_early"] == early, name
        assert entry["verdict"] == mine["verdict"], name
        assert entry["problem"] == mine["problem"], name
        row = rows[entry["repo_id"]]
        assert (row["verdict"], row["problem"]) == (mine["verdict"], mine["problem"] or "")
        assert row["runs_on"] == "; ".join(runs_on)
        assert row["stops_early"] == "; ".join(early)
        if mine["problem"] is None:
            continue
        seen.add(mine["problem"])
        said = words[mine["problem"]]
        then = " -> [" if mine["proposed_eos_token_id"] is not None else " |"  # the ids to write
        (md_line,) = [ln for ln in markdown.splitlines() if f"`{entry['repo_id']}`" in ln]
        assert f"| {said}{then}" in md_line, md_line
        (text_line,) = [ln for ln in table.splitlines() if entry["repo_id"] in ln]
        assert f"│ {said}" in text_line, text_line
        if runs_on and not early:
            assert mine["problem"] == "runs_on"
        if early and not runs_on:
            assert mine["problem"] == "stops_early"
    # the samples hold each kind: a missing terminator, ids cutting replies, ids that are no token
    assert {"runs_on", "stops_early", "runs_on_and_stops_early", "never_fires"} <= seen
    assert "won't stop" not in table + report
    # <|end|> cuts replies everywhere it is read; TGI-transformers and ExLlamaV2 (one id:
    # the tokenizer's eos_token / the first id) also run on past <|call|>: both at once
    assert by_name(hub)["stop-inside-turn"]["problem"] == "runs_on_and_stops_early"
    assert by_name(hub)["ordinary-stop-id"]["problem"] == "stops_early"
    assert by_name(hub)["foreign-stop-ids"]["problem"] == "never_fires"
    assert by_name(hub)["chatml-missing-im-end"]["problem"] == "runs_on"
    # no stop id can end a turn that ends with plain text: every format says it needs one
    assert by_name(hub)["plain-text-turns"]["problem"] == "needs_stop_string"


def by_name(payload: dict) -> dict[str, dict]:
    return {e["repo_id"].split("/")[1]: e for e in payload["repos"]}


def test_one_verdict_vocabulary_for_check_cache_and_hub(sample_org, run_eosfix, tmp_path):
    """The same warnings-only repo is ``warned`` in check's, cache's and hub's JSON (check
    said "ok" while the batches said "warned")."""
    warned = "plain-text-turns"
    assert check_entry(run_eosfix, warned)["verdict"] == "warned"
    hub = by_name(json.loads(run_eosfix("hub", "--author", "samples", "--format", "json").stdout))
    b = CacheBuilder(tmp_path / "cache")
    for name in SAMPLES_ON_HUB:
        b.add_revision(f"samples/{name}", sample_files(name))
    cache = run_eosfix("cache", "--cache-dir", b.root, "--format", "json").stdout
    cached = {e["repo_id"].split("/")[1]: e for e in json.loads(cache)["repos"]}
    for name in SAMPLES_ON_HUB:
        verdict = check_entry(run_eosfix, name)["verdict"]
        assert hub[name]["verdict"] == cached[name]["verdict"] == verdict, name
    assert hub[warned]["verdict"] == "warned"


def test_a_one_id_list_is_shown_as_a_list(fake_hub, run_eosfix):
    """``"eos_token_id": [1002]`` is a list in every table (never printed as 1002), and a
    proposal is always the list that will be written."""
    files = chatml_files(1000)
    files["generation_config.json"] = '{\n  "eos_token_id": [1000]\n}\n'
    fake_hub.add_repo("org/one", files)
    fake_hub.add_repo("org/int", chatml_files(2000))  # "eos_token_id": 2000
    table = run_eosfix("hub", "--author", "org").stdout
    (one,) = [ln for ln in table.splitlines() if "org/one" in ln]
    assert "│ [1000] " in one
    assert "-> [1000, 1002]" in one
    (plain,) = [ln for ln in table.splitlines() if "org/int" in ln]
    assert "│ 2000 " in plain
    rows = list(csv.DictReader(io.StringIO(run_eosfix("hub", "--author", "org", "--format",
                                                      "csv").stdout)))  # fmt: skip
    assert [r["eos_token_id"] for r in rows] == ["2000", "[1000]"]  # org/int, org/one
    assert "| [1000] |" in run_eosfix("hub", "--author", "org", "--format", "markdown").stdout


def test_every_snapshot_and_every_corrupted_repo_has_a_row_in_every_format(tmp_path, run_eosfix):
    """Two revisions of a repo are two rows told apart by their revision (markdown had no
    revision column), and a corrupted repo has a row in CSV and markdown too (it was only on
    stderr), as in the text output and the JSON's ``corrupted``."""
    b = CacheBuilder(tmp_path / "hub")
    main = b.add_revision("org/qwen", chatml_files(1000))
    pr = b.add_revision("org/qwen", chatml_files(1000, readme="v2\n"), refs=["refs/pr/1"])
    broken = chatml_files(5000)
    b.add_revision("org/broken", broken)
    (b.repo_dir("org/broken") / "blobs" / git_sha1(broken["README.md"].encode())).unlink()
    args = ("cache", "--cache-dir", b.root, "--format")
    rows = list(csv.DictReader(io.StringIO(run_eosfix(*args, "csv").stdout)))
    assert [(r["repo_id"], r["commit"], r["verdict"]) for r in rows] == [
        ("org/qwen", main, "fixable"),
        ("org/qwen", pr, "fixable"),
        ("org/broken", "", "error"),
    ]
    assert "Blob missing" in rows[2]["error"]
    lines = run_eosfix(*args, "markdown").stdout.splitlines()
    body = [ln for ln in lines[2:] if ln.startswith("| ")]
    assert [ln.split(" | ")[:2] for ln in body] == [
        ["| `org/qwen`", f"{main[:8]} (main)"],
        ["| `org/qwen`", f"{pr[:8]} (refs/pr/1)"],
        ["| `org/broken`", "-"],
    ]
    assert "error: " in body[2]
    payload = json.loads(run_eosfix(*args, "json").stdout)
    assert [c["repo_id"] for c in payload["corrupted"]] == ["org/broken"]
    assert len(payload["repos"]) == 2


def _json_values(rnd, depth: int = 0):
    """A random JSON-able value of every kind json.dumps takes: escapes, line separators,
    huge and negative ints, IntEnum, str enums, NaN and the infinities, tuples, empty
    containers, and keys json turns into strings (ints, floats, bools, None)."""
    import enum

    class Code(enum.IntEnum):
        EOS = 3

    class Kind(str, enum.Enum):
        TURN = "turn_end"

    leaves = ["a", 'é\n"\\', "<|im_end|>", "\u2028", "", 0, -5, 2**70, 1.5, -0.0, 1e-7,
              float("nan"), float("inf"), float("-inf"), True, False, None, Code.EOS, Kind.TURN]  # fmt: skip
    keys = ["k", "é", 'a"b', "", 1, 2.5, True, False, None, float("nan"), Code.EOS]
    pick = rnd.random()
    if depth > 3 or pick < 0.5:
        return rnd.choice(leaves)
    n = rnd.randint(0, 4)
    if pick < 0.65:
        return [_json_values(rnd, depth + 1) for _ in range(n)]
    if pick < 0.75:
        return tuple(_json_values(rnd, depth + 1) for _ in range(n))
    return {rnd.choice(keys): _json_values(rnd, depth + 1) for _ in range(n)}


def test_the_json_writer_writes_what_json_dumps_writes():
    """The streamed report encodes each entry itself (json.dumps with an indent runs its
    pure-Python generators): the text must be json.dumps(indent=2, ensure_ascii=False)'s,
    byte for byte, at every nesting, and refuse what json refuses with json's error."""
    import random

    from eosfix.render.batch import _dumps

    rnd = random.Random(20261202)
    for _ in range(5000):
        value = _json_values(rnd)
        for indent in ("", "    "):
            expected = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)
            assert _dumps(value, indent) == expected, value
    for bad in ({(1, 2): 3}, {"a": object()}, [{1j: 0}]):
        with pytest.raises(TypeError) as ours:
            _dumps(bad, "")
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad, indent=2)
        assert str(ours.value) == str(theirs.value)
