"""The fake Hub (tests/support/hubserver.py) is faithful enough for the real huggingface_hub
client."""
# ruff: noqa: F811  (the `fake_hub` fixture is imported, then requested by name)

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    hf_hub_download,
    scan_cache_dir,
    snapshot_download,
)
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.support.hubserver import FakeHub, fake_hub, git_sha1  # noqa: F401  (fixture)

REPO = "org/chat-model"
CONFIG = b'{\n  "eos_token_id": 2\n}\n'
FILES = {
    "config.json": CONFIG,
    "tokenizer_config.json": b'{"eos_token": "</s>"}\n',
    "chat_template.jinja": b"{% for m in messages %}{{ m.content }}{% endfor %}",
    "additional_chat_templates/tool_use.jinja": b"{{ tools }}",
    "model.safetensors": b"\0" * 4096,
}
GEN = b'{\n  "eos_token_id": [2, 7]\n}\n'
TOKEN = "hf_fake_secret"


@pytest.fixture
def repo(fake_hub):
    return fake_hub.add_repo(REPO, FILES)


def _cache(fake_hub) -> Path:
    return Path(constants.HF_HUB_CACHE)


# --- downloads & cache layout -------------------------------------------------------------------


def test_fixture_points_huggingface_hub_at_fake(fake_hub, tmp_path):
    assert constants.ENDPOINT == fake_hub.url == os.environ["HF_ENDPOINT"]
    assert fake_hub.url.startswith("http://127.0.0.1:")
    assert Path(constants.HF_HUB_CACHE).is_relative_to(tmp_path)
    assert Path(constants.HF_TOKEN_PATH).is_relative_to(tmp_path)
    assert "HF_TOKEN" not in os.environ
    assert huggingface_hub.hf_api.api.endpoint == fake_hub.url
    assert HfApi().endpoint == fake_hub.url


def test_hf_hub_download_populates_real_cache_layout(fake_hub, repo):
    path = Path(hf_hub_download(REPO, "config.json"))

    storage = _cache(fake_hub) / "models--org--chat-model"
    assert path == storage / "snapshots" / repo.head / "config.json"
    assert path.read_bytes() == CONFIG
    assert path.is_symlink()
    assert os.readlink(path) == f"../../blobs/{git_sha1(CONFIG)}"
    assert (storage / "blobs" / git_sha1(CONFIG)).read_bytes() == CONFIG
    assert (storage / "refs" / "main").read_text() == repo.head
    assert fake_hub.requests == [
        ("HEAD", f"/{REPO}/resolve/main/config.json"),
        ("GET", f"/{REPO}/resolve/main/config.json"),
    ]


def test_nested_file_gets_deeper_relative_symlink(fake_hub, repo):
    path = Path(hf_hub_download(REPO, "additional_chat_templates/tool_use.jinja"))
    assert os.readlink(path) == f"../../../blobs/{git_sha1(b'{{ tools }}')}"
    assert path.read_bytes() == b"{{ tools }}"


def test_snapshot_download_with_patterns_never_fetches_weights(fake_hub, repo):
    folder = Path(snapshot_download(REPO, allow_patterns=["*.json", "*.jinja"]))

    assert folder.name == repo.head
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert got == sorted(p for p in FILES if p != "model.safetensors")
    assert not (folder / "model.safetensors").exists()
    assert not any("model.safetensors" in path for _, path in fake_hub.requests)
    assert "model.safetensors" not in fake_hub.downloads(REPO)
    assert ("GET", f"/api/models/{REPO}/revision/main") in fake_hub.requests
    assert ("GET", f"/api/models/{REPO}/tree/{repo.head}") in fake_hub.requests
    tree_call = next(r for r in fake_hub.request_log if "/tree/" in r.path)
    assert tree_call.query["recursive"] == ["true"]
    # 2.x writes the tree listing cache
    assert (_cache(fake_hub) / "models--org--chat-model" / "trees" / f"{repo.head}.json").is_file()


def test_download_by_commit_sha_and_unchanged_blob_is_shared(fake_hub, repo):
    first = repo.head
    second = fake_hub.push(REPO, {"generation_config.json": GEN}, message="add gen config")
    assert repo.commits == [first, second]
    a = Path(hf_hub_download(REPO, "config.json", revision=first))
    b = Path(hf_hub_download(REPO, "config.json"))
    assert a.parent.name == first
    assert b.parent.name == second
    assert a.resolve() == b.resolve()  # same blob
    assert hf_hub_download(REPO, "config.json", revision=first) == str(a)  # cache shortcut
    assert Path(hf_hub_download(REPO, "generation_config.json")).read_bytes() == GEN


def test_replacing_files_dict_becomes_a_new_commit(fake_hub, repo):
    old = repo.head
    repo.files = {**repo.files, "config.json": b"{}"}
    assert HfApi().model_info(REPO).sha != old
    assert Path(hf_hub_download(REPO, "config.json")).read_bytes() == b"{}"


def test_scan_cache_dir_has_no_warnings(fake_hub, repo):
    snapshot_download(REPO, allow_patterns=["*.json", "*.jinja"])
    HfApi().create_commit(
        REPO,
        [CommitOperationAdd("generation_config.json", GEN)],
        commit_message="fix",
        create_pr=True,
    )
    hf_hub_download(REPO, "generation_config.json", revision="refs/pr/1")

    info = scan_cache_dir()
    assert info.warnings == []
    (cached,) = info.repos
    assert cached.repo_id == REPO
    assert {frozenset(r.refs) for r in cached.revisions} == {
        frozenset({"main"}),
        frozenset({"refs/pr/1"}),
    }


# --- API metadata ---------------------------------------------------------------------------------


def test_model_info(fake_hub, repo):
    api = HfApi()
    info = api.model_info(REPO)
    assert info.id == REPO
    assert info.sha == repo.head
    assert info.private is False
    assert info.gated is False
    assert info.author == "org"
    assert info.last_modified is not None
    assert sorted(s.rfilename for s in info.siblings) == sorted(FILES)

    detailed = api.model_info(REPO, revision=repo.head, files_metadata=True)
    sizes = {s.rfilename: (s.size, s.blob_id) for s in detailed.siblings}
    assert sizes["config.json"] == (len(CONFIG), git_sha1(CONFIG))
    assert huggingface_hub.model_info(REPO).sha == repo.head  # module-level api too
    assert api.repo_exists(REPO)
    assert not api.repo_exists("org/missing")
    assert api.file_exists(REPO, "config.json")
    assert not api.file_exists(REPO, "generation_config.json")


def test_list_repo_tree(fake_hub, repo):
    api = HfApi()
    top = {e.path: e for e in api.list_repo_tree(REPO)}
    assert set(top) == {
        "additional_chat_templates",
        "config.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "model.safetensors",
    }
    assert isinstance(top["additional_chat_templates"], huggingface_hub.hf_api.RepoFolder)
    assert top["config.json"].blob_id == git_sha1(CONFIG)
    assert top["config.json"].size == len(CONFIG)

    everything = {e.path for e in api.list_repo_tree(REPO, recursive=True)}
    assert "additional_chat_templates/tool_use.jinja" in everything
    sub = [e.path for e in api.list_repo_tree(REPO, path_in_repo="additional_chat_templates")]
    assert sub == ["additional_chat_templates/tool_use.jinja"]
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="nope"))

    expanded = {e.path: e for e in api.list_repo_tree(REPO, expand=True)}
    assert expanded["config.json"].last_commit.oid == repo.head
    assert sorted(api.list_repo_files(REPO)) == sorted(FILES)


def test_list_repo_tree_pagination(fake_hub, repo):
    fake_hub.page_size = 2
    paths = [e.path for e in HfApi().list_repo_tree(REPO, recursive=True)]
    assert len(paths) == len(FILES) + 1  # + the directory entry
    assert sum(1 for _, p in fake_hub.requests if "/tree/" in p) == 3


def test_list_models_by_author(fake_hub, repo):
    fake_hub.add_repo("org/other", {"config.json": b"{}"})
    fake_hub.add_repo("someone/else", {"config.json": b"{}"})
    fake_hub.page_size = 1  # forces Link-header pagination
    api = HfApi()
    assert sorted(m.id for m in api.list_models(author="org")) == ["org/chat-model", "org/other"]
    assert [m.id for m in api.list_models(author="org", limit=1)] == ["org/chat-model"]
    assert [m.id for m in api.list_models(search="else")] == ["someone/else"]


def test_list_refs(fake_hub, repo):
    HfApi().create_commit(
        REPO, [CommitOperationAdd("x.json", b"{}")], commit_message="x", create_pr=True
    )
    refs = HfApi().list_repo_refs(REPO, include_pull_requests=True)
    assert [(b.name, b.target_commit) for b in refs.branches] == [("main", repo.head)]
    assert [p.ref for p in refs.pull_requests] == ["refs/pr/1"]


# --- commits & pull requests ----------------------------------------------------------------------


def test_create_commit_opens_pr(fake_hub, repo):
    base = repo.head
    info = HfApi().create_commit(
        REPO,
        [CommitOperationAdd("generation_config.json", GEN)],
        commit_message="Set eos_token_id",
        commit_description="Found by eosfix",
        create_pr=True,
    )
    assert info.pr_url == f"{fake_hub.url}/{REPO}/discussions/1"
    assert info.pr_num == 1
    assert info.pr_revision == "refs/pr/1"
    assert info.oid == repo.refs["refs/pr/1"]
    assert repo.head == base  # main untouched

    (received,) = fake_hub.commits_received
    assert received["create_pr"] is True
    assert received["revision"] == "main"
    assert received["summary"] == "Set eos_token_id"
    assert received["description"] == "Found by eosfix"
    assert received["files"] == {"generation_config.json": GEN}
    assert received["pr_num"] == 1
    # preupload and commit both carry ?create_pr=1
    posts = [r for r in fake_hub.request_log if r.method == "POST"]
    assert [r.path for r in posts] == [
        f"/api/models/{REPO}/preupload/main",
        f"/api/models/{REPO}/commit/main",
    ]
    assert all(r.query["create_pr"] == ["1"] for r in posts)
    assert posts[1].headers["Content-Type"] == "application/x-ndjson"

    # PR = base files + the change; downloadable through refs/pr/1
    pr_file = hf_hub_download(REPO, "generation_config.json", revision="refs/pr/1")
    assert Path(pr_file).read_bytes() == GEN
    assert Path(hf_hub_download(REPO, "config.json", revision="refs/pr/1")).read_bytes() == CONFIG
    assert ("HEAD", f"/{REPO}/resolve/refs%2Fpr%2F1/generation_config.json") in fake_hub.requests
    ref = _cache(fake_hub) / "models--org--chat-model" / "refs" / "refs" / "pr" / "1"
    assert ref.read_text() == info.oid
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "generation_config.json")  # not on main
    assert HfApi().model_info(REPO, revision="refs/pr/1").sha == info.oid


def test_second_pr_gets_next_number_and_push_to_pr(fake_hub, repo):
    api = HfApi()
    one = api.create_commit(
        REPO, [CommitOperationAdd("a.json", b"1")], commit_message="a", create_pr=True
    )
    two = api.create_commit(
        REPO, [CommitOperationAdd("b.json", b"2")], commit_message="b", create_pr=True
    )
    assert (one.pr_num, two.pr_num) == (1, 2)
    upd = api.create_commit(
        REPO,
        [CommitOperationAdd("a.json", b"1b")],
        commit_message="update a",
        revision="refs/pr/1",
    )
    assert upd.pr_url is None
    assert repo.pr_files(1)["a.json"] == b"1b"
    assert fake_hub.commits_received[-1]["revision"] == "refs/pr/1"
    details = api.get_discussion_details(REPO, 1)
    assert [e.oid for e in details.events if e.type == "commit"] == [one.oid, upd.oid]


def test_unchanged_file_is_a_noop_commit(fake_hub, repo):
    info = HfApi().create_commit(
        REPO,
        [CommitOperationAdd("config.json", CONFIG)],
        commit_message="nothing",
        create_pr=True,
    )
    assert info.pr_url is None
    assert info.oid == repo.head
    assert fake_hub.commits_received == []
    assert not any("/commit/" in p for _, p in fake_hub.requests)


def test_commit_to_main_and_delete(fake_hub, repo):
    old = repo.head
    info = HfApi().create_commit(
        REPO,
        [
            CommitOperationAdd("generation_config.json", GEN),
            CommitOperationDelete("chat_template.jinja"),
            CommitOperationDelete("additional_chat_templates/"),
        ],
        commit_message="direct",
    )
    assert info.pr_url is None
    assert repo.head == info.oid != old
    assert repo.commits == [old, info.oid]
    assert "chat_template.jinja" not in repo.files
    assert "additional_chat_templates/tool_use.jinja" not in repo.files
    assert repo.files["generation_config.json"] == GEN
    assert fake_hub.commits_received[0]["deleted"] == [
        "chat_template.jinja",
        "additional_chat_templates/",
    ]
    with pytest.raises(RemoteEntryNotFoundError):
        HfApi().create_commit(
            REPO, [CommitOperationDelete("missing.txt")], commit_message="bad delete"
        )


def test_parent_commit_mismatch_and_write_protection(fake_hub, repo):
    old = repo.head
    fake_hub.push(REPO, {"new.txt": b"x"})
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi().create_commit(
            REPO, [CommitOperationAdd("a", b"a")], commit_message="m", parent_commit=old
        )
    assert exc.value.response.status_code == 412
    # a PR may start from an older parent
    pr = HfApi().create_commit(
        REPO, [CommitOperationAdd("a", b"a")], commit_message="m", parent_commit=old, create_pr=True
    )
    assert "new.txt" not in repo.pr_files(pr.pr_num)

    repo.can_write = False
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi().create_commit(REPO, [CommitOperationAdd("b", b"b")], commit_message="m")
    assert exc.value.response.status_code == 403
    assert (
        HfApi()
        .create_commit(REPO, [CommitOperationAdd("b", b"b")], commit_message="m", create_pr=True)
        .pr_url
    )


def test_create_pr_on_non_branch_revision_fails(fake_hub, repo):
    with pytest.raises(RevisionNotFoundError):
        HfApi().create_commit(
            REPO,
            [CommitOperationAdd("a", b"a")],
            commit_message="m",
            revision=repo.head,
            create_pr=True,
        )


# --- discussions ----------------------------------------------------------------------------------


def test_discussions_list_and_details(fake_hub, repo):
    api = HfApi()
    info = api.create_commit(
        REPO,
        [CommitOperationAdd("generation_config.json", GEN)],
        commit_message="Set eos_token_id",
        commit_description="body text",
        create_pr=True,
    )
    api.create_discussion(REPO, "A question")

    listed = list(api.get_repo_discussions(REPO))
    assert [(d.num, d.is_pull_request) for d in listed] == [(2, False), (1, True)]
    (pr,) = api.get_repo_discussions(REPO, discussion_type="pull_request", discussion_status="open")
    assert pr.title == "Set eos_token_id"
    assert pr.author == "eosfix-user"
    assert pr.status == "open"
    assert pr.git_reference == "refs/pr/1"
    assert pr.url == info.pr_url

    details = api.get_discussion_details(REPO, 1)
    assert details.is_pull_request
    assert details.target_branch == "refs/heads/main"
    assert details.merge_commit_oid is None
    assert details.conflicting_files == []
    assert details.events[0].content == "body text"
    assert details.events[-1].oid == info.oid == repo.refs["refs/pr/1"]
    assert '+  "eos_token_id": [2, 7]' in details.diff
    assert "generation_config.json" in details.diff

    with pytest.raises(HfHubHTTPError):
        api.get_discussion_details(REPO, 99)


def test_discussion_comment_close_and_merge(fake_hub, repo):
    api = HfApi()
    api.create_commit(
        REPO, [CommitOperationAdd("a.json", b"1")], commit_message="a", create_pr=True
    )
    api.create_commit(
        REPO,
        [CommitOperationAdd("generation_config.json", GEN)],
        commit_message="g",
        create_pr=True,
    )
    assert api.comment_discussion(REPO, 1, "superseded").content == "superseded"
    assert api.change_discussion_status(REPO, 1, "closed").new_status == "closed"
    assert [d.num for d in api.get_repo_discussions(REPO, discussion_status="open")] == [2]

    api.merge_pull_request(REPO, 2)
    details = api.get_discussion_details(REPO, 2)
    assert details.status == "merged"
    assert details.merge_commit_oid == repo.head
    assert repo.files["generation_config.json"] == GEN
    assert "a.json" not in repo.files


# --- auth, errors and injected failures -----------------------------------------------------------


def test_unknown_repo_revision_and_file(fake_hub, repo):
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info("org/missing")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/missing", "config.json")
    with pytest.raises(RevisionNotFoundError):
        HfApi().model_info(REPO, revision="nope")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, "config.json", revision="nope")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "generation_config.json")
    marker = _cache(fake_hub) / "models--org--chat-model" / ".no_exist" / repo.head
    assert (marker / "generation_config.json").is_file()
    unrouted = [r for r in fake_hub.request_log if r.path.startswith("/api/nothing")]
    assert unrouted == []


def test_unknown_route_is_404_and_logged(fake_hub):
    r = httpx2.get(f"{fake_hub.url}/api/nothing/here")
    assert r.status_code == 404
    assert ("GET", "/api/nothing/here") in fake_hub.requests


def test_gated_repo(fake_hub):
    repo = fake_hub.add_repo("org/gated", {"config.json": CONFIG}, gated=True)
    info = HfApi().model_info("org/gated")  # metadata stays public, like the real Hub
    assert info.gated == "manual"
    with pytest.raises(GatedRepoError) as exc:
        hf_hub_download("org/gated", "config.json")
    assert exc.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as exc:
        hf_hub_download("org/gated", "config.json", token=TOKEN)
    assert exc.value.response.status_code == 403
    repo.gated_access = True
    assert Path(hf_hub_download("org/gated", "config.json", token=TOKEN)).read_bytes() == CONFIG
    repo.gate_api = True
    repo.gated_access = False
    with pytest.raises(GatedRepoError):
        HfApi().model_info("org/gated")


@pytest.mark.parametrize("fake_hub", [{"token": TOKEN}], indirect=True)
def test_private_repo_requires_token(fake_hub):
    fake_hub.add_repo("org/private", {"config.json": CONFIG}, private=True)
    fake_hub.add_repo("org/public", {"config.json": CONFIG})
    with pytest.raises(RepositoryNotFoundError) as exc:
        HfApi().model_info("org/private")
    assert exc.value.response.status_code == 401
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/private", "config.json")
    assert [m.id for m in HfApi().list_models(author="org")] == ["org/public"]

    api = HfApi(token=TOKEN)
    assert api.model_info("org/private").private is True
    assert Path(hf_hub_download("org/private", "config.json", token=TOKEN)).read_bytes() == CONFIG
    assert [m.id for m in api.list_models(author="org")] == ["org/private", "org/public"]
    last = fake_hub.request_log[-1]
    assert last.headers["Authorization"] == f"Bearer {TOKEN}"

    with pytest.raises(HfHubHTTPError) as exc:
        HfApi(token="hf_wrong").model_info("org/public")
    assert exc.value.response.status_code == 401
    assert not isinstance(exc.value, RepositoryNotFoundError)

    # token saved by `hf auth login` lands in the temporary HF_HOME
    Path(constants.HF_TOKEN_PATH).write_text(TOKEN)
    assert HfApi().model_info("org/private").private is True
    assert HfApi().whoami()["name"] == "eosfix-user"


def test_whoami(fake_hub):
    assert HfApi(token=TOKEN).whoami()["name"] == "eosfix-user"
    with pytest.raises(huggingface_hub.errors.LocalTokenNotFoundError):
        HfApi().whoami()  # no token anywhere


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, RepositoryNotFoundError),
        (403, GatedRepoError),
        (404, RepositoryNotFoundError),
        (429, HfHubHTTPError),
        (500, HfHubHTTPError),
    ],
)
def test_injected_status_maps_to_client_errors(fake_hub, repo, status, error):
    fake_hub.fail(REPO, status)
    start = time.monotonic()
    with pytest.raises(error) as exc:
        HfApi().model_info(REPO)
    assert exc.value.response.status_code == status
    assert time.monotonic() - start < 3


def test_injected_failure_respects_times_match_and_headers(fake_hub, repo):
    fake_hub.fail(REPO, 403, times=1, headers={"X-Error-Code": None}, match=r"/revision/")
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi().model_info(REPO, revision="main")
    assert not isinstance(exc.value, RepositoryNotFoundError)
    assert exc.value.response.status_code == 403
    assert HfApi().model_info(REPO, revision="main").sha == repo.head
    fake_hub.fail("*", 500, method="POST")
    assert HfApi().model_info(REPO).sha == repo.head
    fake_hub.clear_failures()


def test_429_on_download_is_retried_quickly(fake_hub, repo):
    fake_hub.fail(REPO, 429, times=2, match=r"/resolve/")
    start = time.monotonic()
    path = hf_hub_download(REPO, "config.json")
    assert Path(path).read_bytes() == CONFIG
    assert time.monotonic() - start < 3
    heads = [p for m, p in fake_hub.requests if m == "HEAD"]
    assert len(heads) == 3
    assert fake_hub.backoff_sleeps  # the client backed off (instantly, thanks to the fixture)


def test_persistent_500_gives_up_quickly(fake_hub, repo):
    fake_hub.fail(REPO, 500, match=r"/resolve/")
    start = time.monotonic()
    with pytest.raises(LocalEntryNotFoundError):
        hf_hub_download(REPO, "config.json")
    assert time.monotonic() - start < 5


def test_dropped_connection(fake_hub, repo):
    # API calls that go through http_backoff (tree listing, preupload) retry a dropped connection
    fake_hub.fail(REPO, 0, times=1, match=r"/tree/")
    assert len(list(HfApi().list_repo_tree(REPO))) == 5
    assert fake_hub.request_log[0].status == 0
    # huggingface_hub quirk: the first HEAD of hf_hub_download runs without retries and only
    # catches ConnectError/TimeoutException, so a dropped connection surfaces as-is
    fake_hub.fail(REPO, 0, times=1, match=r"/resolve/")
    with pytest.raises(httpx2.RemoteProtocolError):
        hf_hub_download(REPO, "config.json")
    assert Path(hf_hub_download(REPO, "config.json")).read_bytes() == CONFIG


def test_slow_server_times_out_then_recovers(fake_hub, repo):
    fake_hub.fail(REPO, 200, times=1, delay=1.0, match=r"/resolve/")
    start = time.monotonic()
    path = hf_hub_download(REPO, "config.json", etag_timeout=0.2)
    assert Path(path).read_bytes() == CONFIG
    assert time.monotonic() - start < 3
    fake_hub.fail(REPO, 200, times=1, delay=1.0)
    with pytest.raises(httpx2.TimeoutException):
        HfApi().model_info(REPO, timeout=0.2)


def test_persistent_failures_on_snapshot_download_raise(fake_hub, repo):
    fake_hub.fail(REPO, 404)
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download(REPO)


# --- lifecycle ------------------------------------------------------------------------------------


def test_context_manager_stops_cleanly():
    with FakeHub() as hub:
        hub.add_repo("a/b", {"x.json": b"{}"})
        with httpx2.Client() as client:
            r = client.get(f"{hub.url}/api/models/a/b")
            assert r.json()["sha"] == hub.repos["a/b"].head
            r = client.head(f"{hub.url}/a/b/resolve/main/x.json")
            assert r.headers["ETag"] == f'"{git_sha1(b"{}")}"'
            assert r.headers["X-Repo-Commit"] == hub.repos["a/b"].head
            url = hub.url
        # a keep-alive connection still open when the server stops must not block stop()
        keep = httpx2.Client()
        keep.get(f"{url}/api/models/a/b")
    keep.close()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"{url}/api/models/a/b")


def test_commit_sha_is_deterministic():
    with FakeHub() as one, FakeHub() as two:
        a = one.add_repo("a/b", {"x.json": b"{}", "y": b"1"})
        b = two.add_repo("a/b", {"y": b"1", "x.json": b"{}"})
        assert a.head == b.head
        assert len(a.head) == 40
        assert json.loads(json.dumps(a.commits)) == [a.head]


def test_count_quota_refuses_every_nth_request_whatever_the_time(fake_hub, repo):
    fake_hub.rate_limit_count(2, retry_after=3)
    url = f"{fake_hub.url}/{REPO}/resolve/main/config.json"
    answers = []
    for _ in range(7):
        r = httpx2.get(url)
        answers.append((r.status_code, r.headers.get("Retry-After"), "RateLimit" in r.headers))
    ok, refused = (200, None, False), (429, "3", False)
    assert answers == [ok, ok, refused, ok, ok, refused, ok]
    assert httpx2.get(f"{fake_hub.url}/api/models/{REPO}").status_code == 200  # other bucket


# --- the listing, identity before download, LFS, quotas: as the Hub documents them ---------------


def _slice(fake_hub):
    """Four repos with what the listing says of them."""
    fake_hub.add_repo("base/chat", FILES, tags=["conversational"], downloads=50, likes=3)
    fake_hub.add_repo(
        "mlx-community/chat-4bit", FILES, tags=["mlx", "conversational",
        "base_model:quantized:base/chat"], library_name="mlx", downloads=90, likes=1,
        pipeline_tag="text-generation",
    )  # fmt: skip
    fake_hub.add_repo(
        "someone/chat-8bit", {**FILES, "config.json": b"{}"}, tags=["mlx"],
        library_name="mlx", downloads=10, likes=9, pipeline_tag="text-generation",
    )  # fmt: skip
    fake_hub.add_repo("base/plain", {"config.json": b"{}"}, downloads=70)


def test_listing_selects_and_sorts_as_list_models_asks(fake_hub):
    _slice(fake_hub)
    api = HfApi()

    def ids(**kw):
        return [m.id for m in api.list_models(**kw)]

    assert ids(filter="mlx") == ["mlx-community/chat-4bit", "someone/chat-8bit"]
    assert ids(filter=["mlx", "conversational"]) == ["mlx-community/chat-4bit"]  # all of them
    assert ids(filter="base_model:quantized:base/chat") == ["mlx-community/chat-4bit"]
    assert ids(pipeline_tag="text-generation", sort="likes") == [
        "someone/chat-8bit",
        "mlx-community/chat-4bit",
    ]
    assert ids(sort="downloads") == [
        "mlx-community/chat-4bit", "base/plain", "base/chat", "someone/chat-8bit",
    ]  # fmt: skip
    assert ids(search="CHAT-", author="someone") == ["someone/chat-8bit"]
    sent = [r.query for r in fake_hub.request_log if r.path == "/api/models"]
    assert sent[0]["filter"] == ["mlx"]
    assert sent[-1]["search"] == ["CHAT-"]


def test_limit_is_the_page_size_and_the_next_link_keeps_the_query(fake_hub):
    _slice(fake_hub)
    first = httpx2.get(f"{fake_hub.url}/api/models", params={"sort": "downloads", "limit": 2})
    assert [m["id"] for m in first.json()] == ["mlx-community/chat-4bit", "base/plain"]
    second = httpx2.get(first.links["next"]["url"])
    assert [m["id"] for m in second.json()] == ["base/chat", "someone/chat-8bit"]
    assert "next" not in second.links
    api = HfApi()
    assert [m.id for m in api.list_models(sort="downloads", limit=3)] == [
        "mlx-community/chat-4bit", "base/plain", "base/chat",
    ]  # fmt: skip


def test_listing_items_carry_what_expand_names_and_file_names_only(fake_hub):
    _slice(fake_hub)
    url = f"{fake_hub.url}/api/models"
    plain = httpx2.get(url, params={"author": "base"}).json()[0]
    assert "siblings" not in plain
    assert "sha" not in plain
    assert plain["downloads"] == 50
    assert plain["tags"] == ["conversational", "transformers"]  # with its library
    query = [("author", "mlx-community"), ("blobs", "true")]
    query += [("expand", e) for e in ("sha", "siblings", "tags", "downloads")]
    (item,) = httpx2.get(url, params=query).json()
    assert set(item) == {"_id", "id", "sha", "siblings", "tags", "downloads"}
    assert {"rfilename": "config.json"} in item["siblings"]  # names only, blobs or not
    assert all(set(s) == {"rfilename"} for s in item["siblings"])
    refused = httpx2.get(url, params={"expand": "usedStorage"})
    assert refused.status_code == 400  # only on one repo's route


def test_config_is_the_hubs_parsed_subset(fake_hub):
    tok = {"eos_token": "<|im_end|>", "chat_template": "{{ x }}", "added_tokens_decoder": {}}
    files = {
        "config.json": json.dumps({"model_type": "qwen3", "eos_token_id": 7}).encode(),
        "tokenizer_config.json": json.dumps(tok).encode(),
        "generation_config.json": b'{"eos_token_id": 7}',
        "chat_template.jinja": b"{{ y }}",
    }
    fake_hub.add_repo("org/q", files)
    (item,) = HfApi().list_models(author="org", expand=["config"])
    assert item.config == {
        "model_type": "qwen3",
        "tokenizer_config": {"eos_token": "<|im_end|>", "chat_template": "{{ x }}"},
        "chat_template_jinja": "{{ y }}",
    }  # no eos_token_id, no added_tokens_decoder, nothing of generation_config.json
    fake_hub.add_repo("org/g", {"m.gguf": b"GGUF"}, gguf={"architecture": "qwen3"})
    assert HfApi().model_info("org/g", expand=["gguf", "config"]).gguf == {"architecture": "qwen3"}


def test_paths_info_names_each_content_and_lfs_files_by_sha256(fake_hub):
    big = b"x" * 1000
    files = {**FILES, "tokenizer.json": big, "model.safetensors": b"\0" * 64}
    fake_hub.add_repo(REPO, files, lfs=("tokenizer.json", "*.safetensors"))
    api = HfApi()
    asked = ["config.json", "tokenizer.json", "missing.json", "additional_chat_templates"]
    got = {e.path: e for e in api.get_paths_info(REPO, asked)}
    assert set(got) == {"config.json", "tokenizer.json", "additional_chat_templates"}
    assert got["config.json"].blob_id == git_sha1(CONFIG)
    assert got["config.json"].lfs is None
    lfs = got["tokenizer.json"].lfs
    assert lfs.sha256 == hashlib.sha256(big).hexdigest()
    assert lfs.size == 1000
    assert got["tokenizer.json"].blob_id != git_sha1(big)  # the pointer's, not the content's
    detailed = api.model_info(REPO, files_metadata=True)
    by_name = {s.rfilename: s for s in detailed.siblings}
    assert by_name["tokenizer.json"].lfs.sha256 == lfs.sha256
    form = {"paths": [f"p{i}" for i in range(1001)]}
    too_many = httpx2.post(f"{fake_hub.url}/api/models/{REPO}/paths-info/main", data=form)
    assert too_many.status_code == 413


def test_an_lfs_resolve_redirects_to_the_cdn_with_the_files_metadata(fake_hub):
    big = b"y" * 2048
    repo = fake_hub.add_repo(REPO, {**FILES, "tokenizer.json": big}, lfs=("tokenizer.json",))
    url = f"{fake_hub.url}/{REPO}/resolve/main/tokenizer.json"
    hop = httpx2.get(url)
    sha256 = hashlib.sha256(big).hexdigest()
    assert hop.status_code == 302
    assert hop.headers["X-Linked-Etag"] == f'"{sha256}"'
    assert hop.headers["X-Linked-Size"] == "2048"
    assert hop.headers["X-Repo-Commit"] == repo.head
    assert hop.headers["Location"].startswith(fake_hub.cdn_url)  # another origin
    followed = httpx2.get(url, follow_redirects=True)
    assert followed.content == big
    assert "X-Repo-Commit" not in followed.headers  # the CDN's own answer
    ranged = httpx2.get(hop.headers["Location"], headers={"Range": "bytes=0-3"})
    assert (ranged.status_code, ranged.content) == (206, b"yyyy")
    # huggingface_hub reads the metadata from the redirect and downloads from the CDN
    path = Path(hf_hub_download(REPO, "tokenizer.json"))
    assert path.read_bytes() == big
    assert path.resolve().name == sha256  # the HF cache names an LFS blob by its sha256
    meta = huggingface_hub.get_hf_file_metadata(huggingface_hub.hf_hub_url(REPO, "tokenizer.json"))
    assert (meta.etag, meta.size, meta.commit_hash) == (sha256, 2048, repo.head)


def test_quota_headers_come_on_every_answer_of_the_bucket(fake_hub, repo):
    fake_hub.rate_limit(3, window=60, bucket="api")
    fake_hub.rate_limit(100, window=60, bucket="resolvers")
    info = f"{fake_hub.url}/api/models/{REPO}"
    start = time.monotonic()
    answers = [httpx2.get(info) for _ in range(4)]
    took = time.monotonic() - start
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[0].headers["RateLimit"] == '"api";r=2;t=60'
    assert answers[0].headers["RateLimit-Policy"] == '"fixed window";"api";q=3;w=60'
    # what is left of the window the first request opened, however long the four took
    retry = int(answers[3].headers["Retry-After"])
    assert 60 - math.ceil(took) <= retry <= 60
    assert answers[3].headers["RateLimit"] == f'"api";r=0;t={retry}'
    file = httpx2.get(f"{fake_hub.url}/{REPO}/resolve/main/config.json")
    assert file.status_code == 200  # the other bucket
    assert file.headers["RateLimit"].startswith('"resolvers";r=99;')
    parsed = huggingface_hub.utils.parse_ratelimit_headers(answers[1].headers)
    assert (parsed.resource_type, parsed.remaining, parsed.limit, parsed.window_seconds) == (
        "api", 1, 3, 60,
    )  # fmt: skip


def test_the_population_is_shaped_like_the_hubs_conversions():
    from tests.support.hubpopulation import population

    specs = population(600, seed=3)
    assert [s.repo_id for s in specs] == [s.repo_id for s in population(600, seed=3)]
    assert len({s.repo_id for s in specs}) == 600
    families: dict[str, list] = {}
    for s in specs:
        base = next((t.rsplit(":", 1)[1] for t in s.tags if t.startswith("base_model:")), None)
        if base is not None:
            families.setdefault(base, []).append(s)
    sizes = [len(members) for members in families.values()]
    assert min(sizes) >= 1
    assert max(sizes) <= 30
    assert sum(sizes) > 300  # most repos belong to a family
    by_id = {s.repo_id: s for s in specs}
    for base, members in families.items():
        shared = by_id[base].files["tokenizer_config.json"]
        files = [m.files for m in members if m.library != "gguf"]
        assert all(f["tokenizer_config.json"] == shared for f in files)  # byte for byte
        configs = [f["config.json"] for f in files]
        assert all(c != by_id[base].files["config.json"] for c in configs)  # their own
    libraries = {s.library for s in specs}
    assert libraries == {"transformers", "mlx", "gguf"}
    assert any("config.json" not in s.files for s in specs)  # tokenizer-only repos
    assert any("tokenizer.json" in s.files and b"added_tokens_decoder" not in
               s.files["tokenizer_config.json"] for s in specs)  # fmt: skip
