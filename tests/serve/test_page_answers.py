"""What a person reads on the page is the answer first, in their words, true, and the same as
the command line's: where the model stops in each runtime now and after the fix, then the one
action, then the evidence; a plain-text turn end, a base model, a missing repo and an empty
organisation each said as ``eosfix`` says them; every fix the CLI offers for a repo offered
here too (a GGUF repo's params file). Over HTTP against the stand-in Hub; the same states in
a real browser: ``tests/serve/test_page_browser.py``."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")

from eosfix.render.words import NO_TEMPLATE_TEXT
from eosfix.serve.config import ServeConfig
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.hubserver import GGUF_ORG
from tests.support.serve import eosfix_prs
from tests.support.service import Page


@pytest.fixture
def page(fake_hub, tmp_path: Path) -> Iterator[Page]:
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=1000)
    with Page(config) as p:
        yield p


def _text(markup: str) -> str:
    """What a person reads of some markup."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def _by_id(page_text: str, ident: str) -> str:
    m = re.search(rf'<(\w+)[^>]* id="{ident}"[^>]*>(.*?)</\1>', page_text, re.DOTALL)
    assert m is not None, f"no #{ident}"
    return _text(m.group(2))


def _cells(page_text: str) -> list[tuple[str, str]]:
    """Each runtime grid cell: (its class, its words)."""
    found = re.findall(r'<td class="(\w+)">([^<]*)</td>', page_text)
    return [(cls, _text(words)) for cls, words in found if cls != "basis"]


# --- 1. a plain-text turn end ----------------------------------------------------------------


def test_a_plain_text_turn_end_needs_a_stop_string_on_the_page(fake_hub, page):
    fake_hub.add_repo("acme/plain-text-turns", repo_files("plain-text-turns"))
    text = page.client().check("acme/plain-text-turns").text
    cells = _cells(text)
    assert len(cells) == 22  # 11 runtimes, now and after the fix
    assert set(cells) == {("text", "! needs a stop string")}  # never a green "✓ -"
    assert _by_id(text, "verdict") == "needs a stop string"
    assert 'class="verdict tone-warn"' in text
    assert _by_id(text, "where") == (
        "Runs on past the plain text ### Instruction: in every runtime (all 11) unless it is "
        "given that text as a stop string."
    )
    assert text.count("PARAMETER stop &#34;### Instruction:&#34;") == 1


# --- 3. words ----------------------------------------------------------------------------------


def test_a_base_model_says_it_has_no_chat_template(fake_hub, page):
    fake_hub.add_repo("acme/base-model", repo_files("base-model"))
    text = page.client().check("acme/base-model").text
    assert "No turn terminator found" not in text
    assert _by_id(text, "where") == NO_TEMPLATE_TEXT[0].upper() + NO_TEMPLATE_TEXT[1:] + "."
    assert _by_id(text, "verdict") == "no chat template"  # never an internal name
    assert "no_template" not in _text(text)


def test_warnings_are_not_green_like_ok(fake_hub, page):
    fake_hub.add_repo("acme/plain", repo_files("plain-text-turns"))
    fake_hub.add_repo("acme/healthy", repo_files("llama3-healthy"))
    assert 'class="verdict tone-warn"' in page.client().check("acme/plain").text
    assert 'class="verdict tone-ok"' in page.client().check("acme/healthy").text


def test_without_sign_in_the_fix_is_the_command_alone(fake_hub, page):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    text = page.client().check("org/broken").text
    assert "Sign in" not in text  # sign-in is not configured here
    assert "Or run it yourself" not in text  # no "or" without a first way
    assert _by_id(text, "act") == (
        "The fix is a pull request on the repo: its generation_config.json. Open it with your "
        "own Hugging Face token: eosfix hub org/broken --pr"
    )


def test_what_it_stops_on_now_lists_only_what_it_stops_on_now(fake_hub, page):
    """config.json lists 248046 (<|im_end|>), generation_config.json only 248044, which is
    what transformers stops on: 248046 is a stop id after the fix."""
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    text = page.client().check("org/broken").text
    assert _by_id(text, "stops-now") == "248044 <|endoftext|> a special token"
    assert "248046 <|im_end|> ends a turn (added)" in _by_id(text, "stops-after")


def test_excerpts_name_the_probes_messages_not_their_text(fake_hub, page):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    fake_hub.add_repo("acme/stop-inside-turn", repo_files("stop-inside-turn"))
    text = page.client().check("org/broken").text
    (excerpt,) = re.findall(r'<pre class="excerpt"[^>]*>(.*?)</pre>', text, re.DOTALL)
    assert _text(excerpt) == "…<|im_start|>assistant\\n reply<|im_end|>\\n"
    assert '<span class="stand-in">reply</span>' in excerpt
    assert "seen in a conversation that ends with a reply (the chat template)" in text
    assert "probe default/final" not in text
    # a finding's message quoting a probe names its messages too
    other = page.client().check("acme/stop-inside-turn").text
    assert "Eosfix" not in _text(other)
    assert '<span class="stand-in">reasoning</span>' in other


def test_a_missing_repo_is_404_and_a_bad_id_400(page):
    assert page.client().check("org/absent").status == 404
    assert page.client().check("org/../x").status == 400


def test_an_author_without_model_repos_says_so_as_the_cli_does(page, run_eosfix):
    client = page.client(follow=False)
    location = client.get("/audit?author=nobody").headers["Location"]
    deadline = __import__("time").monotonic() + 60
    while not json.loads(client.get(location + "/progress").body)["finished"]:
        assert __import__("time").monotonic() < deadline
    reply = client.get(location)
    assert reply.status == 404
    cli = run_eosfix("hub", "--author", "nobody")
    assert cli.exit_code == 2
    assert _by_id(reply.text, "audit-empty") == cli.stderr.strip()
    assert "0 repos checked" not in reply.text


# --- 4. the answer first ------------------------------------------------------------------------


def test_the_answer_and_the_action_come_before_the_evidence(fake_hub, page):
    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    text = page.client().check("org/broken").text
    assert _by_id(text, "where") == (
        "Runs on past <|im_end|> in transformers, candle and ExLlamaV2; stops in vLLM, SGLang, "
        "TGI, TGI-transformers, llama.cpp, ollama, mlx-lm and mlx-vlm."
    )
    assert _by_id(text, "after") == (
        "After the fix: runs on past <|im_end|> in candle and ExLlamaV2; stops in "
        "transformers, vLLM, SGLang, TGI, TGI-transformers, llama.cpp, ollama, mlx-lm and "
        "mlx-vlm."
    )
    order = [text.index(mark) for mark in ('id="where"', 'id="act"', ">What ends a turn<",
                                           ">Findings<", 'id="runtimes"')]  # fmt: skip
    assert order == sorted(order)


# --- 5. every fix the CLI offers --------------------------------------------------------------


def test_a_gguf_repos_params_pr_is_offered_and_opened_as_hub_pr_opens_it(gguf_org, signed,
                                                                        run_eosfix):  # fmt: skip
    """``eosfix hub ORG/Reasoner-GGUF --pr`` opens a pull request setting the repo's params
    file (its stop list cuts replies at <|think_end|> and misses <|turn_end|>); the page
    offers the same pull request, and opens the same file."""
    repo_id = f"{GGUF_ORG}/Reasoner-GGUF"
    dry = run_eosfix("hub", repo_id, "--pr", "--dry-run", "--format", "json")
    assert json.loads(dry.stdout)["repos"][0]["pr"] == "would open (dry run)"
    client = signed.client()
    client.sign_in()
    text = client.check(repo_id).text
    assert _by_id(text, "act").startswith(
        "The fix is a pull request on the repo: its params (what ollama run hf.co/… stops on)."
    )
    assert f"eosfix hub {repo_id} --pr" in _by_id(text, "command")
    reply = client.post_form("/pr", {"repo": repo_id, "csrf": client.csrf(text)})
    assert _by_id(reply.text, "message") == "Pull request opened."
    (pr,) = eosfix_prs(gguf_org.repos[repo_id])
    params = json.loads(gguf_org.repos[repo_id].pr_files(pr.num)["params"])
    assert params == {"stop": ["<|turn_end|>"], "temperature": 0.6}
    again = client.check(repo_id).text
    assert "already open" in _by_id(again, "pr")


def test_no_pull_request_is_offered_where_none_helps(gguf_org, signed):
    """Chat-7B-GGUF's Q2_K misses <|END_OF_TURN_TOKEN|> in its header, which no pull request
    can change, and its params file would not change: no PR button, the new file's command."""
    client = signed.client()
    client.sign_in()
    text = client.check(f"{GGUF_ORG}/Chat-7B-GGUF").text
    assert 'id="open-pr' not in text
    assert "eosfix fix Chat-7B-Q2_K.gguf --output Chat-7B-Q2_K.fixed.gguf" in _by_id(
        text, "header-2"
    )


def test_an_audit_of_gguf_repos_counts_the_pull_requests_hub_pr_opens(gguf_org, page,
                                                                      run_eosfix):  # fmt: skip
    """Of the organisation's two repos that run on, a pull request fixes one (Reasoner-GGUF's
    params file) and a new file the other (Chat-7B-GGUF's Q2_K header): the audit says so, as
    ``eosfix hub --author ORG --pr`` counts them, and its chart counts per runtime what its
    table says."""
    import time

    client = page.client(follow=False)
    location = client.get(f"/audit?author={GGUF_ORG}").headers["Location"]
    deadline = time.monotonic() + 120
    while not json.loads(client.get(location + "/progress").body)["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    text = client.get(location).text
    dry = run_eosfix("hub", "--author", GGUF_ORG, "--pr", "--dry-run", "--format", "json")
    opened = [r for r in json.loads(dry.stdout)["repos"] if r["pr"] == "would open (dry run)"]
    assert len(opened) == 1
    assert _by_id(text, "audit-action") == (
        "1 of the 5 repos would be fixed by a pull request: eosfix hub --author "
        f"{GGUF_ORG} --pr opens one on each (check a repo below to open its pull request as "
        "yourself). 1 more needs new GGUF files: no pull request can change a file's header "
        "(check it below for the command that makes one)."
    )
    table = re.findall(r"<tr><td><a [^>]*>([^<]*)</a></td>\s*<td[^>]*>[^<]*</td>\s*<td>([^<]*)</td>",
                       text)  # fmt: skip
    assert len(table) == 5
    chart = re.findall(r'class="count">(\d+) stop, (\d+) do not</text>', text)
    names = re.findall(r'class="label">([^<]*)</text>', text)
    assert names == ["llama.cpp", "ollama hf.co"]  # the runtimes that load a GGUF, alone
    for name, (_, misses) in zip(names, chart, strict=True):
        failing = [repo for repo, where in table if name in where.split(", ")]
        assert int(misses) == len(failing), (name, failing)
