"""`eosfix upload` and `eosfix.targets.session.upload_checked`: a pre-upload gate (against FakeHub)."""

from __future__ import annotations

import pytest

from eosfix.core.errors import EosfixError
from eosfix.targets.session import UploadRefusedError, upload_checked
from tests.support.hubrepos import fixed_gen

REPO = "me/model-mlx"


@pytest.fixture
def target(fake_hub):
    fake_hub.add_repo(REPO, {"README.md": b"# model\n"})
    return fake_hub


def test_cli_refuses_broken_folder_and_uploads_nothing(target, sample_repo, run_eosfix):
    folder = sample_repo("chatml-missing-im-end")
    before = (folder / "generation_config.json").read_bytes()
    result = run_eosfix("upload", folder, REPO)
    assert result.exit_code == 1, result.output
    assert f"refusing to upload {folder} to {REPO}: would not stop" in result.stderr
    assert "EOS001" in result.stderr
    assert "EOS001" in result.stdout
    assert target.commits_received == []
    assert not [r for r in target.request_log if r.method == "POST"]
    assert (folder / "generation_config.json").read_bytes() == before  # nothing written


def test_cli_fix_then_upload(target, sample_repo, run_eosfix):
    folder = sample_repo("chatml-missing-im-end")
    result = run_eosfix("upload", folder, REPO, "--fix", "--commit-message", "Add model")
    assert result.exit_code == 0, result.output
    assert f"Fixing {folder / 'generation_config.json'}" in result.stderr
    assert len(target.commits_received) == 1
    commit = target.commits_received[0]
    assert commit["summary"] == "Add model"
    assert commit["files"]["generation_config.json"] == fixed_gen()
    assert set(commit["files"]) == {
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
    }
    assert result.stdout.strip() == f"{target.url}/{REPO}/commit/{commit['commit_oid']}"
    assert target.repos[REPO].files["generation_config.json"] == fixed_gen()


def test_cli_uploads_healthy_folder_as_pr(target, sample_repo, run_eosfix):
    folder = sample_repo("llama3-healthy")
    result = run_eosfix("upload", folder, REPO, "--create-pr")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{target.url}/{REPO}/discussions/1"
    assert target.commits_received[0]["create_pr"] is True


def test_cli_upload_error_is_one_line(target, sample_repo, run_eosfix):
    target.fail(REPO, 403, match=r"/commit/", headers={"X-Error-Code": None})
    result = run_eosfix("upload", REPO, sample_repo("llama3-healthy"))  # hf upload's order
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{REPO}: error: access denied (403)"


def test_base_model_without_template_is_uploaded(target, sample_repo, run_eosfix):
    assert run_eosfix("upload", sample_repo("base-model"), REPO).exit_code == 0
    assert len(target.commits_received) == 1


def test_upload_checked_refuses_with_eosfix_error(target, sample_repo):
    folder = sample_repo("chatml-missing-im-end")
    with pytest.raises(UploadRefusedError) as exc:
        upload_checked(folder, REPO, commit_message="x")
    assert isinstance(exc.value, EosfixError)
    assert "EOS001" in str(exc.value)
    assert str(folder) in str(exc.value)
    assert exc.value.result.status.value == "fixable"
    assert target.commits_received == []


def test_upload_checked_refuses_unfixable_even_with_fix(target, sample_repo):
    folder = sample_repo("chatml-missing-im-end")
    (folder / "config.json").write_text("{broken")
    with pytest.raises(UploadRefusedError, match="invalid JSON"):
        upload_checked(folder, REPO, fix=True)
    assert target.commits_received == []


def test_upload_checked_fixes_and_uploads(target, sample_repo):
    folder = sample_repo("chatml-missing-im-end")
    info = upload_checked(folder, REPO, fix=True, commit_message="Convert", create_pr=True)
    assert info.pr_url == f"{target.url}/{REPO}/discussions/1"
    assert target.commits_received[0]["files"]["generation_config.json"] == fixed_gen()
    assert (folder / "generation_config.json").read_bytes() == fixed_gen()


def test_cli_refusal_speaks_cli_and_api_refusal_speaks_python(target, sample_repo, run_eosfix):
    folder = sample_repo("chatml-missing-im-end")
    err = run_eosfix("upload", REPO, folder).stderr
    assert "(eosfix can fix this: run again with --fix)" in err
    assert "fix=True" not in err
    with pytest.raises(UploadRefusedError, match=r"eosfix can fix this: pass fix=True\)"):
        upload_checked(folder, REPO)


# --- the argument order of hf upload ------------------------------------------------


def test_cli_takes_repo_id_then_folder_like_hf_upload(target, sample_repo, run_eosfix):
    folder = sample_repo("llama3-healthy")
    result = run_eosfix("upload", REPO, folder)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.strip().startswith(f"{target.url}/{REPO}/commit/")
    assert len(target.commits_received) == 1


def test_cli_old_order_still_works_with_a_deprecation_line(target, sample_repo, run_eosfix):
    folder = sample_repo("llama3-healthy")
    result = run_eosfix("upload", folder, REPO)
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: eosfix upload FOLDER REPO_ID is deprecated and will stop working in the next "
        f"release: give REPO_ID FOLDER, the order hf upload takes (eosfix upload {REPO} {folder})\n"
    )
    assert len(target.commits_received) == 1


def test_cli_missing_folder_is_a_usage_error(target, tmp_path, run_eosfix):
    result = run_eosfix("upload", REPO, tmp_path / "nowhere")
    assert result.exit_code == 2
    assert "Invalid value for 'FOLDER'" in result.stderr
    assert "no such folder" in result.stderr
    assert target.commits_received == []
