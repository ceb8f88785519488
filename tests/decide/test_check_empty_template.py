"""An empty chat template file: transformers 5.24 loads a 0-byte ``chat_template.jinja`` as the
chat template (in place of tokenizer_config.json's ``chat_template``) and renders every
conversation as an empty prompt. Nothing in the template ends a reply, so what ends one is the
tokenizer's eos: eosfix says so (EOS019, an error it cannot fix), judges each runtime against
that eos, and ``fix`` adds it to the stop ids where a runtime misses it."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from tests.conftest import SAMPLES, copy_repo, run_in
from tests.support.tiny_lm import save_tokenizer, word_level_tokenizer

CHATML = "chatml-missing-im-end"
SPECIAL = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046}


def _empty_template(tmp_path, *, keep_config_template: bool = False):
    folder = copy_repo(SAMPLES / CHATML, tmp_path / "m")
    template = (folder / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").write_bytes(b"")
    if keep_config_template:
        path = folder / "tokenizer_config.json"
        data = json.loads(path.read_text())
        data["chat_template"] = template
        path.write_text(json.dumps(data, indent=2) + "\n")
    return folder


def test_an_empty_template_is_an_error_and_the_tokenizer_eos_is_what_ends_a_reply(
    tmp_path, capsys, monkeypatch
):
    _empty_template(tmp_path)
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1, out
    assert (
        "  ends a turn   <|im_end|>  id 248046, the tokenizer's eos: the template writes "
        "nothing, so nothing else ends a reply (template default)"
    ) in out
    assert (
        "m/chat_template.jinja: EOS019 chat_template.jinja is empty: transformers loads it as "
        "the chat template and renders every conversation as an empty prompt, as vLLM does "
        "through it; write the template back"
    ) in out
    assert "EOS009" not in out  # the empty file says it
    assert "EOS004" not in out  # the tokenizer's eos is the terminator now
    assert "  fix           eos_token_id -> [248044, 248046]" in out
    assert "run on now: transformers" in out
    assert "1 repo with problems" in out
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "fix", "m")
    assert code == 1
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1  # the empty template is still there: an error fix cannot repair
    assert "  fix " not in out  # nothing more to fix


def test_an_empty_template_that_hides_tokenizer_config_s_says_delete_it(
    tmp_path, capsys, monkeypatch
):
    _empty_template(tmp_path, keep_config_template=True)
    code, out, _ = run_in(capsys, monkeypatch, tmp_path, "check", "m")
    assert code == 1
    assert (
        "as vLLM does through it; delete it to use tokenizer_config.json's chat_template"
    ) in out


def test_an_empty_template_with_the_eos_listed_still_fails(tmp_path, capsys, monkeypatch):
    folder = _empty_template(tmp_path)
    path = folder / "generation_config.json"
    path.write_text(
        path.read_text().replace('"eos_token_id": 248044', '"eos_token_id": [248044, 248046]')
    )
    result = api.check(folder)
    assert result.check is not None
    assert result.check.status.value == "problems"
    assert [f.code for f in result.check.findings] == ["EOS019"]
    assert result.patches == ()


@pytest.mark.parametrize("keep_config_template", [False, True])
def test_transformers_renders_an_empty_template_file_as_an_empty_prompt(
    tmp_path, keep_config_template
):
    """The claim EOS019 makes, asked of transformers itself
    (tokenization_utils_base.py 1822-1839: the file's text, even empty, becomes the template;
    get_chat_template 3378-3382: '' is not None, so it is used)."""
    transformers = pytest.importorskip("transformers")
    folder = _empty_template(tmp_path, keep_config_template=keep_config_template)
    save_tokenizer(word_level_tokenizer(["hello world"], SPECIAL), folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template == ""
    messages = [{"role": "user", "content": "hello"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == ""
