"""`eosfix cache`: batch check and fix of a Hugging Face cache with the real layout."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.file_download import _CACHED_NO_EXIST

from eosfix.batch import pool, verdict
from eosfix.batch import run as batchrun
from eosfix.batch.cache import CacheRun
from eosfix.cli import cli
from eosfix.render.batch import JSON_DETAIL, write_json
from eosfix.sources import cache as cachelib
from tests.conftest import ROOT
from tests.support.cachebuilder import (
    CacheBuilder,
    base_model_files,
    chatml_files,
    git_sha1,
    hash_blobs,
)

GEN = "generation_config.json"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["cache", *args], env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def run_json(*args: str) -> tuple[int, dict]:
    code, out, _ = run(*args, "--format", "json")
    return code, json.loads(out)


def eos_of(path: Path) -> object:
    return json.loads(path.read_text())["eos_token_id"]


@pytest.fixture
def hub_cache(tmp_path: Path) -> tuple[CacheBuilder, dict[str, str]]:
    """org/qwen: main (needs a fix) + refs/pr/1 (same generation_config blob, other README);
    org/nogen: no generation_config.json, with a .no_exist marker; org/good; org/base."""
    b = CacheBuilder(tmp_path / "hub")
    shas = {
        "qwen_main": b.add_revision("org/qwen", chatml_files(1000)),
        "qwen_pr": b.add_revision(
            "org/qwen", chatml_files(1000, readme="v2\n"), refs=["refs/pr/1"]
        ),
        "nogen": b.add_revision(
            "org/nogen",
            chatml_files(2000, generation_config=False, template_file=False),
            no_exist=[GEN],
        ),
        "good": b.add_revision("org/good", chatml_files(3000, healthy=True)),
        "base": b.add_revision("org/base", base_model_files()),
    }
    return b, shas


def _by_name(payload: dict) -> dict[str, dict]:
    return {e["name"]: e for e in payload["repos"]}


# --- check -------------------------------------------------------------------------------------


def test_check_json_shape_and_exit_code(hub_cache):
    b, shas = hub_cache
    code, payload = run_json("--cache-dir", str(b.root))
    assert code == 1
    assert payload["cache_dir"] == str(b.root.resolve())
    assert payload["exit_code"] == 1
    assert payload["corrupted"] == []
    assert payload["summary"] == {
        "snapshots": 5,
        "analyses": 4,
        "fixed": 0,
        "fixable": 3,
        "problems": 0,
        "warned": 0,
        "ok": 1,
        "no_template": 1,
        "not_a_model": 0,
        "error": 0,
        "corrupted": 0,
    }
    entries = _by_name(payload)
    main = entries[f"org/qwen@{shas['qwen_main'][:8]}"]
    assert main["repo_id"] == "org/qwen"
    assert main["revision"] == shas["qwen_main"]
    assert main["refs"] == ["main"]
    assert main["path"] == str(b.snapshot("org/qwen", shas["qwen_main"]).resolve())
    assert main["verdict"] == main["status"] == "fixable"
    assert main["eos_token_id"] == 1000
    assert main["proposed_eos_token_id"] == [1000, 1002]
    assert [t["content"] for t in main["terminators"]] == ["<|im_end|>"]
    assert main["findings"][0]["code"] == "EOS001"
    assert main["written"] == []
    pr = entries[f"org/qwen@{shas['qwen_pr'][:8]}"]
    assert pr["refs"] == ["refs/pr/1"]
    assert pr["verdict"] == "fixable"
    assert entries[f"org/nogen@{shas['nogen'][:8]}"]["findings"][0]["code"] == "EOS002"
    assert entries[f"org/good@{shas['good'][:8]}"]["verdict"] == "ok"
    assert entries[f"org/base@{shas['base'][:8]}"]["verdict"] == "no_template"


def test_check_text_table_and_no_progress_when_piped(hub_cache):
    b, shas = hub_cache
    code, out, err = run("--cache-dir", str(b.root))
    assert code == 1
    assert err == ""  # no progress bar: not a terminal
    line = next(x for x in out.splitlines() if shas["qwen_pr"][:8] in x)
    assert "org/qwen" in line
    assert "(refs/pr/1)" in line
    assert "<|im_end|> 1002" in line
    assert "runs on -> [1000, 1002]" in line  # transformers misses <|im_end|>
    assert "2000 (from config.json)" in out
    assert out.rstrip().splitlines()[-1] == (
        "5 snapshots of 4 repos: 3 would be fixed (run with --fix), 1 stops correctly, "
        "1 without a chat template"
    )


def test_check_writes_nothing(hub_cache):
    b, _ = hub_cache
    before = {
        p: (p.is_symlink(), p.read_bytes() if p.is_file() else None)
        for p in sorted(b.root.rglob("*"))
    }
    run("--cache-dir", str(b.root))
    after = {
        p: (p.is_symlink(), p.read_bytes() if p.is_file() else None)
        for p in sorted(b.root.rglob("*"))
    }
    assert before == after


def test_shared_files_are_analyzed_once(hub_cache, monkeypatch):
    b, _ = hub_cache
    seen: list[Path] = []
    real = verdict.analyze_folder

    def counting(path: Path, detail: verdict.Detail) -> verdict.Verdict:
        seen.append(path)
        return real(path, detail)

    monkeypatch.setattr(verdict, "analyze_folder", counting)
    result = CacheRun(cachelib.scan_cache(b.root), keep_rows=True, workers=1).drain()
    assert len(result.results) == 5
    assert len(seen) == result.analyses == 4  # the two org/qwen revisions differ in README only


def test_key_ignores_other_files_and_covers_named_templates(tmp_path):
    b = CacheBuilder(tmp_path)
    files = {
        **chatml_files(10),
        "additional_chat_templates/tool_use.jinja": "{{ x }}",
        "tokenizer.json": '{"added_tokens": []}',
    }
    b.add_revision("o/m", files)
    b.add_revision("o/m", {**files, "README.md": "other"}, refs=["refs/pr/1"])
    b.add_revision(
        "o/m", {**files, "additional_chat_templates/tool_use.jinja": "{{ y }}"}, refs=["refs/pr/2"]
    )
    snaps = cachelib.scan_cache(tmp_path).snapshots
    keys = {s.refs[0]: dict(s.key) for s in snaps}
    assert keys["main"] == keys["refs/pr/1"] != keys["refs/pr/2"]
    assert set(keys["main"]) == {
        "config.json",
        GEN,
        "tokenizer_config.json",
        "chat_template.jinja",
        "tokenizer.json",
        "additional_chat_templates/tool_use.jinja",
    }
    assert keys["main"][GEN] == git_sha1(files[GEN].encode())


def test_many_distinct_analyses_use_worker_processes(tmp_path, monkeypatch):
    b = CacheBuilder(tmp_path)
    for i in range(6):
        b.add_revision(f"o/m{i}", chatml_files(100 * (i + 1), healthy=i % 2 == 0))
    scan = cachelib.scan_cache(tmp_path)
    serial, pooled = io.StringIO(), io.StringIO()
    write_json(CacheRun(scan, workers=1, detail=JSON_DETAIL), serial)
    monkeypatch.setattr(pool, "POOL_MIN", 2)
    run = CacheRun(scan, workers=2, detail=JSON_DETAIL)
    write_json(run, pooled)
    assert pooled.getvalue() == serial.getvalue()
    assert run.counts()["ok"] == 3
    assert run.counts()["fixable"] == 3


# --- fix ---------------------------------------------------------------------------------------


def test_fix_replaces_links_never_blobs(hub_cache):
    b, shas = hub_cache
    blobs = hash_blobs(b.root)
    code, out, _err = run("--cache-dir", str(b.root), "--fix")
    assert code == 1
    assert "3 fixed" in out
    assert "fixed -> [1000, 1002]" in out
    assert hash_blobs(b.root) == blobs  # every blob byte-identical, none added or removed
    for key, repo in (("qwen_main", "org/qwen"), ("qwen_pr", "org/qwen")):
        snap = b.snapshot(repo, shas[key])
        gen = snap / GEN
        assert not gen.is_symlink()
        assert gen.is_file()
        assert eos_of(gen) == [1000, 1002]
        assert (snap / "config.json").is_symlink()  # other files still point into blobs/
        assert not list(snap.glob(".*eosfix-tmp"))
    good = b.snapshot("org/good", shas["good"]) / GEN
    assert good.is_symlink()  # nothing to fix: untouched
    assert not scan_cache_dir(b.root).warnings
    # A second run finds nothing to do.
    assert run("--cache-dir", str(b.root), "--fix")[0] == 0
    code, payload = run_json("--cache-dir", str(b.root))
    assert code == 0
    assert payload["summary"]["ok"] == 4
    assert payload["summary"]["fixable"] == 0


def test_fix_keeps_the_rest_of_the_file(hub_cache):
    b, shas = hub_cache
    gen = b.snapshot("org/qwen", shas["qwen_main"]) / GEN
    old = gen.read_text()
    run("--cache-dir", str(b.root), "--fix")
    new = gen.read_text()
    assert json.loads(new) == {**json.loads(old), "eos_token_id": [1000, 1002]}
    removed = [line for line in old.splitlines() if line not in new.splitlines()]
    assert removed == ['  "eos_token_id": 1000,']  # every other line kept, byte for byte
    assert (gen.stat().st_mode & 0o777) == (gen.resolve().stat().st_mode & 0o777)


def test_revision_main_fixes_only_mains_snapshot(hub_cache):
    b, shas = hub_cache
    pr_gen = b.snapshot("org/qwen", shas["qwen_pr"]) / GEN
    main_gen = b.snapshot("org/qwen", shas["qwen_main"]) / GEN
    shared_blob = pr_gen.resolve()
    assert main_gen.resolve() == shared_blob  # both revisions share one blob
    blobs = hash_blobs(b.root)
    code, payload = run_json(
        "--cache-dir", str(b.root), "--repo", "org/qwen", "--revision", "main", "--fix"
    )
    assert code == 1
    assert [e["refs"] for e in payload["repos"]] == [["main"]]
    assert payload["repos"][0]["verdict"] == "fixed"
    assert payload["repos"][0]["written"] == [GEN]
    assert eos_of(main_gen) == [1000, 1002]
    assert not main_gen.is_symlink()
    assert pr_gen.is_symlink()
    assert pr_gen.resolve() == shared_blob
    assert eos_of(pr_gen) == 1000  # the other revision is its own snapshot: untouched
    assert hash_blobs(b.root) == blobs
    code, payload = run_json("--cache-dir", str(b.root), "--repo", "org/qwen")
    assert {e["refs"][0]: e["verdict"] for e in payload["repos"]} == {
        "main": "ok",
        "refs/pr/1": "fixable",
    }


def test_created_file_drops_no_exist_marker(hub_cache):
    b, shas = hub_cache
    sha = shas["nogen"]
    marker = b.repo_dir("org/nogen") / ".no_exist" / sha / GEN
    assert marker.exists()
    kwargs = {"cache_dir": b.root, "revision": sha}
    assert try_to_load_from_cache("org/nogen", GEN, **kwargs) is _CACHED_NO_EXIST
    run("--cache-dir", str(b.root), "--repo", "org/nogen", "--fix")
    assert not marker.exists()
    found = try_to_load_from_cache("org/nogen", GEN, **kwargs)
    assert found == str(b.snapshot("org/nogen", sha) / GEN)
    assert try_to_load_from_cache("org/nogen", GEN, cache_dir=b.root) == found  # via refs/main
    created = json.loads(Path(found).read_text())
    assert created["eos_token_id"] == [2000, 2002]
    assert created["bos_token_id"] == 2000  # derived from config.json, as transformers would
    assert not scan_cache_dir(b.root).warnings


def test_fix_after_check_is_idempotent_per_revision(hub_cache):
    b, _ = hub_cache
    assert run("--cache-dir", str(b.root), "--revision", "refs/pr/1", "--fix")[0] == 1
    assert run("--cache-dir", str(b.root), "--revision", "refs/pr/1", "--fix")[0] == 0
    # fixed regular files are keyed by content: the two fixed qwen revisions share one analysis
    assert run("--cache-dir", str(b.root), "--fix")[0] == 1
    result = CacheRun(cachelib.scan_cache(b.root), keep_rows=True, workers=1).drain()
    assert result.exit_code == 0
    assert result.analyses == 4


# --- corrupted caches and unreadable repos -----------------------------------------------------


def test_corrupted_repos_are_reported_and_skipped(hub_cache):
    b, _ = hub_cache
    broken = chatml_files(5000)
    b.add_revision("org/broken-link", broken)
    (b.repo_dir("org/broken-link") / "blobs" / git_sha1(broken["README.md"].encode())).unlink()
    b.add_revision("org/lost-snapshot", chatml_files(6000))
    b.set_ref("org/lost-snapshot", "refs/pr/3", "f" * 40)
    code, payload = run_json("--cache-dir", str(b.root), "--fix")
    assert code == 2  # corrupted input, like an unreadable folder for `eosfix check`
    corrupted = {c["repo_id"]: c["error"] for c in payload["corrupted"]}
    assert set(corrupted) == {"org/broken-link", "org/lost-snapshot"}
    assert "Blob missing" in corrupted["org/broken-link"]
    assert "missing commit" in corrupted["org/lost-snapshot"]
    assert payload["summary"]["fixed"] == 3  # the batch went on
    assert "org/broken-link" not in {e["repo_id"] for e in payload["repos"]}
    # nothing was written into the corrupted repos
    for repo in ("org/broken-link", "org/lost-snapshot"):
        for gen in b.repo_dir(repo).glob(f"snapshots/*/{GEN}"):
            assert gen.is_symlink()
    code, out, _ = run("--cache-dir", str(b.root))
    assert "corrupted org/broken-link: Blob missing" in out
    assert out.rstrip().endswith("2 corrupted repos skipped")


def test_unreadable_snapshot_is_an_error_the_batch_continues(tmp_path):
    b = CacheBuilder(tmp_path)
    files = chatml_files(10)
    files["tokenizer_config.json"] = "{not json"
    bad = b.add_revision("o/bad", files)
    b.add_revision("o/bad-copy", files)  # same blobs: one shared analysis
    b.add_revision("o/fine", chatml_files(20))
    code, payload = run_json("--cache-dir", str(tmp_path), "--fix")
    assert code == 2
    entries = {e["repo_id"]: e for e in payload["repos"]}
    assert entries["o/fine"]["verdict"] == "fixed"
    for repo in ("o/bad", "o/bad-copy"):
        assert entries[repo]["verdict"] == "error"
        assert entries[repo]["error"].startswith("tokenizer_config.json: invalid JSON")
    assert payload["summary"]["analyses"] == 2
    code, out, _ = run("--cache-dir", str(tmp_path))
    assert f"o/bad    │ {bad[:8]} (main)" in out or "error: tokenizer_config.json" in out


def test_missing_cache_dir_is_a_usage_error(tmp_path):
    code, _, err = run("--cache-dir", str(tmp_path / "nowhere"))
    assert code == 2
    assert "no Hugging Face cache" in err


def test_empty_cache_checks_nothing_and_exits_2(tmp_path):
    # nothing checked is exit 2, as for check/fix: a gate that checked nothing fails
    code, out, _ = run("--cache-dir", str(tmp_path))
    assert code == 2
    assert out.splitlines()[-1] == "0 snapshots of 0 repos: nothing checked"


def test_datasets_are_ignored(tmp_path):
    b = CacheBuilder(tmp_path)
    b.add_revision("o/data", {"train.csv": "a,b\n"}, repo_type="dataset")
    b.add_revision("o/m", chatml_files(10, healthy=True))
    code, payload = run_json("--cache-dir", str(tmp_path))
    assert code == 0
    assert [e["repo_id"] for e in payload["repos"]] == ["o/m"]


# --- filters and the default cache -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--repo", "org/q*"], {"org/qwen:main", "org/qwen:refs/pr/1"}),
        (["--repo", "ORG/QWEN"], {"org/qwen:main", "org/qwen:refs/pr/1"}),
        (["--repo", "org/good", "--repo", "org/base"], {"org/good:main", "org/base:main"}),
        (["--repo", "org/qwen", "--revision", "refs/pr/1"], {"org/qwen:refs/pr/1"}),
        (["--revision", "main", "--repo", "*/n*"], {"org/nogen:main"}),
        (["--repo", "nobody/*"], set()),
    ],
)
def test_filters(hub_cache, args, expected):
    b, _ = hub_cache
    code, payload = run_json("--cache-dir", str(b.root), *args)
    assert {f"{e['repo_id']}:{e['refs'][0]}" for e in payload["repos"]} == expected
    assert (code == 2) == (not expected) == (payload["exit_code"] == 2)


def test_revision_by_commit_sha(hub_cache):
    b, shas = hub_cache
    _, payload = run_json("--cache-dir", str(b.root), "--revision", shas["qwen_pr"][:10])
    assert [e["revision"] for e in payload["repos"]] == [shas["qwen_pr"]]
    _, payload = run_json("--cache-dir", str(b.root), "--revision", shas["qwen_pr"][:5])
    assert payload["repos"] == []  # too short to be taken for a sha


def test_default_cache_dir_is_read_at_call_time(tmp_path, monkeypatch):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cachelib.default_cache_dir() == tmp_path / "home/.cache/huggingface/hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cachelib.default_cache_dir() == tmp_path / "xdg/huggingface/hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert cachelib.default_cache_dir() == tmp_path / "hf/hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert cachelib.default_cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", "~/c")
    assert cachelib.default_cache_dir() == tmp_path / "home/c"


def test_cli_uses_hf_hub_cache_from_environment(hub_cache):
    b, _ = hub_cache
    env = {"HF_HUB_CACHE": str(b.root)}
    result = CliRunner().invoke(cli, ["cache", "--format", "json"], env=env)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["summary"]["snapshots"] == 5


# --- a cache written by huggingface_hub itself -------------------------------------------------


def test_cache_populated_by_huggingface_hub(fake_hub):
    from huggingface_hub import constants, hf_hub_download, snapshot_download

    files = chatml_files(151643, generation_config=False)
    repo = fake_hub.add_repo("Qwen/chat", files)
    first = repo.head
    snapshot_download("Qwen/chat")
    # transformers probes generation_config.json: the Hub answers 404 and leaves a marker
    with pytest.raises(Exception, match="generation_config"):
        hf_hub_download("Qwen/chat", GEN)
    cache_dir = Path(constants.HF_HUB_CACHE)
    marker = cache_dir / "models--Qwen--chat" / ".no_exist" / first / GEN
    assert marker.exists()
    fake_hub.push("Qwen/chat", {"README.md": "v2\n"})
    snapshot_download("Qwen/chat")  # a second revision that shares every other blob
    blobs = hash_blobs(cache_dir)
    assert not scan_cache_dir(cache_dir).warnings

    code, payload = run_json("--repo", "qwen/*")  # default cache: HF_HUB_CACHE
    assert code == 1
    assert payload["summary"]["fixable"] == 2
    assert payload["summary"]["analyses"] == 1
    code, payload = run_json("--fix")
    assert code == 1
    assert payload["summary"]["fixed"] == 2

    assert hash_blobs(cache_dir) == blobs
    assert not marker.exists()
    assert not scan_cache_dir(cache_dir).warnings
    for sha in (first, repo.head):
        path = try_to_load_from_cache("Qwen/chat", GEN, cache_dir=cache_dir, revision=sha)
        assert isinstance(path, str)
        assert json.loads(Path(path).read_text())["eos_token_id"] == [151643, 151645]
        # huggingface_hub itself now serves the fixed file, without a request
        requests = len(fake_hub.requests)
        assert hf_hub_download("Qwen/chat", GEN, revision=sha) == path
        assert len(fake_hub.requests) == requests
    assert os.readlink(Path(path).parent / "config.json").startswith("../../blobs/")
    assert run("--fix")[0] == 0


def test_a_downloaded_gguf_is_checked_as_check_checks_it(fake_hub, tmp_path, monkeypatch, capsys):
    """hf_hub_download of one GGUF: the cache reports what `eosfix check` on the snapshot's
    file reports (EOS201, exit 1), never "no chat template"; --fix writes no blob (its blob is
    shared) and says the command that writes a fixed copy, which works."""
    from huggingface_hub import constants, hf_hub_download

    from eosfix.cli import main
    from tests.support import ggufs

    data = ggufs.command_r(tmp_path / "src.gguf").read_bytes()
    fake_hub.add_repo("org/Chat-GGUF", {"Chat-Q4_K_M.gguf": data, "README.md": "# Chat\n"})
    file = Path(hf_hub_download("org/Chat-GGUF", "Chat-Q4_K_M.gguf"))
    blobs = hash_blobs(Path(constants.HF_HUB_CACHE))
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--format", "json", str(file)]) == 1
    (checked,) = json.loads(capsys.readouterr().out)["repos"]
    code, payload = run_json("--repo", "org/*")
    assert code == 1
    (entry,) = payload["repos"]
    assert entry["file"] == "Chat-Q4_K_M.gguf"
    assert entry["name"].endswith("/Chat-Q4_K_M.gguf")
    assert (entry["container"], entry["verdict"]) == ("gguf", "fixable")
    assert [f["code"] for f in entry["findings"]] == [f["code"] for f in checked["findings"]]
    assert [f["code"] for f in entry["findings"]] == ["EOS201"]
    assert payload["summary"]["gguf_files"] == 1
    code, out, err = run("--repo", "org/*")
    assert code == 1
    assert "no chat template" not in out
    assert out.splitlines()[-1] == (
        "1 snapshot of 1 repo, 1 GGUF file in it: 1 GGUF file would be fixed "
        "(eosfix fix FILE --output NEW.gguf)"
    )
    code, out, err = run("--repo", "org/*", "--fix")
    assert code == 1  # nothing written: still to fix
    assert hash_blobs(Path(constants.HF_HUB_CACHE)) == blobs
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"{file}: not written: its blob is shared")
    command = line.split("; ", 1)[1].removesuffix(" writes the fixed copy")
    assert main(command.split()[1:]) == 1  # eosfix fix FILE --output NEW.gguf: it works
    capsys.readouterr()
    assert main(["check", "Chat-Q4_K_M-fixed.gguf"]) == 0
    assert hash_blobs(Path(constants.HF_HUB_CACHE)) == blobs


def test_scan_agrees_with_scan_cache_dir(hub_cache, monkeypatch):
    b, _ = hub_cache
    b.add_revision("org/lost-snapshot", chatml_files(6000))
    b.set_ref("org/lost-snapshot", "refs/pr/3", "f" * 40)
    b.add_revision("o/data", {"train.csv": "a,b\n"}, repo_type="dataset")
    scan = cachelib.scan_cache(b.root)
    info = scan_cache_dir(b.root)
    assert {(s.repo_id, s.commit, s.refs) for s in scan.snapshots} == {
        (repo.repo_id, rev.commit_hash, tuple(sorted(rev.refs)))
        for repo in info.repos
        if repo.repo_type == "model"
        for rev in repo.revisions
    }
    assert [c.message for c in scan.corrupted] == [str(w) for w in info.warnings]
    # without huggingface_hub's per-repo scanner, the whole scan_cache_dir() gives the same
    monkeypatch.setattr(cachelib, "_repo_scanner", lambda: None)
    again = cachelib.scan_cache(b.root)
    assert (again.snapshots, again.corrupted) == (scan.snapshots, scan.corrupted)
    assert (len(scan.snapshots), len(scan.corrupted)) == (5, 1)


def test_progress_bar_on_a_terminal(hub_cache, monkeypatch):
    from eosfix.cli import batch as cli_batch

    b, _ = hub_cache
    monkeypatch.setattr(cli_batch, "wants_progress", lambda fmt: True)
    monkeypatch.setattr(pool, "POOL_MIN", 2)  # the bar also follows worker processes
    code, out, _ = run("--cache-dir", str(b.root), "--fix")
    assert code == 1
    assert "3 fixed" in out


# --- streaming: nothing accumulates ------------------------------------------------------------


def test_json_is_streamed_as_the_whole_document_would_be_dumped(hub_cache):
    b, _ = hub_cache
    b.add_revision("org/lost-snapshot", chatml_files(6000))
    b.set_ref("org/lost-snapshot", "refs/pr/3", "f" * 40)
    for args in ((), ("--repo", "nobody/*"), ("--fix",)):
        code, out, _ = run("--cache-dir", str(b.root), "--format", "json", *args)
        payload = json.loads(out)
        assert list(payload) == ["cache_dir", "repos", "corrupted", "summary", "exit_code"]
        assert out == json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        assert payload["exit_code"] == code


def _many(root: Path, n: int) -> CacheBuilder:
    """n/2 repos of two revisions each; odd repos' revisions differ in generation_config."""
    b = CacheBuilder(root)
    for i in range(n // 2):
        files = chatml_files(1000 + 10 * i, healthy=i % 3 == 0)
        b.add_revision(f"o/m{i:03d}", files)
        if i % 2:
            files = chatml_files(1000 + 10 * i, healthy=i % 3 != 0)
        b.add_revision(f"o/m{i:03d}", {**files, "README.md": "v2"}, refs=["refs/pr/1"])
    return b


def _json(scan: cachelib.CacheScan, **kwargs) -> dict:
    out = io.StringIO()
    write_json(CacheRun(scan, detail=JSON_DETAIL, **kwargs), out)
    return json.loads(out.getvalue())


def test_tiny_window_batches_and_lru_give_the_same_results(tmp_path, monkeypatch):
    b = _many(tmp_path, 24)
    scan = cachelib.scan_cache(b.root)
    expected = _json(scan, workers=1)
    assert expected["summary"]["analyses"] == 18
    for k, v in {"WINDOW": 1, "LRU_SIZE": 1, "LRU_DETAIL": 1}.items():
        monkeypatch.setattr(batchrun, k, v)
    for k, v in {"BATCH": 2, "POOL_MIN": 3}.items():
        monkeypatch.setattr(pool, k, v)
    got = _json(scan, workers=2)
    assert got["repos"] == expected["repos"]
    assert got["summary"] == expected["summary"]  # revisions of a repo come together: LRU hits
    fixed = _json(scan, workers=2, fix=True)
    assert [e["name"] for e in fixed["repos"]] == [e["name"] for e in expected["repos"]]
    assert fixed["summary"]["fixed"] == expected["summary"]["fixable"] == 14
    assert _json(scan, workers=2)["summary"]["ok"] == 24


# Counted in a child process that holds only eosfix: gc.get_objects() walks every object of
# the process, and a test worker that ran the real-model tests before holds millions of them.
_MOST_ALIVE = """
import gc, json, sys
from collections import Counter
from pathlib import Path
from eosfix.batch import run as batchrun, verdict
from eosfix.batch.cache import CacheRun
from eosfix.render.batch import JSON_DETAIL
from eosfix.sources import cache as cachelib

batchrun.WINDOW, batchrun.LRU_DETAIL = 3, 2
most = []
for root in sys.argv[1:]:
    verdicts = snapshots = 0
    for _ in CacheRun(cachelib.scan_cache(Path(root)), detail=JSON_DETAIL, workers=1):
        gc.collect()
        # type(), not isinstance: no attribute lookups on every object of the process; and
        # no list kept across steps (it would keep every object of the last one)
        kinds = Counter(type(o) for o in gc.get_objects())
        verdicts = max(verdicts, kinds[verdict.Verdict])
        snapshots = max(snapshots, kinds[cachelib.Snapshot])
        del kinds
    most.append([verdicts, snapshots])
print(json.dumps(most))
"""


def test_memory_does_not_grow_with_the_cache(tmp_path):
    """With a window of 3 and 2 analyses kept, at most WINDOW + LRU analyses (and WINDOW
    snapshots) are alive at any time (cyclic garbage aside: the template probes' exceptions,
    freed by the next collection), for a cache of 12 snapshots as for one of 40."""
    roots = [str(_many(tmp_path / str(n), n).root) for n in (12, 40)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, "-c", _MOST_ALIVE, *roots], env=env,
                           capture_output=True, text=True, check=True)  # fmt: skip
    small, large = json.loads(child.stdout)
    assert small == large
    assert large[0] <= 3 + 2 + 1  # WINDOW + LRU_DETAIL, and the one just yielded
    assert large[1] <= 3 + 2


def test_text_table_in_chunks_reads_as_one_table(tmp_path, monkeypatch):
    b = _many(tmp_path, 10)
    whole = run("--cache-dir", str(b.root))[1]
    from eosfix.cli import batch as cli_batch

    monkeypatch.setattr(cli_batch, "CHUNK", 3)
    assert run("--cache-dir", str(b.root))[1] == whole
    assert len(whole.splitlines()) == 2 + 10 + 1  # header, rule, rows, summary


def _die(path: Path, detail: verdict.Detail) -> verdict.Verdict:
    os._exit(3)


def test_a_dead_worker_makes_errors_not_a_crash(tmp_path, monkeypatch):
    scan = cachelib.scan_cache(_many(tmp_path, 8).root)
    monkeypatch.setattr(verdict, "analyze_folder", _die)
    monkeypatch.setattr(pool, "POOL_MIN", 1)
    result = CacheRun(scan, keep_rows=True, workers=2).drain()
    assert result.counts()["error"] == len(result.results) == 8
    assert {r.note for r in result.results} == {": the analysis process died (out of memory?)"}
    assert result.exit_code == 2


def test_csv_and_markdown_reports(hub_cache):
    b, shas = hub_cache
    code, out, err = run("--cache-dir", str(b.root), "--format", "csv")
    assert code == 1
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 5
    pr = next(r for r in rows if r["commit"] == shas["qwen_pr"])
    assert (pr["repo_id"], pr["revision"], pr["verdict"]) == ("org/qwen", "refs/pr/1", "fixable")
    assert (pr["ends_a_turn"], pr["proposed_eos_token_id"]) == ("<|im_end|> 1002", "[1000, 1002]")
    assert err.startswith("5 snapshots of 4 repos: 3 would be fixed")
    code, out, _ = run("--cache-dir", str(b.root), "--format", "markdown")
    lines = out.splitlines()
    assert lines[0] == "| repo | revision | ends a turn | eos now | verdict | pull request |"
    qwen_pr = f"| `org/qwen` | {shas['qwen_pr'][:8]} (refs/pr/1) | `<\\|im_end\\|>` 1002 | 1000 |"
    assert f"{qwen_pr} runs on -> [1000, 1002] |  |" in lines
    assert lines[-1].startswith("5 snapshots of 4 repos: 3 would be fixed")
    assert len(lines) == 2 + 5 + 2


def test_a_tokenizer_only_snapshot_is_not_a_model_and_fix_leaves_it(tmp_path):
    """A snapshot with no config.json, no generation_config.json and no weights holds no model
    any runtime loads, with or without the ``.no_exist`` marker a loader leaves: "not a model
    repo", as check and hub say of the repo on the Hub; --fix writes nothing into it. Weights
    make it a model's, the marker notwithstanding."""
    b = CacheBuilder(tmp_path / "hub")
    files = chatml_files(1000)
    keep = ("tokenizer_config.json", "chat_template.jinja")
    tok_only = {k: v for k, v in files.items() if k in keep}
    b.add_revision("org/tokenizer", tok_only, no_exist=["config.json", GEN])
    b.add_revision("org/downloaded", tok_only)  # hf download of the whole repo: no marker
    weights = {**tok_only, "model.safetensors": "weights"}
    b.add_revision("org/weights", weights, no_exist=["config.json", GEN])
    code, payload = run_json("--cache-dir", str(b.root))
    verdicts = {e["repo_id"]: e["verdict"] for e in payload["repos"]}
    assert verdicts == {
        "org/downloaded": "not_a_model",
        "org/tokenizer": "not_a_model",
        "org/weights": "fixable",
    }
    assert code == 1
    code, out, _ = run("--cache-dir", str(b.root), "--fix")
    for repo_id in ("org/tokenizer", "org/downloaded"):
        snapshot = next((b.repo_dir(repo_id) / "snapshots").iterdir())
        assert not (snapshot / GEN).exists()
    assert "not a model repo" in out
