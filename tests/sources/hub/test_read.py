"""What the Hub answers is followed only where it may lead: a listing's next page on the Hub's
own host, never twice, never past MAX_PAGES; ids and file names checked as people's input is
before anything about them is requested."""
# ruff: noqa: F811  (fixtures are imported, then requested by name)

from __future__ import annotations

import itertools
import json

import pytest

from eosfix.sources.hub import read
from eosfix.sources.hub.read import BadListing, HubReader, ListingQuery
from tests.support.cachebuilder import chatml_files
from tests.support.hostilehub import answer, hostile_hub, with_headers  # noqa: F401

TOKEN = "hf_listing_token"
FIRST_PAGE = r"^/api/models$"


def _org(hub, n: int = 3) -> None:
    for i in range(n):
        hub.add_repo(f"org/m{i}", chatml_files(1000 + 10 * i))


def _listed(reader: HubReader, most: int = 50) -> list[str]:
    """At most ``most`` ids of org's listing (a listing that never ends stops there)."""
    entries = reader.list_models(ListingQuery(author="org"))
    return [e.repo_id for e in itertools.islice(entries, most)]


@pytest.mark.parametrize("hostile_hub", [{"token": TOKEN}], indirect=True)
def test_a_next_page_on_another_host_is_not_followed_and_gets_no_token(hostile_hub, run_eosfix):
    _org(hostile_hub)
    elsewhere = hostile_hub.cdn_url  # this server under another name: another origin
    link = {"Link": f'<{elsewhere}/api/models?author=org&cursor=1>; rel="next"'}
    hostile_hub.on(FIRST_PAGE, with_headers(link))
    with pytest.raises(BadListing, match="next page is on another host"):
        _listed(HubReader(token=TOKEN))
    result = run_eosfix("hub", "--author", "org", "--token", TOKEN)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"org: error: the listing's next page is on another host ({elsewhere}): not followed"
    )
    hosts = {r.headers.get("host", "").partition(":")[0] for r in hostile_hub.request_log}
    assert hosts == {"127.0.0.1"}  # nothing reached the other host, token or not


def test_a_page_linking_to_itself_is_asked_once(hostile_hub):
    _org(hostile_hub)

    def itself(handler):
        return {"Link": f'<{hostile_hub.url}{handler.path}>; rel="next"'}

    hostile_hub.on(FIRST_PAGE, with_headers(itself))
    with pytest.raises(BadListing, match="pages loop"):
        _listed(HubReader())
    assert hostile_hub.hits(FIRST_PAGE) == 1


def test_pages_that_bring_nothing_new_end_the_listing(hostile_hub):
    """Each page links to a new address (a relative one) that gives the same repos again."""
    _org(hostile_hub)
    pages = itertools.count(1)

    def onwards(handler):
        return {"Link": f'</api/models?author=org&page={next(pages)}>; rel="next"'}

    hostile_hub.on(FIRST_PAGE, with_headers(onwards))
    with pytest.raises(BadListing, match="pages loop"):
        _listed(HubReader())
    assert hostile_hub.hits(FIRST_PAGE) == 2


def test_a_listing_stops_at_max_pages(hostile_hub, monkeypatch):
    _org(hostile_hub, 5)
    hostile_hub.page_size = 1  # the Hub's own Link paging, a repo a page
    monkeypatch.setattr(read, "MAX_PAGES", 3)
    with pytest.raises(BadListing, match="more than 3 pages"):
        _listed(HubReader())
    assert hostile_hub.hits(FIRST_PAGE) == 3


def test_ids_the_hub_should_never_give_are_failures_never_requested(hostile_hub, run_eosfix):
    _org(hostile_hub, 1)
    real = json.loads(json.dumps(hostile_hub.repos["org/m0"].head))  # a real commit id
    siblings = [{"rfilename": "config.json"}, {"rfilename": "tokenizer_config.json"}]
    page = [
        {"id": "h/../../internal-secret", "sha": real, "siblings": siblings},
        {"id": "org/bad-sha", "sha": "../../../internal-secret", "siblings": siblings},
        {"id": "org/bad-file", "sha": real, "siblings": [{"rfilename": "../../config.json"}]},
    ]
    listing = hostile_hub.url + "/api/models?author=org&cursor=0"
    hostile_hub.on(
        FIRST_PAGE, answer(200, page, {"Link": f'<{listing}>; rel="next"'}), times=1
    )  # then the Hub's own page: org/m0
    result = run_eosfix("hub", "--author", "org", "--format", "json")
    entries = {e["repo_id"]: e for e in json.loads(result.stdout)["repos"]}
    assert set(entries) == {"h/../../internal-secret", "org/bad-sha", "org/bad-file", "org/m0"}
    assert entries["h/../../internal-secret"]["error"] == (
        "the Hub gave a repo id that is not one (org/name): nothing requested"
    )
    assert "commit id that is not one" in entries["org/bad-sha"]["error"]
    assert "file name outside the repo ('../../config.json')" in entries["org/bad-file"]["error"]
    assert "error" not in entries["org/m0"]
    assert result.exit_code == 2
    asked = [r.path for r in hostile_hub.request_log]
    assert not [p for p in asked if "internal-secret" in p or "bad-" in p or ".." in p], asked
