"""Every real-repo case of ../shared/corpus against its expect.json (skipped without it)."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from tests.conftest import CORPUS, copy_repo, corpus_cases

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"corpus folder {CORPUS} absent (set EOSFIX_CORPUS to run)"
)


@pytest.mark.parametrize("name", corpus_cases())
def test_corpus_case_matches_expect(name):
    expect = json.loads((CORPUS / name / "expect.json").read_text())
    result = api.check(CORPUS / name)
    assert result.error is None, result.error
    check = result.check
    if expect.get("no_template"):
        assert check.status.value == "no_template"
        return
    found = {t.content: t for t in check.terminators.terminators}
    for content in expect["terminators"]:
        assert content in found, f"{content} not found; found {list(found)}"
    allowed = set(expect["terminators"]) | set(expect["acceptable"])
    assert set(found) <= allowed, f"unexpected terminators {set(found) - allowed}"
    proposed = set(check.proposed or ())
    for content in expect["forbidden"]:
        assert content not in found
        forbidden_id = expect["ids"].get(content)
        assert forbidden_id is None or forbidden_id not in proposed
    for content, token_id in expect["ids"].items():
        if content in found:
            assert found[content].id == token_id
    # Tokens the model stops on that no template writes: evidence only, never a terminator.
    unwritten = dict(check.unwritten_eog_tokens)
    for content in expect.get("unwritten", []):
        assert content not in found, f"{content} is never written, yet proposed"
        assert content in unwritten, f"{content} missing from unwritten_eog_tokens"
        token_id = expect["ids"].get(content)
        assert token_id is None or unwritten[content] == token_id


@pytest.mark.parametrize("name", corpus_cases())
def test_corpus_fix_is_idempotent_and_complete(name, tmp_path):
    repo = copy_repo(CORPUS / name, tmp_path / name)
    first = api.fix(repo)
    assert first.error is None
    second = api.fix(repo)
    assert second.written == ()
    after = api.check(repo).check
    stop = set(after.stop.ids or ())
    for t in after.id_terminators:
        assert t.id is None or t.id in stop, f"{t.content} still missing after fix"
