"""The process-wide memo of a template's analysis (terminators._memo_analysis).

Repos that share a template and its special-token texts share one analysis whatever their
ids, and read it once (_read_templates: only the ids of what was found are their own); every
verdict is byte-identical to the one a fresh process (empty memos) gives. An
analysis any of whose renders a bound, the backstop or the sandbox refused is never kept,
and an invalid template names each repo's own file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosfix.analysis import terminators
from eosfix.cli import cli
from eosfix.containers.folder.read import load_repo
from eosfix.core.errors import TemplateError
from tests.conftest import CORPUS, SAMPLES, corpus_cases, sample_names
from tests.support.cachebuilder import CHATML_TEMPLATE, chatml_files
from tests.support.hostile import HOSTILE, hostile_repo

MEMO = terminators._memo_analysis
READ = terminators._read_templates  # what the probes of those analyses say, ids not resolved


def _write(root: Path, files: dict[str, bytes | str]) -> Path:
    root.mkdir(parents=True)
    for name, data in files.items():
        path = root / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    return root


def _check_json(*paths: Path) -> str:
    result = CliRunner().invoke(cli, ["check", "--format", "json", *map(str, paths)])
    assert result.exit_code in (0, 1), result.output
    assert result.output.startswith("{"), result.output
    return result.output


def _fresh(fn, *args):
    """``fn(*args)`` with empty memos, as a new process would run it."""
    MEMO.cache_clear()
    READ.cache_clear()
    return fn(*args)


def _renamed_eos(files: dict[str, bytes | str]) -> dict[str, bytes | str]:
    """The same ChatML repo with another text for its eos token (``<|end_of_text|>``)."""
    out = dict(files)
    out["tokenizer_config.json"] = str(out["tokenizer_config.json"]).replace(
        "<|endoftext|>", "<|end_of_text|>"
    )
    return out


@pytest.fixture
def three_repos(tmp_path: Path) -> list[Path]:
    """Two ChatML repos with different ids (one template, the same token texts), and one
    whose eos token has another text."""
    a = _write(tmp_path / "a", chatml_files(1000))
    b = _write(tmp_path / "b", chatml_files(5000))
    c = _write(tmp_path / "c", _renamed_eos(chatml_files(9000)))
    return [a, b, c]


def test_repos_sharing_a_template_and_its_token_texts_share_one_analysis(three_repos):
    a, b, c = (load_repo(p) for p in three_repos)
    assert a.special_tokens == b.special_tokens != c.special_tokens
    fresh = {r.root.name: _fresh(terminators.find_terminators, r) for r in (a, b, c)}
    MEMO.cache_clear()
    READ.cache_clear()
    shared = {r.root.name: terminators.find_terminators(r) for r in (a, b, c)}
    info = MEMO.cache_info()
    assert (info.misses, info.hits) == (2, 1)  # b reused a's analysis; c got its own
    info = READ.cache_info()
    assert (info.misses, info.hits) == (2, 1)  # and its reading: only the ids were b's own
    assert shared == fresh
    # the ids are the repo's own, not those of the repo whose analysis it shares
    ids = {name: sorted(t.id for t in ts.terminators) for name, ts in shared.items()}
    assert ids == {"a": [1002], "b": [5002], "c": [9002]}


def test_check_output_is_byte_identical_with_and_without_the_memo(three_repos):
    fresh = [_fresh(_check_json, p) for p in three_repos]
    MEMO.cache_clear()
    _check_json(*three_repos)  # fills the memo
    assert MEMO.cache_info().currsize == 2
    warm = [_check_json(p) for p in three_repos]
    assert MEMO.cache_info().hits >= 3
    assert warm == fresh
    assert '"<|end_of_text|>"' in warm[2]
    assert '"<|end_of_text|>"' not in warm[0]


@pytest.mark.parametrize(("name", "template", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_an_analysis_a_bound_refused_is_never_kept(tmp_path, name, template, code):
    repo = load_repo(hostile_repo(tmp_path, name, template))
    first = terminators.find_terminators(repo)
    assert any(p.limit for ta in first.templates for p in ta.probes)
    assert MEMO.cache_info().currsize == 0
    assert terminators.find_terminators(repo) == first  # the same refusal, analysed again
    assert READ.cache_info().hits == 0  # a new analysis object: read again, never matched


def test_a_refusal_only_the_generation_prompt_meets_is_not_kept(tmp_path):
    """No probe asks for the generation prompt: its render's refusal is swallowed (no
    opener), and no probe records a limit; the analysis is still not kept."""
    template = (
        CHATML_TEMPLATE
        + "{% if add_generation_prompt %}{% for i in range(100000) %}"
        + "{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
    )
    repo = load_repo(hostile_repo(tmp_path, "prompt-bound", template))
    analysis = terminators.find_terminators(repo).templates[0]
    assert all(p.limit is None for p in analysis.probes)
    assert analysis.generation_prompt is None
    assert MEMO.cache_info().currsize == 0
    plain = load_repo(hostile_repo(tmp_path, "plain", CHATML_TEMPLATE))
    terminators.find_terminators(plain)
    assert MEMO.cache_info().currsize == 1  # a clean analysis is kept


def test_an_invalid_template_names_each_repos_own_file(tmp_path):
    broken = "{% for m in messages %}{{ m.content }"
    one = load_repo(hostile_repo(tmp_path, "one", broken))
    two = load_repo(hostile_repo(tmp_path, "two", broken))
    for repo in (one, two):
        with pytest.raises(TemplateError) as err:
            terminators.find_terminators(repo)
        assert str(err.value.path) == str(repo.root / "chat_template.jinja")
    assert MEMO.cache_info().currsize == 0


def test_the_memo_is_reset_between_tests_by_the_autouse_fixture():
    from tests.conftest import _eosfix_memos

    assert MEMO in _eosfix_memos()
    assert READ in _eosfix_memos()
    assert MEMO.cache_info().currsize == 0
    assert READ.cache_info().currsize == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["samples", "corpus"])
def test_every_sample_and_corpus_verdict_is_the_same_with_the_memo(kind):
    if kind == "samples":
        targets = [SAMPLES / name for name in sample_names()]
    else:
        cases = corpus_cases()
        if not cases:
            pytest.skip(f"corpus absent at {CORPUS} (set EOSFIX_CORPUS)")
        targets = [CORPUS / name for name in cases]
    fresh = [_fresh(_check_json, p) for p in targets]
    MEMO.cache_clear()
    READ.cache_clear()
    _check_json(*targets)  # every clean analysis of them all is now in the memo
    before = MEMO.cache_info().hits
    warm = [_check_json(p) for p in targets]
    assert MEMO.cache_info().hits > before
    assert warm == fresh
    assert all(json.loads(out)["repos"] for out in warm)
