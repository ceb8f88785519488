"""Every path a user gives is accounted for: checked, or named with the reason it was not. CLI and Python API alike."""

from __future__ import annotations

import json
import shutil

import pytest

from eosfix import api
from eosfix.cli import main
from eosfix.decide.check import Status
from tests.conftest import ROOT, SAMPLES
from tests.support import ggufs
from tests.support.cachebuilder import CacheBuilder, chatml_files


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def loose_files(tmp_path):
    """A folder that is not a model folder, holding a README and a weights file."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("hi\n")
    (folder / "model.safetensors").write_bytes(b"\0" * 8)
    return folder


@pytest.mark.parametrize("name", ["README.md", "model.safetensors"])
def test_explain_on_a_file_that_is_no_model_is_one_line_exit_2(name, loose_files, capsys):
    path = loose_files / name
    code, out, err = _run(capsys, "explain", path)
    assert (code, out) == (2, "")
    assert err == (
        f"{path}: not checked: not a model folder, one of its config or template files, "
        "or a GGUF file\n"
    )


def test_explain_on_the_projects_readme_is_one_line(capsys):
    code, out, err = _run(capsys, "explain", ROOT / "README.md")
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "internal error" not in err


def test_a_weights_file_in_a_model_folder_points_at_the_folder(tmp_path, capsys):
    repo = shutil.copytree(SAMPLES / "llama3-healthy", tmp_path / "m")
    (repo / "model.safetensors").write_bytes(b"\0" * 8)
    code, out, err = _run(capsys, "check", repo / "model.safetensors")
    assert code == 2
    assert err == (
        f"{repo}/model.safetensors: not checked: not a model folder, one of its config or "
        "template files, or a GGUF file; eosfix reads the config files, not this one: check "
        f"the folder (eosfix check {repo})\n"
    )
    assert out == "nothing checked: 1 path not checked\n"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_on_nothing_checkable_exits_2(fmt, loose_files, capsys):
    code, out, err = _run(
        capsys,
        "check",
        "--format",
        fmt,
        loose_files / "README.md",
        loose_files / "model.safetensors",
    )
    assert code == 2
    if fmt == "json":
        payload = json.loads(out)
        assert payload["exit_code"] == 2
        assert [r["status"] for r in payload["repos"]] == ["error", "error"]
        assert payload["repos"][0]["error"].startswith(f"{loose_files}/README.md: not a model")
    else:
        assert out == "nothing checked: 2 paths not checked\n"
        assert err.count(": not checked: ") == 2


def test_fix_names_what_it_did_not_check_and_exits_2(loose_files, sample_repo, capsys):
    repo = sample_repo("chatml-missing-im-end")
    code, out, err = _run(capsys, "fix", repo, loose_files / "README.md")
    assert code == 2  # a path not checked outweighs the files changed
    assert f"Fixing {repo}/generation_config.json" in err
    assert f"{loose_files}/README.md: not checked: not a model folder" in err
    assert out.splitlines()[-1] == "1 repo fixed, 1 path not checked"


def test_a_readme_beside_a_config_file_is_accounted_for_by_its_folder(sample_repo, capsys):
    repo = sample_repo("llama3-healthy")
    (repo / "README.md").write_text("hi")
    code, out, err = _run(capsys, "check", repo / "config.json", repo / "README.md")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "1 repo stops correctly (runtime caveats above)"


def test_empty_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, out, err = _run(capsys, "check", tmp_path / "empty")
    assert (code, out) == (2, "nothing checked: 1 path not checked\n")
    assert (
        err
        == f"{tmp_path}/empty: not checked: no tokenizer or template files here (the folder is empty)\n"
    )


def test_folder_with_only_config_json(tmp_path, capsys):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text('{"eos_token_id": 2}')
    code, _, err = _run(capsys, "check", tmp_path / "cfg")
    assert code == 2
    assert err == (
        f"{tmp_path}/cfg: not checked: no tokenizer or template files here (only config.json; "
        "eosfix reads tokenizer_config.json, tokenizer.json, chat_template.jinja...)\n"
    )


def test_parent_folder_points_at_the_model_folders_below(tmp_path, capsys):
    for name in ("a-model", "b-model"):
        shutil.copytree(SAMPLES / "llama3-healthy", tmp_path / "models" / name)
    code, _, err = _run(capsys, "check", tmp_path / "models")
    assert code == 2
    assert err == (
        f"{tmp_path}/models: not checked: no tokenizer or template files here; 2 model folders "
        f"below: {tmp_path}/models/a-model, {tmp_path}/models/b-model (give them as paths)\n"
    )


def test_sample_repos_folder_names_its_models(capsys):
    code, _, err = _run(capsys, "check", SAMPLES)
    assert code == 2
    assert "model folders below: " in err
    assert f"{SAMPLES}/base-model" in err


@pytest.fixture
def cache(tmp_path):
    b = CacheBuilder(tmp_path / "hub")
    sha = b.add_revision("org/chat", chatml_files(1000))
    return b, sha


def test_cache_folders_point_to_eosfix_cache(cache, capsys):
    b, _ = cache
    code, _, err = _run(capsys, "check", b.root)
    assert code == 2
    assert err == (
        f"{b.root}: not checked: a Hugging Face cache, not a model folder: "
        f"eosfix cache --cache-dir {b.root}\n"
    )
    code, _, err = _run(capsys, "check", b.repo_dir("org/chat"))
    assert code == 2
    assert err == (
        f"{b.repo_dir('org/chat')}: not checked: a Hugging Face cache folder of org/chat, not one "
        f"of its snapshots: eosfix cache --cache-dir {b.root.resolve()} --repo org/chat\n"
    )


def test_fix_on_a_cache_snapshot_says_links_are_shared_and_names_cache_fix(cache, capsys):
    b, sha = cache
    snap = b.snapshot("org/chat", sha)
    command = (
        f"eosfix cache --cache-dir {b.root.resolve()} --repo org/chat --revision {sha[:12]} --fix"
    )
    code, out, _ = _run(capsys, "check", snap)
    assert code == 1
    assert f"(run: {command})" in out  # not "eosfix fix SNAPSHOT", which refuses links
    code, out, err = _run(capsys, "fix", snap)
    assert code == 2
    assert err == (
        f"error: {snap}/generation_config.json: a Hugging Face cache snapshot: its files are links "
        "into blobs/, shared with other revisions, and eosfix fix never writes through them; "
        f"{command} replaces the link safely\n"
    )
    assert out == "1 repo could not be fixed\n"  # it was read: not "could not be read"
    assert (snap / "generation_config.json").is_symlink()


def test_a_real_model_without_template_is_told_apart(capsys):
    code, out, err = _run(capsys, "check", SAMPLES / "base-model")
    assert (code, err) == (0, "")
    assert out == (
        f"{SAMPLES}/base-model: no chat template: nothing to check (fine for a base model; a "
        "chat model without one has lost its template)\n\n1 repo without a chat template\n"
    )


def test_invalid_file_is_not_called_unreadable(tmp_path, capsys):
    (tmp_path / "tokenizer_config.json").write_text("{}")
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": {"id": 2}}')
    code, out, err = _run(capsys, "check", tmp_path)
    assert code == 2
    assert err == (
        f"error: {tmp_path}/generation_config.json: eos_token_id: expected a token id (an "
        'integer >= 0) or a list of at most 4096 ids (got {"id": 2})\n'
    )
    assert out == "1 repo could not be checked\n"


def test_a_gguf_is_counted_as_a_gguf_file(tmp_path, capsys):
    ggufs.chatml(tmp_path / "m.gguf")
    code, out, _ = _run(capsys, "check", tmp_path / "m.gguf", SAMPLES / "chatml-missing-im-end")
    assert code == 1
    assert out.splitlines()[-1] == "1 repo would be fixed, 1 GGUF file stops correctly"


# --- the Python API takes what the command line takes -----------------------------------------


def test_api_error_result_has_an_error_status(tmp_path):
    result = api.check(tmp_path / "nope")
    assert result.status is Status.ERROR
    assert str(result.error) == f"{tmp_path}/nope: no such file or directory"
    assert result.check is None


def test_api_accepts_a_config_file_and_a_gguf(tmp_path):
    result = api.check(SAMPLES / "chatml-missing-im-end" / "generation_config.json")
    assert result.status is Status.FIXABLE
    assert result.path == SAMPLES / "chatml-missing-im-end"
    ggufs.chatml(tmp_path / "m.gguf")
    assert api.check(tmp_path / "m.gguf").status is Status.OK
    assert api.check(str(tmp_path / "m.gguf")).status is Status.OK


def test_api_fix_reports_the_state_after_writing(sample_repo):
    repo = sample_repo("chatml-missing-im-end")
    result = api.fix(repo)
    assert result.written == ("generation_config.json",)
    assert result.status is Status.OK
    assert result.check is not None
    assert result.check.stop.ids == (248044, 248046)
    assert result.before is not None
    assert result.before.status is Status.FIXABLE
    again = api.fix(repo)
    assert (again.written, again.before, again.status) == ((), None, Status.OK)


def test_api_folder_that_is_no_model_says_why(tmp_path):
    (tmp_path / "x").mkdir()
    result = api.fix(tmp_path / "x")
    assert result.status is Status.ERROR
    assert "no tokenizer or template files here" in str(result.error)


def test_explain_json_on_a_path_not_checked_is_an_error_entry(loose_files, capsys):
    code, out, err = _run(capsys, "explain", loose_files / "README.md", "--format", "json")
    assert (code, err) == (2, "")
    payload = json.loads(out)
    assert payload["status"] == "error"
    assert payload["error"].endswith(
        "not a model folder, one of its config or template files, or a GGUF file"
    )


# --- GGUFs and model folders under one path; ollama blobs and stores --------------


def test_folder_with_ggufs_and_model_folders_checks_both(tmp_path, capsys):
    ggufs.chatml(tmp_path / "models" / "a.gguf") if (tmp_path / "models").mkdir() is None else None
    shutil.copytree(SAMPLES / "chatml-missing-im-end", tmp_path / "models" / "org" / "broken")
    shutil.copytree(SAMPLES / "llama3-healthy", tmp_path / "models" / "ok")
    code, out, _ = _run(capsys, "check", tmp_path / "models")
    assert code == 1  # the broken folder fails the run, not only the GGUFs
    assert out.splitlines()[-1].startswith("1 repo would be fixed, 1 GGUF file stops correctly")
    assert "1 repo stops correctly" in out.splitlines()[-1]
    code, out, _ = _run(capsys, "check", "--format", "json", tmp_path / "models")
    names = [r["path"].removeprefix(f"{tmp_path}/models/") for r in json.loads(out)["repos"]]
    assert names == ["a.gguf", "ok", "org/broken"]
    code, _, err = _run(capsys, "fix", tmp_path / "models")
    assert code == 1
    assert f"Fixing {tmp_path / 'models' / 'org' / 'broken' / 'generation_config.json'}" in err
    assert _run(capsys, "check", tmp_path / "models")[0] == 0


def test_ollama_blob_is_a_gguf_by_its_magic_and_a_store_points_to_eosfix_ollama(tmp_path, capsys):
    from tests.support.ollama import add_model

    store = tmp_path / "ollama" / "models"
    add_model(store, "m:latest", ggufs.chatml(tmp_path / "m.gguf"))
    (blob,) = [p for p in (store / "blobs").iterdir() if p.read_bytes()[:4] == b"GGUF"]
    code, out, _ = _run(capsys, "check", blob)
    assert code == 0
    assert out.splitlines()[-1] == "1 GGUF file stops correctly"
    hint = f"an ollama model store: eosfix ollama --models {store} checks every model in it"
    for path in (tmp_path / "ollama", store, store / "blobs", store / "manifests"):
        code, out, err = _run(capsys, "check", path)
        assert (code, out) == (2, "nothing checked: 1 path not checked\n")
        assert err == f"{path}: not checked: {hint}\n"
    # a manifest names one model: checked as eosfix ollama checks it, the same block
    manifest = next(p for p in (store / "manifests").rglob("*") if p.is_file())
    code, out, err = _run(capsys, "check", manifest)
    assert (code, err) == (0, "")
    block = _run(capsys, "ollama", "--models", store)[1].split("\n\n")[0]
    assert out.startswith(block + "\n\n")
    assert out.splitlines()[-1] == "1 ollama model stops correctly"
    # a blob is never fixed in place: its name is its content's hash
    before = blob.read_bytes()
    ggufs.glm(tmp_path / "g.gguf")
    add_model(store, "g:latest", tmp_path / "g.gguf")
    glm_blob = next(
        p
        for p in (store / "blobs").iterdir()
        if p.read_bytes() == (tmp_path / "g.gguf").read_bytes()
    )
    code, _, err = _run(capsys, "fix", glm_blob)
    assert code == 2
    assert "is an ollama blob: its name is the hash of its content" in err
    assert glm_blob.read_bytes() == (tmp_path / "g.gguf").read_bytes()
    assert blob.read_bytes() == before
    code, _, err = _run(capsys, "fix", glm_blob, "--output", tmp_path / "fixed.gguf")
    assert code == 1
