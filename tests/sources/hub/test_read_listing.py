"""The Hub read for a slice: the listing's query and fields, content ids before download
(paths-info), downloads checked against the Hub's ids (LFS files too), and the store's index of
contents by the Hub's id."""
# ruff: noqa: F811  (the `fake_hub` fixture is imported, then requested by name)

from __future__ import annotations

import hashlib

import pytest

from eosfix.sources.hub.http import BadAnswer
from eosfix.sources.hub.read import HubReader, ListingQuery
from eosfix.sources.hub.store import Store, git_sha1
from tests.support.hubserver import fake_hub  # noqa: F401  (fixture)

TOKENIZER = b'{"added_tokens": []}' + b" " * 500
FILES = {
    "config.json": b'{"eos_token_id": 2}',
    "tokenizer_config.json": b'{"eos_token": "</s>"}',
    "tokenizer.json": TOKENIZER,
    "model.safetensors": b"\0" * 32,
    "README.md": b"# x\n",
}


def _hub(fake_hub):
    kw = {"lfs": ("tokenizer.json", "*.safetensors")}
    fake_hub.add_repo("base/m", FILES, downloads=5, tags=["conversational"], **kw)
    fake_hub.add_repo(
        "mlx-community/m-4bit", {**FILES, "config.json": b'{"eos_token_id": 2, "q": 4}'},
        downloads=9, tags=["mlx", "base_model:quantized:base/m"], library_name="mlx", **kw,
    )  # fmt: skip
    fake_hub.add_repo("other/m-8bit", FILES, downloads=1, tags=["mlx"], gated=True, **kw)


def test_a_query_is_sent_in_list_models_words():
    query = ListingQuery("org", "qwen", ("mlx", "conversational"), "text-generation", "modified", 5)
    assert query.params() == [
        ("author", "org"), ("search", "qwen"), ("filter", "mlx"), ("filter", "conversational"),
        ("pipeline_tag", "text-generation"), ("sort", "lastModified"), ("limit", "5"),
    ]  # fmt: skip
    assert query.label == (
        "models?author=org&search=qwen&filter=mlx&filter=conversational"
        "&pipeline_tag=text-generation&sort=lastModified&limit=5"
    )
    assert ListingQuery(author="org").label == "org"
    assert query.as_json()["filter"] == ["mlx", "conversational"]


def test_the_listing_stops_at_the_limit_and_carries_every_field_asked(fake_hub):
    _hub(fake_hub)
    fake_hub.page_size = 1
    reader = HubReader()
    entries = list(reader.list_models(ListingQuery(filters=("mlx",), sort="downloads", limit=1)))
    assert [e.repo_id for e in entries] == ["mlx-community/m-4bit"]
    assert reader.listing_pages == 1  # the limit reached: no next page asked
    (entry,) = entries
    assert entry.downloads == 9
    assert "base_model:quantized:base/m" in entry.tags
    assert entry.files == ("config.json", "tokenizer_config.json")
    assert entry.tokenizer_json
    assert {s["rfilename"] for s in entry.listed["siblings"]} == set(FILES)
    (sent,) = [r.query for r in fake_hub.request_log if r.path == "/api/models"]
    assert sent["expand"] == ["sha", "siblings", "tags", "gated", "downloads"]
    assert sent["limit"] == ["1"]
    more = list(reader.list_models(ListingQuery(sort="likes"), expand=("gguf",)))
    assert len(more) == 3
    sent = [r.query for r in fake_hub.request_log if r.path == "/api/models"][1]
    assert sent["expand"] == ["sha", "siblings", "gguf"]  # another unit's fields


def test_paths_info_names_contents_by_git_sha1_and_lfs_files_by_sha256(fake_hub):
    _hub(fake_hub)
    reader = HubReader()
    (entry,) = reader.list_models(ListingQuery(author="base"))
    ids = reader.identities(entry, ["config.json", "tokenizer.json", "absent.json"])
    assert ids == {
        "config.json": git_sha1(FILES["config.json"]),
        "tokenizer.json": hashlib.sha256(TOKENIZER).hexdigest(),
    }
    (call,) = [r for r in fake_hub.request_log if "/paths-info/" in r.path]
    assert call.method == "POST"
    assert call.path == f"/api/models/base/m/paths-info/{entry.sha}"  # at the listed commit


def test_a_download_is_checked_against_the_hubs_id_an_lfs_one_too(fake_hub):
    _hub(fake_hub)
    reader = HubReader()
    sha = fake_hub.repos["base/m"].head
    got = reader.fetch("base/m", sha, "tokenizer.json")
    assert got.sha == git_sha1(TOKENIZER)
    assert reader.store.blob_path(got.sha).read_bytes() == TOKENIZER
    assert got.content_id == hashlib.sha256(TOKENIZER).hexdigest()  # X-Linked-Etag, not the CDN's
    got = reader.fetch("base/m", sha, "config.json", git_sha1(FILES["config.json"]))
    assert got.content_id == got.sha == git_sha1(FILES["config.json"])
    with pytest.raises(BadAnswer, match="do not match the id the Hub gave"):
        reader.fetch("base/m", sha, "config.json", "0" * 40)
    fake_hub.fail("*", 200, match="/cdn-lfs/", cut=10)  # the CDN cuts the body short
    with pytest.raises(BadAnswer, match="do not match the Hub's hash"):
        reader.fetch("base/m", sha, "tokenizer.json")


def test_the_store_finds_a_content_by_the_hubs_id(tmp_path):
    store = Store(tmp_path)
    sha256 = hashlib.sha256(TOKENIZER).hexdigest()
    assert store.blob_of(sha256) is None
    assert store.blob_of(git_sha1(TOKENIZER)) is None
    sha = store.add_blob(TOKENIZER, sha256)
    assert sha == git_sha1(TOKENIZER)
    assert store.blob_of(sha256) == sha == store.blob_of(sha)
    other = store.add_blob(b"{}")
    assert store.blob_of(other) == other
    (tmp_path / "blobs" / sha[:2] / sha).unlink()  # the blob is gone: its id says nothing
    assert store.blob_of(sha256) is None
