"""The finding-code registry (``eosfix.core.codes``): every code's properties are fields of its
entry, read from there, and every module refers to a code by its entry, never by its string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import eosfix
from eosfix.containers.ollama.container import STOP_SET_CODES
from eosfix.core import codes
from eosfix.core.codes import CODES, EOS001, EOS004, EOS011, Severity, Subject, finding
from eosfix.decide.stopids import CODE_BY_KIND, IN_TURN_KIND, REMOVABLE
from tests.conftest import SAMPLES, copy_repo, run_in

PACKAGE = Path(eosfix.__file__).parent
CODE_TEXT = re.compile(r"EOS\d{3}")


def _code_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and CODE_TEXT.fullmatch(node.value.strip())
    ]


def test_no_module_but_the_registry_spells_a_code_as_a_string():
    """A code is referred to by its entry (``EOS001``, ``CODE_BY_KIND[kind]``), never by a
    string literal ``"EOS001"``: an ast walk of every module of the package finds none
    outside the registry (docstrings and help text that name codes in a sentence are prose)."""
    registry = PACKAGE / "core" / "codes.py"
    found = [
        hit for path in sorted(PACKAGE.rglob("*.py")) if path != registry
        for hit in _code_literals(path)
    ]  # fmt: skip
    assert found == []
    assert len(_code_literals(registry)) == len(CODES)  # the walk sees literals where they are


def test_each_entry_is_bound_to_the_name_of_its_code_in_the_docs_order():
    named = {name: v for name, v in vars(codes).items() if isinstance(v, codes.Code)}
    assert all(name == entry.code for name, entry in named.items())
    assert list(CODES) == list(named)
    assert list(CODES)[:2] == ["EOS001", "EOS002"]
    assert list(CODES)[-1] == "EOS203"


def test_a_finding_takes_the_entry_and_carries_its_string():
    f = finding(EOS001, "generation_config.json", "eos_token_id 2 lacks 7")
    assert (f.code, f.severity, f.fixable) == ("EOS001", Severity.ERROR, True)
    kept = finding(EOS011, "generation_config.json", "kept", severity=Severity.WARNING)
    assert (kept.code, kept.severity, kept.fixable) == ("EOS011", Severity.WARNING, True)
    with pytest.raises(ValueError, match="EOS004 has a fixed severity"):
        finding(EOS004, "generation_config.json", "m", fixable=True)


def test_ollamas_own_stop_set_decides_the_codes_the_registry_marks():
    """The ollama check leaves out the blob's findings whose entry says they are about
    llama.cpp's own stop set: EOS011-EOS013 and EOS201-EOS203, and nothing else."""
    marked = {c.code for c in CODES.values() if c.llamacpp_stop_set}
    assert marked == STOP_SET_CODES
    assert marked == {"EOS011", "EOS012", "EOS013", "EOS201", "EOS202", "EOS203"}


def test_the_code_of_each_stop_id_kind_is_the_registrys():
    """Each kind of stop id that cuts a reply or never fires has the code whose entry names
    that kind; the kinds named are exactly what ``fix`` removes."""
    assert set(CODE_BY_KIND) == set(REMOVABLE)
    for kind, entry in CODE_BY_KIND.items():
        assert entry is CODES[entry.code]
        assert entry.stop_id_kind == kind
    assert CODE_BY_KIND[IN_TURN_KIND] is EOS011


def _github_line(capsys, monkeypatch, root: Path, code: str) -> str:
    status, out, _ = run_in(capsys, monkeypatch, root, "check", "--format", "github", "alpaca")
    assert status == 0, out  # EOS005 is a warning
    return next(line for line in out.splitlines() if f"title=eosfix {code}::" in line)


def test_where_ci_points_is_read_from_the_entry(tmp_path, capsys, monkeypatch):
    """An annotation points at the key its code's entry says the code is about: EOS005 (a
    template finding) at ``chat_template``; the same entry made about how tokens are declared
    points at ``added_tokens_decoder`` instead."""
    copy_repo(SAMPLES / "plain-text-turns", tmp_path / "alpaca")
    text = (tmp_path / "alpaca" / "tokenizer_config.json").read_text().splitlines()
    template = next(i for i, line in enumerate(text, 1) if '"chat_template"' in line)
    added = next(i for i, line in enumerate(text, 1) if '"added_tokens_decoder"' in line)
    assert template != added
    line = _github_line(capsys, monkeypatch, tmp_path, "EOS005")
    assert f"file=alpaca/tokenizer_config.json,line={template}," in line
    changed = CODES["EOS005"]._replace(about=Subject.TOKENS)
    monkeypatch.setitem(CODES, "EOS005", changed)
    line = _github_line(capsys, monkeypatch, tmp_path, "EOS005")
    assert f"file=alpaca/tokenizer_config.json,line={added}," in line
