"""The cache scan's plain walk gives huggingface_hub's answer: the same snapshots, refs and
file keys as its own per-repo scanner, and the same warnings as ``scan_cache_dir`` for every
kind of corruption (the walk steps aside and that scanner words them)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir

from eosfix.sources import cache as cachelib
from eosfix.sources import cachewalk
from tests.support.cachebuilder import CacheBuilder, base_model_files, chatml_files


def _ordinary(b: CacheBuilder) -> dict[str, str]:
    """Repos as hf_hub_download leaves them, in every shape the walk handles itself."""
    nested = {
        **chatml_files(4000),
        "additional_chat_templates/tool_use.jinja": "{{ messages }}",
        "additional_chat_templates/deeper/x.jinja": "not read",
        "onnx/model.onnx": b"\1" * 8,
        "onnx/config.json": "{}",
    }
    return {
        "main": b.add_revision("org/qwen", chatml_files(1000)),
        "pr": b.add_revision("org/qwen", chatml_files(1000, readme="v2\n"), refs=["refs/pr/1"]),
        "two": b.add_revision("org/qwen", chatml_files(1100), refs=["v1", "refs/pr/2"]),
        "noref": b.add_revision("org/qwen", chatml_files(1200), refs=()),
        "base": b.add_revision("org/base", base_model_files()),
        "Case": b.add_revision("Org/Case", chatml_files(5000)),
        "case": b.add_revision("org/case", chatml_files(5100)),
        "nested": b.add_revision("org/nested", nested),
        "empty": b.add_revision("org/empty", {}),
        "no org": b.add_revision("gpt2", chatml_files(6000)),
        "data": b.add_revision("org/data", {"train.csv": "a,b\n"}, repo_type="dataset"),
    }


def _keys(scan: cachelib.CacheScan) -> tuple[list[tuple], list[str]]:
    return (
        sorted((s.repo_id, s.commit, s.refs, str(s.path), s.key) for s in scan.snapshots),
        sorted(c.message for c in scan.corrupted),
    )


def _by_hub(monkeypatch, root: Path) -> tuple[list[tuple], list[str]]:
    """The scan with huggingface_hub's per-repo scanner deciding every repo."""
    with monkeypatch.context() as m:
        m.setattr(cachewalk, "walk_repo", lambda path: None)
        return _keys(cachelib.scan_cache(root))


def _hub_view(root: Path) -> tuple[set[tuple], list[str]]:
    info = scan_cache_dir(root)
    snapshots = {
        (repo.repo_id, rev.commit_hash, tuple(sorted(rev.refs)))
        for repo in info.repos
        if repo.repo_type == "model"
        for rev in repo.revisions
    }
    return snapshots, sorted(str(w) for w in info.warnings)


def test_the_walk_reads_ordinary_repos_itself_and_agrees(tmp_path, monkeypatch):
    b = CacheBuilder(tmp_path / "hub")
    shas = _ordinary(b)
    nested = b.snapshot("org/nested", shas["nested"])
    # a file eosfix fixed (the link replaced by a regular file), and a link to a folder
    gen = nested / "generation_config.json"
    text = gen.read_text()
    gen.unlink()
    gen.write_text(text)
    (nested / "linked").symlink_to("onnx", target_is_directory=True)
    (b.root / ".locks").mkdir()
    (b.root / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")

    calls = []
    real = cachewalk.walk_repo

    def walk(path: Path):
        got = real(path)
        calls.append((path.name, got is not None))
        return got

    monkeypatch.setattr(cachewalk, "walk_repo", walk)
    walked = _keys(cachelib.scan_cache(b.root))
    models = {name for name, _ in calls if name.startswith("models--")}
    assert len(models) == 7
    assert all(ok for name, ok in calls if name in models)  # no repo left to the hub
    monkeypatch.undo()

    assert walked == _by_hub(monkeypatch, b.root)
    snapshots, warnings = _hub_view(b.root)
    assert {(r, c, refs) for r, c, refs, _, _ in walked[0]} == snapshots
    assert walked[1] == warnings == []
    keys = {c: k for _, c, _, _, k in walked[0]}
    assert [rel for rel, _ in keys[shas["nested"]]] == [
        "additional_chat_templates/tool_use.jinja",
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
    ]
    assert dict(keys[shas["nested"]])["generation_config.json"] == cachewalk.git_sha1_file(gen)
    assert keys[shas["empty"]] == ()


def test_links_the_walk_does_not_take_on_sight_are_checked_as_the_hub_does(tmp_path, monkeypatch):
    """The walk lists ``blobs/`` once and takes an ordinary ``../../blobs/NAME`` link to a
    listed file without a stat; any other link is looked at as scan_cache_dir does: a blob
    that is a link to a blob, a link into blobs/ whose blob is a folder (skipped, like any
    link to a folder), a link written absolute. The answer is still the hub scanner's."""
    b = CacheBuilder(tmp_path / "hub")
    shas = _ordinary(b)
    snap = b.snapshot("org/qwen", shas["main"])
    blobs = b.repo_dir("org/qwen") / "blobs"
    config = (snap / "config.json").resolve()  # a blob that is a link to another blob's copy
    (blobs / "kept").write_bytes(config.read_bytes())
    config.unlink()
    config.symlink_to("kept")
    (blobs / ("d" * 40)).mkdir()  # a blob that is a folder
    (snap / "folder_blob").symlink_to("../../blobs/" + "d" * 40)
    absolute = snap / "tokenizer_config.json"
    target = absolute.resolve()
    absolute.unlink()
    absolute.symlink_to(target)
    assert cachewalk.walk_repo(b.repo_dir("org/qwen")) is not None  # the walk decides
    walked = _keys(cachelib.scan_cache(b.root))
    assert walked == _by_hub(monkeypatch, b.root)
    keys = {c: dict(k) for _, c, _, _, k in walked[0]}
    assert keys[shas["main"]]["config.json"] == config.name  # its link's first hop
    assert keys[shas["main"]]["tokenizer_config.json"] == target.name


def _broken_weights(b: CacheBuilder, sha: str) -> None:
    blob = (b.snapshot("org/qwen", sha) / "model.safetensors").resolve()
    blob.unlink()


def _missing_commit_ref(b: CacheBuilder, sha: str) -> None:
    b.set_ref("org/qwen", "refs/pr/9", "f" * 40)


def _file_in_snapshots(b: CacheBuilder, sha: str) -> None:
    (b.repo_dir("org/qwen") / "snapshots" / "stray.txt").write_text("x")


def _refs_a_file(b: CacheBuilder, sha: str) -> None:
    refs = b.repo_dir("org/qwen") / "refs"
    shutil.rmtree(refs)
    refs.write_text(sha)


def _no_snapshots(b: CacheBuilder, sha: str) -> None:
    shutil.rmtree(b.repo_dir("org/qwen") / "snapshots")


def _ref_with_newline(b: CacheBuilder, sha: str) -> None:
    (b.repo_dir("org/qwen") / "refs" / "main").write_text(sha + "\n")


def _ds_store(b: CacheBuilder, sha: str) -> None:
    (b.repo_dir("org/qwen") / "snapshots" / ".DS_Store").write_bytes(b"\0")
    (b.repo_dir("org/qwen") / "refs" / ".DS_Store").write_bytes(b"\0")


def _snapshot_is_a_link(b: CacheBuilder, sha: str) -> None:
    snap = b.snapshot("org/qwen", sha)
    os.rename(snap, snap.with_name("elsewhere"))
    snap.symlink_to("elsewhere", target_is_directory=True)


def _bad_type(b: CacheBuilder, sha: str) -> None:
    (b.root / "model--org--typo" / "snapshots").mkdir(parents=True)


def _not_a_repo(b: CacheBuilder, sha: str) -> None:
    (b.root / "stray").mkdir()
    (b.root / "models--file").write_text("x")


def _broken_template_link(b: CacheBuilder, sha: str) -> None:
    link = b.snapshot("org/qwen", sha) / "chat_template.jinja"
    link.unlink()
    link.symlink_to("../../blobs/" + "0" * 40)


def _dangling_ref_link(b: CacheBuilder, sha: str) -> None:
    (b.repo_dir("org/qwen") / "refs" / "dangling").symlink_to("nowhere")


CORRUPTIONS = {
    "broken weights link": _broken_weights,
    "ref to a missing commit": _missing_commit_ref,
    "file in snapshots": _file_in_snapshots,
    "refs is a file": _refs_a_file,
    "no snapshots folder": _no_snapshots,
    "ref with a newline": _ref_with_newline,
    "ignored OS files": _ds_store,
    "snapshot is a link": _snapshot_is_a_link,
    "unknown repo type": _bad_type,
    "not a repo": _not_a_repo,
    "broken template link": _broken_template_link,
    "dangling ref link": _dangling_ref_link,
}


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
def test_anything_unusual_is_left_to_huggingface_hub(tmp_path, monkeypatch, corrupt):
    b = CacheBuilder(tmp_path / "hub")
    shas = _ordinary(b)
    CORRUPTIONS[corrupt](b, shas["main"])
    if corrupt not in ("unknown repo type", "not a repo"):  # those leave org/qwen alone
        assert cachewalk.walk_repo(b.repo_dir("org/qwen")) is None
    walked = _keys(cachelib.scan_cache(b.root))
    assert walked == _by_hub(monkeypatch, b.root)
    if corrupt == "dangling ref link":  # scan_cache_dir raises; eosfix reports that repo
        assert any("cannot read" in m for m in walked[1])
        return
    snapshots, warnings = _hub_view(b.root)
    # scan_cache_dir itself: the same snapshots; its warnings, but for datasets and spaces
    # (and a reference it cannot read, which eosfix reports as corrupted too)
    assert {(r, c, refs) for r, c, refs, _, _ in walked[0]} == snapshots
    assert set(warnings) <= set(walked[1])
