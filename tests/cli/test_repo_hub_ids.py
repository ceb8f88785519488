"""check, explain and fix take a Hub repo id where a path goes, as ``render`` does (not "no
such file or directory" for ``eosfix check org/name``). Against the stand-in Hub."""

from __future__ import annotations

import json

import pytest

from eosfix.cli import main
from tests.support.hubrepos import BROKEN_REPO as BROKEN
from tests.support.hubrepos import HEALTHY_REPO as HEALTHY


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hub(hub_repos, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local folder named like the repos
    return hub_repos


def test_check_a_hub_id_reads_its_small_files(hub, capsys):
    code, out, err = _run(capsys, "check", BROKEN)
    assert code == 1, err
    assert out.startswith(f"{BROKEN}\n  ends a turn   <|im_end|>  id 248046")
    assert f"{BROKEN}/generation_config.json: EOS001 eos_token_id 248044" in out
    # fixed by a pull request, not by `eosfix fix` on a folder that is not here
    assert f"(run: eosfix hub {BROKEN} --pr)" in out
    assert out.rstrip().endswith("1 repo would be fixed")
    assert "model.safetensors" not in hub.downloads(BROKEN)
    assert not hub.commits_received


def test_check_hub_ids_and_folders_together_in_json(hub, capsys, tmp_path):
    from tests.conftest import SAMPLES, copy_repo

    local = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "local")
    code, out, _ = _run(capsys, "check", "--format", "json", BROKEN, "local", f"hf://{HEALTHY}")
    assert code == 1
    repos = json.loads(out)["repos"]
    assert [r["path"] for r in repos] == [BROKEN, "local", HEALTHY]
    assert [r["status"] for r in repos] == ["fixable", "ok", "ok"]
    assert repos[0]["repo_id"] == BROKEN
    assert len(repos[0]["sha"]) == 40
    assert repos[0]["revision"] == "main"
    assert "repo_id" not in repos[1]
    assert local.is_dir()


def test_check_options_apply_to_a_hub_repo(hub, capsys):
    """--keep-id, --config-json and --runtime reach the Hub repo's check as a folder's."""
    code, out, _ = _run(capsys, "check", "--format", "json", "--config-json", BROKEN)
    assert code == 1
    (repo,) = json.loads(out)["repos"]
    assert {c["file"] for c in repo["changes"]} == {"generation_config.json", "config.json"}


def test_explain_a_hub_id(hub, capsys):
    code, out, err = _run(capsys, "explain", BROKEN)
    assert code == 1, err
    assert "<|im_end|>" in out
    assert BROKEN in out


def test_a_missing_hub_repo_is_one_line_exit_2(hub, capsys):
    """The line names the repo as it was typed."""
    code, out, err = _run(capsys, "check", "hf://org/missing")
    assert (code, out) == (2, "1 repo could not be checked\n")
    assert err == "error: hf://org/missing: repository not found (404)\n"


@pytest.mark.parametrize("command", ["check", "explain", "fix"])
def test_a_mistyped_local_path_with_one_slash_says_no_such_folder_too(hub, capsys, command):
    """``models/qwen`` that exists nowhere is taken for a Hub id: what the Hub said, and that
    no local folder has that name either (the user may have mistyped a path)."""
    code, _, err = _run(capsys, command, "models/qwen")
    assert code == 2
    assert "no local folder or file models/qwen exists either" in err, err
    if command != "fix":  # fix asks nothing of the Hub
        assert err == (
            "error: models/qwen: repository not found (404); no local folder or file "
            "models/qwen exists either\n"
        )


def test_hf_prefix_without_a_repo_id_is_one_line(hub, capsys):
    code, _, err = _run(capsys, "check", "hf://not a repo")
    assert code == 2
    assert "hf://not a repo: not checked: not a Hub repo id or URL (org/name, " in err


def test_fix_refuses_a_hub_id_and_points_to_a_pull_request(hub, capsys):
    code, out, err = _run(capsys, "fix", BROKEN)
    assert code == 2
    assert f"{BROKEN}: not checked: a Hub repo id: fix writes local files only" in err
    assert f"eosfix hub {BROKEN} --pr" in err
    assert hub.downloads(BROKEN) == []  # nothing fetched, nothing written
    assert not hub.commits_received
    assert "1 path not checked" in out


def test_a_local_folder_of_that_name_wins_and_is_said(hub, capsys, tmp_path):
    """A folder downloaded from the Hub under the repo's name: the local one is checked, and
    a line says so; hf:// takes the Hub's."""
    from tests.conftest import SAMPLES, copy_repo

    folder = copy_repo(SAMPLES / "llama3-healthy", tmp_path / BROKEN)
    (folder / ".cache" / "huggingface").mkdir(parents=True)  # hf download --local-dir's mark
    code, out, err = _run(capsys, "check", BROKEN)
    assert code == 0
    assert err == (
        f"{BROKEN}: checking the local folder, not the Hub repo (for the Hub's files: "
        f"hf://{BROKEN})\n"
    )
    assert "<|eot_id|>" in out
    assert hub.downloads(BROKEN) == []
    code, out, _ = _run(capsys, "check", f"hf://{BROKEN}")
    assert code == 1
    assert "<|im_end|>" in out


def test_a_folder_named_like_an_id_that_is_not_from_the_hub_is_just_a_folder(hub, capsys, tmp_path):
    from tests.conftest import SAMPLES, copy_repo

    copy_repo(SAMPLES / "llama3-healthy", tmp_path / "models" / "llama")
    code, _, err = _run(capsys, "check", "models/llama")
    assert (code, err) == (0, "")


def test_the_suggested_pull_request_keeps_keep_id(hub, capsys):
    code, out, _ = _run(
        capsys, "check", "--keep-id", "248044", "--runtime", "mlx-lm==0.31.3", BROKEN
    )
    assert code == 1
    assert f"(run: eosfix hub {BROKEN} --pr --keep-id 248044)" in out


def test_hub_takes_every_spelling_in_one_run(hub, capsys, tmp_path):
    """A repo's URL, ollama's hf.co/...:QUANT and a GGUF file's path: each parsed as check
    parses it, the quant and the file read by their headers; never sent to the Hub as is."""
    from tests.support.hubserver import GGUF_ORG, add_gguf_org

    add_gguf_org(hub, tmp_path / "written")
    hub.cdn = True
    chat = f"{GGUF_ORG}/Chat-7B-GGUF"
    code, out, err = _run(
        capsys, "hub", "--format", "json", f"https://huggingface.co/{BROKEN}",
        f"hf.co/{chat}:Q2_K", f"{chat}/Chat-7B-Q8_0.gguf", "https://example.com/a/b",
    )  # fmt: skip
    assert code == 2, err  # the last names no Hub repo
    repos = json.loads(out)["repos"]
    assert [(r["repo_id"], r["verdict"]) for r in repos] == [
        (BROKEN, "fixable"), (chat, "fixable"), (chat, "ok"), ("https://example.com/a/b", "error"),
    ]  # fmt: skip
    assert [g["file"] for g in repos[1]["gguf_groups"]] == ["Chat-7B-Q2_K.gguf"]
    assert [g["file"] for g in repos[2]["gguf_groups"]] == ["Chat-7B-Q8_0.gguf"]
    assert "not a Hub repo id or URL: another site" in repos[3]["error"]
    assert not [p for _, p in hub.requests if "https:" in p or "example.com" in p]
