"""Bringing a listing's files in by content: repos made from one base model identified by
paths-info once an earlier one of the family is in, each content downloaded once, the
quotas' balance kept, and the same requests however the threads run."""
# ruff: noqa: F811  (the `fake_hub` fixture is imported, then requested by name)

from __future__ import annotations

import collections
import json
import threading

import pytest

from eosfix.batch import hubfetch
from eosfix.batch.hubfetch import Plan, Sequence, family_of
from eosfix.sources.hub.http import API, RESOLVERS
from eosfix.sources.hub.read import HubEntry, HubReader
from eosfix.sources.hub.store import Store
from tests.support.hubrepos import CHATML_TOKENS, sample_files, tokenizer_json
from tests.support.hubserver import fake_hub  # noqa: F401  (fixture)

SHARED = ("chat_template.jinja", "generation_config.json", "tokenizer_config.json")


def family(
    fake_hub, base: str, n: int, *, sample: str = "chatml-missing-im-end", **kw
) -> list[str]:
    """A base repo and ``n`` conversions of it: the same tokenizer and template files, each
    its own config.json (its quantisation), tagged ``base_model:quantized:BASE``."""
    files = sample_files(sample)
    fake_hub.add_repo(base, {**files, "README.md": f"# {base}\n"}, **kw)
    ids = [base]
    config = json.loads(files.get("config.json", b"{}"))
    for i in range(n):
        repo_id = f"conv/{base.split('/')[1]}-q{i}"
        own = json.dumps({**config, "quantization": {"bits": i + 2}}).encode()
        tags = [f"base_model:quantized:{base}"]
        fake_hub.add_repo(repo_id, {**files, "config.json": own}, tags=tags, **kw)
        ids.append(repo_id)
    return ids


def hub_audit(run_eosfix, *args: str) -> dict:
    result = run_eosfix("hub", "--sort", "likes", "--format", "json", *args)
    assert result.exit_code == 1, result.stderr
    return json.loads(result.stdout)


def files_fetched(fake_hub) -> collections.Counter:
    return collections.Counter(
        (r.repo_id, r.path.rsplit("/", 1)[1])
        for r in fake_hub.request_log
        if "/resolve/" in r.path and r.method == "GET"
    )


def entries(payload: dict) -> dict[str, str]:
    return {e["repo_id"]: json.dumps(e) for e in payload["repos"]}


def test_a_family_is_named_by_its_base_model_tag_or_is_its_own():
    tagged = HubEntry("mlx-community/X-4bit", listed={"tags": ["mlx", "base_model:Org/X",
                      "base_model:quantized:Org/X"]})  # fmt: skip
    assert family_of(tagged) == "org/x"
    assert family_of(HubEntry("Org/X", listed={"tags": ["transformers"]})) == "org/x"
    assert family_of(HubEntry("a/b")) == "a/b"


def entry(repo_id: str, base: str | None = None, files: int = 4, **listed) -> HubEntry:
    tags = [f"base_model:quantized:{base}"] if base else []
    names = tuple(f"f{i}.json" for i in range(files))
    return HubEntry(repo_id, sha=f"{abs(hash(repo_id)):040d}"[:40], files=names,
                    listed={"tags": tags, **listed})  # fmt: skip


def test_the_plan_identifies_the_family_after_its_first_and_balances_the_quotas(tmp_path):
    reader = HubReader(store=Store(tmp_path))
    reader.listing_pages = 1
    plan = Plan(reader)
    assert not plan.identify(entry("org/base"))  # nothing of the family here yet
    choices = [plan.identify(entry(f"c/q{i}", "org/base")) for i in range(400)]
    assert sum(choices) > 100
    api, res = reader.listing_pages + plan.api, plan.resolvers
    assert abs(api / 1000 - res / 5000) <= 4 / 5000  # a free account's quotas, balanced
    assert not plan.identify(entry("d/other", "else/base"))  # another family: first
    assert not plan.identify(entry("c/single", "org/base", files=1))  # nothing to save
    assert not plan.identify(entry("c/gated", "org/base", gated="manual"))  # downloaded


def test_the_plan_follows_the_quotas_the_hub_names(tmp_path):
    reader = HubReader(store=Store(tmp_path))
    api, res = reader.http.gate.buckets[API], reader.http.gate.buckets[RESOLVERS]
    api.paced = res.paced = True
    api.quota, res.quota = 1000, 1000  # as many API requests as downloads: identify all
    plan = Plan(reader)
    plan.identify(entry("org/base"))
    assert all(plan.identify(entry(f"c/q{i}", "org/base")) for i in range(50))


def test_a_family_downloads_each_content_once(fake_hub, run_eosfix, monkeypatch):
    ids = family(fake_hub, "org/base", 8)
    for n, repo_id in enumerate(ids):
        fake_hub.repos[repo_id].likes = 100 - n  # the listing's order: the base first
    monkeypatch.setattr(hubfetch, "RESOLVERS_PER_API", 1)  # API requests as many as downloads
    payload = hub_audit(run_eosfix)
    got = files_fetched(fake_hub)
    assert all(count == 1 for count in got.values())
    for path in SHARED:
        assert [r for r, p in got if p == path] == ["org/base"]  # once, by the first
    assert sorted(r for r, p in got if p == "config.json") == sorted(ids)  # each its own
    identified = {r.repo_id for r in fake_hub.request_log if "/paths-info/" in r.path}
    assert identified == set(ids[1:])
    assert payload["summary"]["requests"] == 1 + 4 + 8 * 2  # listing, base, 8 x (paths-info + 1)
    assert {e["verdict"] for e in payload["repos"]} == {"fixable"}


def test_entries_are_those_of_repos_downloaded_whole(fake_hub, run_eosfix, monkeypatch, tmp_path):
    family(fake_hub, "org/base", 6)
    family(fake_hub, "org/llama", 4, sample="llama3-healthy")
    monkeypatch.setattr(hubfetch, "RESOLVERS_PER_API", 1)
    by_content = entries(hub_audit(run_eosfix))
    assert any("/paths-info/" in r.path for r in fake_hub.request_log)
    fake_hub.request_log.clear()
    monkeypatch.setattr(Plan, "identify", lambda self, entry: False)  # every file downloaded
    monkeypatch.setenv("EOSFIX_CACHE", str(tmp_path / "another-store"))
    whole = run_eosfix("hub", "--sort", "likes", "--format", "json")
    assert not any("/paths-info/" in r.path for r in fake_hub.request_log)
    assert entries(json.loads(whole.stdout)) == by_content


def test_tokenizer_json_comes_by_its_sha256_from_the_store(fake_hub, run_eosfix, monkeypatch):
    files = sample_files("chatml-missing-im-end")
    tok = json.loads(files["tokenizer_config.json"])
    del tok["added_tokens_decoder"]  # transformers 5: the ids only in tokenizer.json
    files["tokenizer_config.json"] = json.dumps(tok).encode()
    files["tokenizer.json"] = tokenizer_json(CHATML_TOKENS)
    lfs = ("tokenizer.json", "*.safetensors")
    fake_hub.add_repo("org/base", files, lfs=lfs, likes=10)
    for i in range(3):
        own = {**files, "config.json": f'{{"eos_token_id": 248044, "q": {i}}}'.encode()}
        tags = ["base_model:quantized:org/base"]
        fake_hub.add_repo(f"conv/m{i}", own, tags=tags, lfs=lfs, likes=5 - i)
    monkeypatch.setattr(hubfetch, "RESOLVERS_PER_API", 1)
    payload = hub_audit(run_eosfix)
    assert {e["proposed_eos_token_id"][-1] for e in payload["repos"]} == {248046}
    got = files_fetched(fake_hub)
    assert [r for r, p in got if p == "tokenizer.json"] == ["org/base"]  # then from the store
    cdn = [r for r in fake_hub.request_log if r.path.startswith("/cdn-lfs/")]
    assert len(cdn) == 1


def test_the_same_audit_sends_the_same_requests_however_the_threads_run(
    fake_hub, run_eosfix, monkeypatch, tmp_path
):
    family(fake_hub, "org/base", 12)
    family(fake_hub, "org/llama", 9, sample="llama3-healthy")
    family(fake_hub, "org/glm", 7, sample="glm-next-turn-opener")
    for n, repo in enumerate(sorted(fake_hub.repos.values(), key=lambda r: r.repo_id[::-1])):
        repo.likes = n  # the families interleaved in the listing
    fake_hub.latency = 0.01
    seen = []
    for i, workers in enumerate(("1", "16", "3")):
        monkeypatch.setenv("EOSFIX_CACHE", str(tmp_path / f"store{i}"))
        fake_hub.request_log.clear()
        payload = hub_audit(run_eosfix, "--workers", workers)
        sent = collections.Counter((r.method, r.path) for r in fake_hub.request_log)
        seen.append((sent, entries(payload)))
    assert seen[0] == seen[1] == seen[2]
    assert any("/paths-info/" in path for _, path in seen[0][0])


def test_a_gated_repo_says_so_though_its_family_is_in_the_store(fake_hub, run_eosfix, monkeypatch):
    family(fake_hub, "org/base", 2)
    fake_hub.add_repo(
        "locked/q", sample_files("chatml-missing-im-end"), gated=True,
        tags=["base_model:quantized:org/base"],
    )  # fmt: skip
    monkeypatch.setattr(hubfetch, "RESOLVERS_PER_API", 1)
    result = run_eosfix("hub", "--sort", "likes", "--format", "json")
    locked = {e["repo_id"]: e for e in json.loads(result.stdout)["repos"]}["locked/q"]
    assert locked["error"] == "gated repository: request access and log in (401)"
    assert not [r for r in fake_hub.request_log if r.path.startswith("/api/models/locked/")]


def test_a_repo_sees_only_what_the_repos_before_it_brought_in():
    seq = Sequence(threading.Event())
    first, second, third = seq.number(), seq.number(), seq.number()
    store = {"a": "blob-a"}
    seq.brought(third, "b", store.get)
    store["b"] = "blob-b"
    assert seq.visible(second, "b", store.get) is None  # brought by a later repo
    assert seq.visible(third, "b", store.get) == "blob-b"
    assert seq.visible(first, "a", store.get) == "blob-a"  # here before the run
    seq.brought(first, "b", store.get)  # an earlier repo brought it too
    assert seq.visible(second, "b", store.get) == "blob-b"
    waited = threading.Event()
    worker = threading.Thread(target=lambda: (seq.wait_before(second), waited.set()))
    worker.start()
    assert not waited.wait(0.2)
    seq.finish(first)
    assert waited.wait(5)
    worker.join()


def test_a_repo_waiting_for_those_before_it_gives_up_when_the_audit_stops():
    stopping = threading.Event()
    seq = Sequence(stopping)
    seq.number()
    later = seq.number()
    stopping.set()
    with pytest.raises(hubfetch.Stopped):
        seq.wait_before(later)


def test_audit_slice_streams_results_in_listing_order_with_progress(fake_hub, tmp_path):
    from eosfix.batch.hub import audit_slice
    from eosfix.sources.hub.read import ListingQuery

    ids = family(fake_hub, "base/chat", 4, downloads=7)
    fake_hub.rate_limit(1000, 300, bucket="api")  # the Hub's headers: a quota to report
    seen: list[tuple[str, str, int]] = []
    ticks: list[tuple[int, int | None, str]] = []
    reader = HubReader(store=Store(tmp_path))
    run = audit_slice(
        ListingQuery(search="chat", sort="likes", limit=4),
        on_result=lambda r: seen.append((r.item.repo_id, r.verdict_name, r.item.downloads)),
        on_progress=lambda done, total, status: ticks.append((done, total, status)),
        reader=reader,
    )
    listed = [r.query for r in fake_hub.request_log if r.path == "/api/models"]
    assert listed
    assert listed[0]["search"] == ["chat"]
    query = ListingQuery(search="chat", sort="likes", limit=4)
    order = [e.repo_id for e in HubReader(store=Store(tmp_path / "x")).list_models(query)]
    assert [repo for repo, _, _ in seen] == order
    assert {v for _, v, _ in seen} == {"fixable"}
    assert all(d == 7 for _, _, d in seen)
    assert set(ids) >= {repo for repo, _, _ in seen}
    assert [t[:2] for t in ticks] == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert "api " in ticks[-1][2]
    assert "/1000 left" in ticks[-1][2]
    assert (run.count, run.exit_code, run.source.errors) == (4, 1, [])


def test_audit_slice_stops_early_but_whole(fake_hub, tmp_path):
    from eosfix.batch.hub import audit_slice
    from eosfix.sources.hub.read import ListingQuery

    family(fake_hub, "base/chat", 6)
    stop = threading.Event()
    seen: list[str] = []

    def on_result(result) -> None:
        seen.append(result.item.repo_id)
        stop.set()

    run = audit_slice(
        ListingQuery(search="chat"), on_result=on_result, stop=stop,
        reader=HubReader(store=Store(tmp_path), workers=1),
    )  # fmt: skip
    assert run.interrupted
    assert 1 <= len(seen) < 7
    assert len(set(seen)) == len(seen)
