"""What a string a user types stands for (``eosfix.targets.parse``): every spelling of a Hub
repo people paste, one refusal wording, local paths first."""

from __future__ import annotations

import pytest

from eosfix.core.errors import NotChecked
from eosfix.targets.parse import HubTarget, LocalFolder, LocalGguf, parse, parse_hub

REPO = "acme/chatml-missing-im-end"


@pytest.mark.parametrize(
    ("given", "revision", "file", "quant"),
    [
        (REPO, None, None, None),
        (f"  {REPO}\n", None, None, None),
        (f"hf://{REPO}", None, None, None),
        (f"hf.co/{REPO}", None, None, None),
        (f"huggingface.co/{REPO}", None, None, None),
        (f"https://huggingface.co/{REPO}", None, None, None),
        (f"https://www.huggingface.co/{REPO}/", None, None, None),
        (f"https://hf.co/{REPO}", None, None, None),
        (f"https://huggingface.co/models/{REPO}", None, None, None),
        (f"https://huggingface.co/{REPO}/tree/v1.0", "v1.0", None, None),
        (f"https://huggingface.co/{REPO}/tree/refs%2Fpr%2F3", "refs/pr/3", None, None),
        (f"https://huggingface.co/{REPO}/blob/main/M-Q4_K_M.gguf", "main", "M-Q4_K_M.gguf", None),
        (f"https://huggingface.co/{REPO}/resolve/abc123/sub/M.gguf?download=true", "abc123",
         "sub/M.gguf", None),
        (f"https://huggingface.co/{REPO}/blob/main/config.json", "main", "config.json", None),
        (f"{REPO}@v2", "v2", None, None),
        (f"{REPO}:Q4_K_M", None, None, "Q4_K_M"),
        (f"hf.co/{REPO}:q4_k_m", None, None, "q4_k_m"),
        (f"{REPO}@v2:Q8_0", "v2", None, "Q8_0"),
        (f"{REPO}/M-Q4_K_M.gguf", None, "M-Q4_K_M.gguf", None),
        (f"hf://{REPO}@v2/sub/M.gguf", "v2", "sub/M.gguf", None),
    ],
)  # fmt: skip
def test_every_spelling_names_the_repo_and_what_was_given(given, revision, file, quant):
    target = parse_hub(given)
    assert (target.repo_id, target.revision, target.file, target.quant) == (
        REPO, revision, file, quant,
    )  # fmt: skip
    assert parse(given, local=False) == target


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("hf://not a repo", "not a Hub repo id or URL"),
        ("hf.co/org", "not a Hub repo id or URL"),
        ("hf.co//etc/passwd", "not a Hub repo id or URL"),
        ("hf.co/org/../name", "not a Hub repo id or URL"),
        ("org/name:", "not a quant label"),
        ("hf.co/org/name:../x", "not a quant label"),
        ("https://evil.example/org/name", "another site"),
        ("https://huggingface.co/datasets/org/name", "a dataset, not a model repo"),
        ("https://huggingface.co/spaces/org/name", "a space, not a model repo"),
        ("https://huggingface.co/org/name/blob/main", "names no file"),
        ("/etc/passwd", "not a Hub repo id or URL"),
        ("org/name?x=1", "not a Hub repo id or URL"),
    ],
)
def test_a_text_that_names_no_repo_is_one_line_naming_it(given, why):
    with pytest.raises(NotChecked) as caught:
        parse_hub(given)
    assert why in caught.value.message
    assert caught.value.path == (given.strip() or "''")


def test_a_local_path_wins_and_is_never_read_without_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert parse("org/name") == LocalFolder(
        "org/name", tmp_path.joinpath("org/name").relative_to(tmp_path)
    )
    assert isinstance(parse("org/name", local=False), HubTarget)
    assert parse("hf://org/name") == HubTarget("org/name", given="hf://org/name")


def test_org_name_that_names_no_path_is_a_hub_id_that_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = parse("models/qwen")
    assert target == HubTarget("models/qwen", local_name=True)
    assert target.not_local == "; no local folder or file models/qwen exists either"
    assert parse("hf.co/models/qwen").not_local == ""  # spelled for the Hub: no such doubt


def test_a_config_file_names_its_folder_and_a_later_shard_its_first(tmp_path, monkeypatch):
    from tests.support import ggufs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "tokenizer_config.json").write_text("{}")
    assert parse("m/tokenizer_config.json") == LocalFolder(
        "m/tokenizer_config.json", tmp_path.joinpath("m").relative_to(tmp_path)
    )
    first = ggufs.chatml(tmp_path / "s.gguf", shards=3)
    later = first.with_name(first.name.replace("00001", "00002"))
    assert parse(str(later)) == LocalGguf(str(later), first)


def test_an_empty_argument_is_refused_not_taken_for_the_current_folder():
    with pytest.raises(NotChecked, match="empty"):
        parse("")
