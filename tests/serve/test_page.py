"""The page's routes, as a browser uses them, against the stand-in Hub: a check by repo id
(no JavaScript needed), dropped files, sign-in (huggingface_hub's mocked OAuth routes) and the
fix PR as a POST with its CSRF token; escaping of everything a repo says; the limits."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")

from eosfix.serve.config import ServeConfig
from eosfix.serve.limits import Limiter, RateLimited
from eosfix.serve.page import CSP
from tests.support.hostile import HOSTILE, hostile_files
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
from tests.support.hubrepos import repo_files
from tests.support.hubserver import GGUF_ORG
from tests.support.serve import USER_TOKEN as TOKEN
from tests.support.serve import XSS, eosfix_prs, xss_repo
from tests.support.service import Page

SCRIPT = "<script>alert(2)</script>"


@pytest.fixture
def config(tmp_path: Path) -> ServeConfig:
    return ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=1000)


@pytest.fixture
def page(fake_hub, config) -> Iterator[Page]:
    with Page(config) as p:
        yield p


def test_the_front_page_has_both_forms_and_a_strict_policy(page):
    reply = page.client().get("/")
    assert reply.status == 200
    assert 'action="/check" method="get"' in reply.text
    assert 'action="/check/files" method="post"' in reply.text
    assert reply.headers["Content-Security-Policy"] == CSP
    assert "script-src 'self';" in CSP
    assert "unsafe-inline" not in CSP
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in reply.text
    assert "style=" not in reply.text


def test_a_broken_repo_shows_turn_end_grid_diff_and_ollama(fake_hub, page):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    reply = page.client().check("org/broken")
    assert reply.status == 200
    text = reply.text
    assert '<code class="special">&lt;|im_end|&gt;</code> id 248046' in text
    assert "<mark>&lt;|im_end|&gt;</mark>" in text  # the excerpt marks the special token
    assert '<a href="/codes#eos001">EOS001</a>' in text
    row = re.search(r'<th scope="row">transformers</th>(.*?)</tr>', text, re.DOTALL)
    assert row is not None
    assert '<td class="bad">✗ misses &lt;|im_end|&gt;</td>' in row.group(1)
    assert '<td class="ok">✓ stops</td>' in row.group(1)
    assert '<span class="add">+    248046</span>' in text
    assert "PARAMETER stop &#34;&lt;|im_end|&gt;&#34;" in text
    assert "eosfix hub org/broken --pr" in text
    assert 'id="pr"' not in text  # no PR open yet
    assert (
        'class="verdict tone-bad" id="verdict" data-verdict="fixable">runs on: fixable</span>'
        in text
    )


def test_a_healthy_repo_has_no_fix(fake_hub, page):
    fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    text = page.client().check("org/healthy").text
    assert 'class="diff"' not in text
    assert "eosfix hub org/healthy --pr" not in text
    row = re.search(r'<th scope="row">transformers</th>(.*?)</tr>', text, re.DOTALL)
    assert row is not None
    assert row.group(1).count('<td class="ok">✓ stops</td>') == 2


@pytest.mark.parametrize(
    "given", ["https://evil.example/x/y", "org/../other", "a/b/c", XSS, "", "org/name?x=1"]
)
def test_anything_but_a_repo_id_is_refused_without_a_request(fake_hub, page, given):
    before = len(fake_hub.requests)
    reply = page.client().check(given)
    assert reply.status == 400
    assert "<img" not in reply.text
    assert "not checked: " in reply.text  # the line eosfix check prints of it
    assert len(fake_hub.requests) == before  # nothing was fetched from anywhere


def test_a_missing_repo_is_a_404_with_one_line(page):
    reply = page.client().check("org/absent")
    assert reply.status == 404
    (line,) = re.findall(r'<p class="where problem" id="error" role="alert">(.*?)</p>', reply.text)
    assert line == "org/absent: repository not found (404)"  # eosfix check's line


def test_markup_in_token_texts_is_escaped_everywhere(fake_hub, page):
    fake_hub.add_repo("org/xss", xss_repo())
    text = page.client().check("org/xss").text
    assert "<img" not in text
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in text  # shown, as text


def test_markup_in_a_file_name_is_escaped(page):
    reply = page.client().post_files({XSS + SCRIPT + ".json": b"{}"})
    assert reply.status == 400
    assert "<script>" not in reply.text
    assert "<img" not in reply.text
    assert "&lt;script&gt;" in reply.text
    # named as ignored beside the files a check reads
    given = {k: v for k, v in repo_files(BROKEN).items() if "/" not in k}
    shown = page.client().post_files({**given, XSS + SCRIPT + ".md": b"x"})
    assert shown.status == 200
    assert "<script>" not in shown.text
    assert "<img" not in shown.text
    assert "Ignored (no check reads them): &lt;img" in shown.text


def test_markup_in_a_token_is_escaped_in_the_answer_and_the_excerpt(fake_hub, page):
    fake_hub.add_repo("org/xss", xss_repo())
    text = page.client().check("org/xss").text
    where = re.search(r'<p class="where" id="where">(.*?)</p>', text, re.DOTALL)
    assert where is not None
    assert "<code>&lt;img src=x onerror=&#34;alert(1)&#34;&gt;</code>" in where.group(1)
    assert "<img" not in text


@pytest.mark.parametrize(
    ("ident", "template", "code"),
    [
        h
        for h in HOSTILE
        if h[0]
        in (
            "string-times-huge",
            "deep-recursion",
            "globals",
            "class-mro-subclasses",
            "format-escape",
        )
    ],
)
def test_hostile_templates_are_stopped_and_shown_as_text(fake_hub, page, ident, template, code):
    fake_hub.add_repo(f"org/{ident}", hostile_files(template + SCRIPT))
    reply = page.client().check(f"org/{ident}")
    assert reply.status == 200
    assert f'<a href="/codes#{code.lower()}">{code}</a>' in reply.text
    assert "<script>alert" not in reply.text


def test_dropped_files_are_checked_and_not_kept(page, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    given = {k: v for k, v in repo_files(BROKEN).items() if "/" not in k}
    reply = page.client().post_files(given)
    assert reply.status == 200, reply.text
    assert "EOS001" in reply.text
    assert '<span class="add">+    248046</span>' in reply.text
    assert "eosfix fix ." in reply.text
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("eosfix-page-")]


def test_every_file_a_check_reads_is_taken_and_the_others_named(page):
    """A folder's small files, tokenizer.json among them (without it foreign-stop-ids' 151700
    cannot be told from a token), and a README.md no check reads: checked as `eosfix check`
    checks the folder, the README named as ignored."""
    given = {k: v for k, v in repo_files("foreign-stop-ids").items() if "/" not in k}
    assert "tokenizer.json" in given
    reply = page.client().post_files({**given, "README.md": b"# a model\n"})
    assert reply.status == 200, reply.text
    assert "eos_token_id holds 151700, which is no token: tokenizer.json has 259 tokens" in (
        reply.text
    )
    assert '<p class="note">Ignored (no check reads them): README.md</p>' in reply.text


def test_a_dropped_folders_additional_templates_are_read(page):
    """A browser names each file of a dropped folder by its path in it."""
    files = repo_files("named-templates")
    given = {f"my-model/{name}": data for name, data in files.items()}
    reply = page.client().post_files(given)
    assert reply.status == 200, reply.text
    assert "&lt;|eom_id|&gt;</code> id 128008: written after a tool call" in reply.text
    assert "Ignored" not in reply.text


def test_dropped_files_are_bounded(page, monkeypatch):
    """Each file under the Hub reader's cap for it (tokenizer.json's own), at most MAX_FILES
    files, and a form of no file a check reads is refused, naming what it ignored."""
    from eosfix.serve.page import MAX_FILES
    from eosfix.sources.hub import bounds

    client = page.client()
    monkeypatch.setattr(bounds, "TOKENIZER", bounds.Cap(4096, "tokenizer.json", "test"))
    big = client.post_files({"config.json": b"{}", "tokenizer.json": b" " * 8192})
    assert big.status == 413
    assert "tokenizer.json: larger than" in big.text
    many = {f"notes-{i}.txt": b"x" for i in range(MAX_FILES + 1)}
    assert client.post_files({"config.json": b"{}", **many}).status == 400
    other = client.post_files({"model.safetensors": b"x"})
    assert other.status == 400
    assert "ignored: model.safetensors" in other.text
    assert client.post_files({}).status == 400


def test_a_broken_file_is_named_not_the_work_folder(page):
    reply = page.client().post_files({"generation_config.json": b"{not json"})
    assert reply.status == 200
    assert "generation_config.json" in reply.text
    assert "eosfix-page-" not in reply.text


def test_sign_in_then_open_pr_lands_with_the_fix_once(fake_hub, signed):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    client = signed.client()
    anonymous = client.check("org/broken").text
    assert "Sign in with Hugging Face" in anonymous
    assert 'name="csrf"' not in anonymous
    client.sign_in()
    text = client.check("org/broken").text
    assert "signed in as <strong>eosfix-user</strong>" in text
    csrf = client.csrf(text)
    reply = client.post_form("/pr", {"repo": "org/broken", "csrf": csrf})
    assert reply.status == 200
    assert "Pull request opened." in reply.text
    (pr,) = eosfix_prs(repo)
    assert json.loads(repo.pr_files(pr.num)["generation_config.json"])["eos_token_id"] == [
        248044,
        248046,
    ]
    again = client.check("org/broken").text
    assert 'id="pr"' in again
    assert f"#{pr.num}</a> (already open)" in again
    twice = client.post_form("/pr", {"repo": "org/broken", "csrf": client.csrf(again)})
    assert "already open" in twice.text
    assert len(eosfix_prs(repo)) == 1  # never doubled


def test_open_pr_needs_the_csrf_token_and_a_sign_in(fake_hub, signed):
    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    anonymous = signed.client()
    assert anonymous.post_form("/pr", {"repo": "org/broken", "csrf": "x"}).status == 403
    client = signed.client()
    client.sign_in()
    client.check("org/broken")
    assert client.post_form("/pr", {"repo": "org/broken", "csrf": "forged"}).status == 403
    assert client.post_form("/pr", {"repo": "org/broken"}).status == 403
    assert not eosfix_prs(repo)


def test_the_token_is_never_in_a_page_or_a_log(fake_hub, signed, caplog):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    caplog.set_level(logging.DEBUG)
    client = signed.client()
    client.sign_in()
    text = client.check("org/broken").text
    reply = client.post_form("/pr", {"repo": "org/broken", "csrf": client.csrf(text)})
    assert "Pull request opened." in reply.text
    assert TOKEN not in text
    assert TOKEN not in reply.text
    assert all(TOKEN not in r.getMessage() and TOKEN not in str(r.__dict__) for r in caplog.records)


def test_the_limiter_refuses_past_the_rate_and_refills():
    now = [0.0]
    limiter = Limiter(2, clock=lambda: now[0])
    limiter.take("a")
    limiter.take("a")
    with pytest.raises(RateLimited) as caught:
        limiter.take("a")
    assert caught.value.retry_after == 30
    limiter.take("b")  # another client has its own bucket
    now[0] = 30.0
    limiter.take("a")


def test_a_client_over_its_rate_gets_429_with_retry_after(fake_hub, tmp_path):
    fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=2)
    with Page(config) as p:
        client = p.client()
        assert client.check("org/healthy").status == 200
        assert client.check("org/healthy").status == 200
        third = client.check("org/healthy")
        assert third.status == 429
        assert int(third.headers["Retry-After"]) > 0


def _wait_audit(client, location: str) -> dict:
    import time

    deadline = time.monotonic() + 120
    while True:
        progress = json.loads(client.get(location + "/progress").body)
        if progress["finished"]:
            return progress
        assert time.monotonic() < deadline, progress
        time.sleep(0.05)


def test_an_audit_reaches_the_end_with_chart_table_and_downloads(fake_hub, page):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    fake_hub.add_repo("org/xss", xss_repo())
    client = page.client(follow=False)
    started = client.get("/audit?author=org")
    assert started.status == 303
    location = started.headers["Location"]
    progress = _wait_audit(client, location)
    assert progress["done"] == 3
    assert progress["error"] is None
    text = client.get(location).text
    assert "<img" not in text
    assert '<a href="/check?repo=org/broken">org/broken</a>' in text
    assert "transformers 1 stop, 2 do not (of 3);" in text  # org/broken and org/xss miss one
    assert 'class="chart"' in text
    rows = client.get(location + "/csv").text.splitlines()
    assert rows[0].startswith("repo_id,revision,commit,verdict,problem,runs_on")
    assert sorted(r.split(",")[0] for r in rows[1:]) == ["org/broken", "org/healthy", "org/xss"]
    document = json.loads(client.get(location + "/json").body)
    assert [e["name"] for e in document["repos"]] == ["org/broken", "org/healthy", "org/xss"]
    assert document["summary"]["repos"] == 3


def test_an_audit_takes_only_an_author_name(page):
    client = page.client(follow=False)
    for given in ("https://evil.example", "a/b", XSS, ""):
        reply = client.get("/audit?author=" + __import__("urllib.parse").parse.quote(given))
        assert reply.status == 400
        assert "<img" not in reply.text


@pytest.mark.parametrize("fake_hub", [{"token": "hf_bot_token"}], indirect=True)
def test_a_visitor_never_reads_through_the_bots_token(fake_hub, tmp_path, monkeypatch):
    """On a Space HF_TOKEN is the bot's: a visitor's check and audit go without any token, so
    a private repo the bot can read stays private."""
    monkeypatch.setenv("HF_TOKEN", "hf_bot_token")
    fake_hub.add_repo("org/secret", repo_files(BROKEN), private=True)
    fake_hub.add_repo("org/public", repo_files(BROKEN))
    config = ServeConfig(secret="s", token="hf_bot_token", state_dir=tmp_path / "s")
    with Page(config) as p:
        client = p.client(follow=False)
        secret = client.check("org/secret").text
        assert 'id="error"' in secret
        assert "248046" not in secret
        assert "<mark>" in client.check("org/public").text
        location = client.get("/audit?author=org").headers["Location"]
        _wait_audit(client, location)
        rows = client.get(location + "/csv").text
    assert "org/public" in rows
    assert "org/secret" not in rows
    sent = [r for r in fake_hub.request_log if "authorization" in {k.lower() for k in r.headers}]
    assert not sent, [r.path for r in sent]


def test_slots_run_n_at_once_and_refuse_past_the_waiting_bound():
    import asyncio
    import threading

    from eosfix.serve.limits import Busy, Slots

    gate = threading.Event()
    lock = threading.Lock()
    now = {"running": 0, "most": 0}

    def work() -> int:
        with lock:
            now["running"] += 1
            now["most"] = max(now["most"], now["running"])
        gate.wait(60)
        with lock:
            now["running"] -= 1
        return 1

    async def main() -> list[int]:
        slots = Slots(2)
        tasks = [asyncio.create_task(slots.run(work)) for _ in range(2 + 64)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not (slots.waiting == 64 and now["running"] == 2):  # two run, the rest wait
            assert loop.time() < deadline, (slots.waiting, now)
            await asyncio.sleep(0.01)
        with pytest.raises(Busy):
            await slots.run(work)
        gate.set()
        return await asyncio.gather(*tasks)

    assert sum(asyncio.run(main())) == 66
    assert now["most"] == 2


def test_a_form_over_the_body_bound_is_refused_before_it_is_read(tmp_path):
    config = ServeConfig(secret="s", state_dir=tmp_path / "s", page_files_bytes=4096)
    with Page(config) as p:
        reply = p.client().post_files({"config.json": b"{" + b" " * 8192 + b"}"})
        assert reply.status == 413
        assert b"body too large" in reply.body
        assert p.app.state.guard.counts["too_large"] == 1


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:x"]
)
def test_sign_in_never_redirects_off_the_page(signed, target):
    import urllib.parse

    client = signed.client(follow=False)
    query = urllib.parse.urlencode({"_target_url": target})
    for route in ("login", "callback"):
        reply = client.get(f"/oauth/huggingface/{route}?{query}")
        assert reply.status == 400
    nested = "http://evil.example/oauth/huggingface/callback?_target_url=/"
    reply = client.get(
        "/oauth/huggingface/callback?" + urllib.parse.urlencode({"_target_url": nested})
    )
    assert reply.status == 400
    fine = client.get(
        "/oauth/huggingface/login?" + urllib.parse.urlencode({"_target_url": "/check?repo=a/b"})
    )
    assert fine.status in (302, 307)


def _articles(text: str) -> list[str]:
    return re.findall(r'<article class="result">(.*?)</article>', text, re.DOTALL)


def test_a_gguf_repo_shows_each_group_of_alike_files_by_its_headers(gguf_org, signed):
    """A repo of GGUF files (no tokenizer files) is read by its headers: one verdict per group
    of files with the same stop keys, what llama.cpp and ollama load, escaped, and no pull
    request button even for a signed-in visitor (a header is no pull request's to change)."""
    client = signed.client()
    client.sign_in()
    reply = client.check(f"{GGUF_ORG}/Chat-7B-GGUF")
    assert reply.status == 200
    text = reply.text
    assert "6 GGUF files read by their headers" in text  # the HubCheck's summary
    main, older = _articles(text)
    assert f"{GGUF_ORG}/Chat-7B-GGUF/Chat-7B-Q4_K_M.gguf" in main
    assert 'class="verdict tone-ok" id="verdict" data-verdict="ok">ok</span>' in main
    assert "what llama.cpp -hf and ollama run hf.co load without a tag" in main
    assert "Chat-7B-Q8_0.gguf" in main
    assert '<code class="special">&lt;|END_OF_TURN_TOKEN|&gt;</code>' in main
    assert f"{GGUF_ORG}/Chat-7B-GGUF/Chat-7B-Q2_K.gguf" in older
    assert (
        'class="verdict tone-bad" id="verdict-2" data-verdict="fixable">runs on: fixable</span>'
        in older
    )
    assert "differs from Chat-7B-Q4_K_M.gguf in tokenizer.ggml.eot_token_id" in older
    assert '<a href="/codes#eos201">EOS201</a>' in older
    assert "header key <code>tokenizer.ggml.eot_token_id</code>: (absent) → 100" in older
    assert "No pull request can change a GGUF header" in older
    assert "--override-kv tokenizer.ggml.eot_token_id=int:" in older
    assert "<|END_OF_TURN_TOKEN|>" not in text  # every token text is escaped
    assert 'id="open-pr' not in text  # no params file would help: nothing for a PR to carry
    assert 'id="header"' not in main  # nothing to change in its header
    assert 'id="header-2"' in older
    assert not gguf_org.commits_received


def test_ollamas_hf_co_spelling_picks_one_quant(gguf_org, page):
    reply = page.client().check(f"hf.co/{GGUF_ORG}/Reasoner-GGUF:Q8_0")
    assert reply.status == 200
    (one,) = _articles(reply.text)
    assert f"{GGUF_ORG}/Reasoner-GGUF/Reasoner-Q8_0.gguf" in one
    assert "Stops on <code>&lt;|think_end|&gt;</code>, from the repo&#39;s params file." in one
    assert "A pull request can set the repo's <code>params</code> file to stop on" in one
    assert f"eosfix check hf.co/{GGUF_ORG}/Reasoner-GGUF:Q8_0" in one


def test_a_gguf_repo_is_read_without_the_bots_token(gguf_org, page, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_the_bots_own_token")
    assert 'id="verdict"' in page.client().check(f"{GGUF_ORG}/ChatML-GGUF").text
    read = [r for r in gguf_org.request_log if r.repo_id == f"{GGUF_ORG}/ChatML-GGUF"]
    assert read
    assert gguf_org.cdn_requests
    sent = [r for r in [*read, *gguf_org.cdn_requests] if "authorization" in r.headers]
    assert not sent, [r.path for r in sent]


@pytest.mark.parametrize(
    "given",
    ["hf.co/org/name:../x", "hf.co/org/name:", "hf.co/org/../name", "hf.co//etc/passwd",
     "https://huggingface.co/datasets/org/name", "https://evil.example/org/name"],
)  # fmt: skip
def test_a_hub_spelling_that_names_no_model_repo_is_refused_without_a_request(
    fake_hub, page, given
):
    before = len(fake_hub.requests)
    reply = page.client().check(given)
    assert reply.status == 400
    assert "not checked: " in reply.text
    assert len(fake_hub.requests) == before


@pytest.mark.parametrize(
    "given", ["https://hf.co/org/broken", "huggingface.co/org/broken/tree/main", " org/broken "]
)
def test_every_spelling_of_a_repo_is_checked_as_its_id_is(fake_hub, page, given):
    """A URL pasted from the browser, or the repo id with stray spaces: the same check."""
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    by_id = _articles(page.client().check("org/broken").text)
    assert _articles(page.client().check(given).text) == by_id


def test_a_repo_with_a_tokenizer_and_gguf_files_says_how_to_check_them(fake_hub, page):
    fake_hub.add_repo("org/mixed", {**repo_files(BROKEN), "model-Q4_K_M.gguf": b"GGUF"})
    text = page.client().check("org/mixed").text
    (one,) = _articles(text)
    assert "eosfix hub org/mixed --pr" in one  # checked by its tokenizer: the usual fix
    assert '<p class="note">org/mixed: checked by its tokenizer and config files' in text
    assert "eosfix check org/mixed/model-Q4_K_M.gguf reads its header" in text


def test_an_audit_of_gguf_repos_charts_only_the_runtimes_that_load_them(gguf_org, page):
    """transformers, vLLM... never load a GGUF: the chart counts each runtime over the repos
    it loads, and says how many of the repos checked it counts."""
    client = page.client(follow=False)
    location = client.get(f"/audit?author={GGUF_ORG}").headers["Location"]
    progress = _wait_audit(client, location)
    text = client.get(location).text
    m = re.search(r'<p id="chart-words" class="chart-words">(.*?)</p>', text, re.DOTALL)
    assert m is not None
    words = m.group(1)
    assert "transformers" not in words
    assert "vllm" not in words.lower()
    assert "llama.cpp" in words
    assert "ollama hf.co" in words
    assert f"{progress['done']} repos checked" in text
    assert f"of the {progress['done']} repos have a chat template and a model" in words


def test_mock_sign_in_is_refused_off_the_loopback(fake_hub, tmp_path, monkeypatch):
    """Mocked sign-in signs anyone who reaches the page in as the server's HF_TOKEN: the
    server refuses to listen anywhere but on this machine's loopback."""
    from eosfix.serve.app import create_app
    from eosfix.serve.config import ServeConfigError
    from eosfix.serve.limits import server
    from tests.support.service import free_port

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.delenv("SPACE_ID", raising=False)
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_mock_sign_in=True)
    app = create_app(config)
    try:
        for host in ("0.0.0.0", "::", "192.0.2.7"):
            with pytest.raises(ServeConfigError, match="loopback only"):
                server(app, host=host, port=free_port())
        for host in ("127.0.0.1", "localhost", "::1"):
            server(app, host=host, port=free_port())  # built, not started
    finally:
        app.state.bot.journal.close()
    env = {
        **os.environ,
        "EOSFIX_WEBHOOK_SECRET": "s",
        "EOSFIX_PAGE_MOCK_SIGN_IN": "1",
        "EOSFIX_STATE_DIR": str(tmp_path / "cli-state"),
    }
    command = [sys.executable, "-m", "eosfix", "serve", "--host", "0.0.0.0"]
    run = subprocess.run(
        [*command, "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line == (
        "error: mock sign-in (EOSFIX_PAGE_MOCK_SIGN_IN) listens on the loopback only "
        "(--host 127.0.0.1), not 0.0.0.0"
    )


def test_the_session_cookie_is_an_opaque_id_without_the_token(fake_hub, signed):
    import base64

    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    client = signed.client()
    client.sign_in()
    assert "signed in as" in client.check("org/broken").text
    (cookie,) = list(client.jar)
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie.value), cookie.value
    for part in cookie.value.split("."):
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        assert TOKEN.encode() not in decoded


def test_a_forged_session_cookie_signs_no_one_in(fake_hub, signed, monkeypatch):
    """A cookie carrying a session of the attacker's making (signed with the key
    huggingface_hub derives when no OAuth secret is set, sha256 of "-v1") is no session: no
    pull request for a CSRF token of the attacker's choosing."""
    import base64
    import hashlib
    import time

    from itsdangerous import TimestampSigner

    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    session = {
        "csrf": "chosen-by-the-attacker",
        "oauth_info": {
            "access_token": "hf_forged",
            "expires_at": int(time.time()) + 3600,
            "userinfo": {"preferred_username": "mallory"},
        },
    }
    key = hashlib.sha256(b"-v1").hexdigest()
    data = base64.b64encode(json.dumps(session).encode())
    forged = TimestampSigner(key).sign(data).decode()
    client = signed.client()
    body = b"repo=org%2Fbroken&csrf=chosen-by-the-attacker"
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"session={forged}"}
    reply = client.request("POST", "/pr", body, headers)
    assert reply.status == 403
    assert "mallory" not in reply.text
    assert not eosfix_prs(repo)


def test_behind_a_space_the_rate_counts_the_hop_the_proxy_appends(fake_hub, tmp_path, monkeypatch):
    """On a Space the proxy appends the address it was reached from to X-Forwarded-For; a
    client that sends its own header with a new first hop each time is still one client."""
    fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    monkeypatch.setenv("SPACE_ID", "acme/eosfix")
    monkeypatch.delenv("OAUTH_CLIENT_ID", raising=False)
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=2)
    with Page(config) as p:
        client = p.client()
        statuses = []
        for i in range(4):
            forwarded = {"X-Forwarded-For": f"10.0.{i}.1, 198.51.100.{i}, 203.0.113.9"}
            statuses.append(client.request("GET", "/check?repo=org/healthy", None, forwarded))
        other = client.request(
            "GET", "/check?repo=org/healthy", None, {"X-Forwarded-For": "10.0.0.1, 203.0.113.10"}
        )
    assert [r.status for r in statuses] == [200, 200, 429, 429]
    assert other.status == 200  # another client (another last hop) has its own bucket
