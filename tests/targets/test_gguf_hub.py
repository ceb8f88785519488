"""A GGUF repo on the Hub checked by its files' headers (eosfix.targets.gguf_hub), against the
stand-in Hub's GGUF publisher (tests/support/hubserver.py add_gguf_org): every quantisation read by
ranges, a differing one named, ``ollama run hf.co/...``'s params, one line per broken file;
``eosfix check`` with each spelling of a Hub GGUF."""

from __future__ import annotations

import json

import pytest

from eosfix.containers.gguf.read import KnownFields, read_header
from eosfix.render.pr import pr_description
from eosfix.sources.hub.read import HubEntry, HubReader
from eosfix.sources.hub.write import PrOutcome
from eosfix.targets.gguf_hub import check_gguf_repo, read_files
from eosfix.targets.hub import check_hub_target
from eosfix.targets.parse import parse_hub
from eosfix.targets.session import HubSession
from tests.support import ggufs
from tests.support.hubserver import GGUF_ORG, add_gguf_repo
from tests.support.schemas import CHECK, valid

CHAT = f"{GGUF_ORG}/Chat-7B-GGUF"
REASONER = f"{GGUF_ORG}/Reasoner-GGUF"
SPLIT = f"{GGUF_ORG}/Chat-70B-GGUF"
BROKEN = f"{GGUF_ORG}/Broken-GGUF"


def _entry(repo_id: str) -> HubEntry:
    return HubReader().resolve(HubEntry(repo_id))


def _by_file(results):
    return {r.gguf.file: r for r in results}


def test_every_quant_read_and_the_older_one_named(gguf_org):
    checked = check_gguf_repo(HubReader(), _entry(CHAT))
    assert next(f.path for f in checked.files) == "Chat-7B-Q4_K_M.gguf"  # llama.cpp's default
    assert len(checked.files) == 6
    main, older = checked.results
    assert main.gguf.file == "Chat-7B-Q4_K_M.gguf"
    assert sorted(main.gguf.alike) == [
        "Chat-7B-Q3_K_M.gguf", "Chat-7B-Q5_K_M.gguf", "Chat-7B-Q6_K.gguf", "Chat-7B-Q8_0.gguf",
    ]  # fmt: skip
    assert main.gguf.default_for == ("llama.cpp", "ollama")
    assert main.status.value == "ok"
    assert older.gguf.file == "Chat-7B-Q2_K.gguf"
    assert older.gguf.differs_from == "Chat-7B-Q4_K_M.gguf"
    assert older.gguf.differs_in == ("tokenizer.ggml.eot_token_id",)
    assert older.status.value == "fixable"
    assert [f.code for f in older.check.findings] == ["EOS201"]
    # each file: a redirect to the CDN and one range (sized from the first file), its bytes
    for f in checked.files:
        assert f.requests <= 3, f
        assert f.size == 4 * 10**9
    for f in checked.files[1:]:
        assert f.requests == 2
        assert f.bytes_read <= checked.files[0].header.kv_end + 4096
    assert all(r.headers.get("authorization") is None for r in gguf_org.cdn_requests)


def test_per_file_requests_and_bytes_are_in_the_json(gguf_org, run_eosfix):
    result = run_eosfix("check", "--format", "json", CHAT)
    assert result.exit_code == 1
    entries = json.loads(result.stdout)["repos"]
    assert [e["name"] for e in entries] == [
        f"{CHAT}/Chat-7B-Q4_K_M.gguf",
        f"{CHAT}/Chat-7B-Q2_K.gguf",
    ]
    files = [f for e in entries for f in e["files"]]
    assert len(files) == 6
    for f in files:
        assert set(f) >= {"path", "quant", "size", "requests", "bytes_read", "metadata_bytes"}
        assert f["metadata_bytes"] <= f["bytes_read"]
    assert entries[0]["ollama"]["params_from"] == "conversion"
    assert "6 GGUF files read by their headers" in result.stderr
    valid(CHECK, json.loads(result.stdout))  # what docs/schema/check.schema.json says


def test_a_params_file_that_cuts_replies_and_the_one_a_pull_request_writes(gguf_org):
    (result,) = check_gguf_repo(HubReader(), _entry(REASONER)).results
    ollama = result.ollama_hub
    assert ollama.params.from_file
    assert ollama.params.stop == ("<|think_end|>",)
    row = next(r for r in result.runtimes.rows if r.runtime == "ollama hf.co")
    assert row.stops_before == {"<|turn_end|>": False}
    assert row.early_before == {"<|think_end|>": 98}
    assert row.ok_after
    planned = ollama.plan
    assert (planned.after, planned.removed, planned.added) == (
        ("<|turn_end|>",), ("<|think_end|>",), ("<|turn_end|>",),
    )  # fmt: skip
    assert ollama.control == ()  # user-defined tokens: every ollama sees their text
    assert planned.new == '{\n  "stop": ["<|turn_end|>"],\n  "temperature": 0.6\n}\n'
    assert json.loads(planned.old)["temperature"] == 0.6


@pytest.mark.parametrize("fake_hub", [{"token": "hf_gguf_test"}], indirect=True)
def test_the_params_pull_request_keeps_every_other_key_and_is_never_doubled(gguf_org):
    """A GGUF repo's pull request writes the repo's params file (no other file: the header
    cannot be changed that way), through the machinery of a generation_config.json fix: one
    pull request, updated when the repo's params change, reported unchanged otherwise."""
    session = HubSession(token="hf_gguf_test", describe=pr_description)

    def params_pr():
        (result,) = check_hub_target(parse_hub(f"hf.co/{REASONER}:Q8_0")).results
        pr = session.open_pr(result)
        assert pr is not None
        assert pr.url == f"{gguf_org.url}/{REASONER}/discussions/1"  # one pull request, ever
        return pr.outcome

    assert params_pr() is PrOutcome.OPENED
    (commit,) = gguf_org.commits_received
    assert commit["create_pr"]
    assert list(commit["files"]) == ["params"]
    written = json.loads(commit["files"]["params"])
    assert written == {"stop": ["<|turn_end|>"], "temperature": 0.6}
    body = commit["description"]
    assert "`<|think_end|>`" in body
    assert "`<|turn_end|>`" in body
    assert "ollama show --parameters hf.co/my-gguf-org/Reasoner-GGUF:Q8_0" in body
    assert "--override-kv tokenizer.ggml.eot_token_id=int:99" in body  # the header: not by PR
    assert params_pr() is PrOutcome.UNCHANGED
    tuned = b'{\n  "stop": ["<|think_end|>"],\n  "temperature": 0.6,\n  "top_k": 20\n}\n'
    gguf_org.push(REASONER, {"params": tuned}, message="tune sampling")
    assert params_pr() is PrOutcome.UPDATED
    updated = json.loads(gguf_org.commits_received[-1]["files"]["params"])
    assert updated == {"stop": ["<|turn_end|>"], "temperature": 0.6, "top_k": 20}
    assert [c["create_pr"] for c in gguf_org.commits_received] == [True, False]


def test_a_gguf_repo_whose_params_need_no_change_gets_no_pull_request(gguf_org):
    """ollama's stop list is right for every quant; the older quant's header is wrong, and a
    header is no pull request's to change."""
    session = HubSession(describe=pr_description)
    results = check_hub_target(parse_hub(CHAT)).results
    assert [r.status.value for r in results] == ["ok", "fixable"]
    assert all(session.open_pr(r) is None for r in results)
    assert not gguf_org.commits_received


def test_a_split_is_read_from_its_first_shard(gguf_org):
    checked = check_gguf_repo(HubReader(), _entry(SPLIT))
    assert [f.path for f in checked.files] == [
        "Chat-70B-Q4_K_M-00001-of-00003.gguf",
        "Chat-70B-Q8_0.gguf",
    ]
    assert checked.files[0].shards == tuple(
        f"Chat-70B-Q4_K_M-0000{n}-of-00003.gguf" for n in (1, 2, 3)
    )
    downloads = gguf_org.downloads(SPLIT)
    assert not any("-00002-of" in d or "-00003-of" in d for d in downloads)
    (result,) = checked.results
    assert result.status.value == "ok"


def test_a_split_with_a_shard_missing_is_refused(gguf_org):
    gguf_org.push(SPLIT, delete=["Chat-70B-Q4_K_M-00003-of-00003.gguf"])
    checked = check_gguf_repo(HubReader(), _entry(SPLIT))
    errors = [r for r in checked.results if r.error is not None]
    assert len(errors) == 1
    text = str(errors[0].error)
    assert text.startswith(f"{SPLIT}/Chat-70B-Q4_K_M-00001-of-00003.gguf: shard 1 of 3")
    assert "Chat-70B-Q4_K_M-00003-of-00003.gguf" in text


def test_broken_files_are_one_line_each_and_the_rest_goes_on(gguf_org, run_eosfix):
    result = run_eosfix("check", BROKEN)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert lines == [
        (
            f"error: {BROKEN}/Broken-Q4_K_M.gguf: truncated GGUF header: tokenizer.ggml.tokens "
            "item needs 8 bytes at offset 1004, the file has 4 left"
        ),
        (
            f"error: {BROKEN}/Broken-Q8_0.gguf: tokenizer.ggml.tokens: array claims "
            "1099511627776 items, more than the 134217570 bytes left hold"
        ),
    ]
    assert result.stdout == "2 GGUF files could not be checked\n"
    assert "Traceback" not in result.stdout + result.stderr
    # the hostile header cost no read past the first
    hostile = [r for r in gguf_org.cdn_requests if r.path.endswith("Broken-Q8_0.gguf")]
    assert [r.headers["range"] for r in hostile] == ["bytes=0-1048575"]
    broken = json.loads(run_eosfix("check", "--format", "json", BROKEN).stdout)
    valid(CHECK, broken)  # an unreadable file's entry: its error and what reading it cost
    assert [e["files"][0]["path"] for e in broken["repos"]] == [
        "Broken-Q4_K_M.gguf", "Broken-Q8_0.gguf",
    ]  # fmt: skip


def test_a_tag_picks_one_file_as_ollama_does(gguf_org, run_eosfix):
    for given in (f"hf.co/{CHAT}:q2_k", f"https://huggingface.co/{CHAT}:Q2_K",
                  f"{CHAT}/Chat-7B-Q2_K.gguf", f"hf://{CHAT}/Chat-7B-Q2_K.gguf"):  # fmt: skip
        checked = check_hub_target(parse_hub(given))
        assert [r.gguf.file for r in checked.results] == ["Chat-7B-Q2_K.gguf"], given
        assert checked.summary.startswith(f"{CHAT}: 1 GGUF file read by its header: ")
    result = run_eosfix("check", f"hf.co/{CHAT}:Q6_K_XL")
    assert result.exit_code == 2
    assert f"error: hf.co/{CHAT}:Q6_K_XL: no GGUF file for the tag 'Q6_K_XL'" in result.stderr


def test_a_repo_with_a_tokenizer_and_gguf_files_is_checked_as_a_folder(gguf_org, fake_hub):
    from tests.support.cachebuilder import chatml_files

    fake_hub.add_repo("org/mixed", {**chatml_files(1000), "model-Q4_K_M.gguf": b"GGUF"})
    checked = check_hub_target(parse_hub("org/mixed"))
    (result,) = checked.results
    assert result.container == "folder"
    assert "eosfix check org/mixed/model-Q4_K_M.gguf reads its header" in checked.note
    # the spelling decides nothing: hf.co/ is the same repo, read the same way
    spelled = check_hub_target(parse_hub("https://hf.co/org/mixed"))
    assert spelled.results[0].container == "folder"
    assert spelled.note == checked.note
    named = check_hub_target(parse_hub("org/mixed/model-Q4_K_M.gguf"))  # one file named
    assert named.results[0].container == "gguf"


def test_a_twenty_quant_repo_reads_each_file_once_after_the_first(fake_hub, tmp_path):
    """Twenty quantisations of one model: the first in at most three reads, each other in
    one, every read inside its file's metadata (tensor infos and data never reached)."""
    files = {}
    for n in range(20):
        path = ggufs.harmony(
            tmp_path / f"M-Q{n}_K.gguf", {"eos": "<|return|>"}, kv={"general.file_type": n},
            tensor=bytes(64),
        )  # fmt: skip
        files[path.name] = path.read_bytes()
    add_gguf_repo(fake_hub, "org/twenty", files, sizes=dict.fromkeys(files, 10**10))
    known = KnownFields()
    entry = _entry("org/twenty")
    reads = read_files(HubReader(), entry, sorted(files), known=known)
    assert reads[0].requests <= 3
    assert all(f.requests == 1 for f in reads[1:])
    for f in reads:
        local = read_header(tmp_path / f.path)
        assert {k: v.value for k, v in f.header.fields.items()} == {
            k: v.value for k, v in local.fields.items()
        }
    checked = check_gguf_repo(HubReader(), entry, known=known)
    (result,) = checked.results
    assert len(result.gguf.alike) == 19
