"""Terminator rules and source precedence on small repos written in tmp_path."""

from __future__ import annotations

import json

import pytest

from eosfix.analysis.terminators import (
    NEXT_TURN,
    STOP_STRING,
    TOOL_CALL,
    TURN_END,
    Terminator,
)
from eosfix.containers.folder.keys import propose_eos
from eosfix.containers.folder.read import load_repo
from eosfix.core.repo import TokenInfo
from tests.conftest import check_repo

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _decoder(tokens: dict[int, str], special: bool = True) -> dict:
    return {
        str(i): {
            "content": c,
            "special": special,
            "normalized": False,
            "lstrip": False,
            "rstrip": False,
            "single_word": False,
        }
        for i, c in tokens.items()
    }


def make_repo(tmp_path, template=None, tokens=None, eos="<|im_end|>", gen=None, **files):
    tok: dict = {"eos_token": eos}
    if tokens is not None:
        tok["added_tokens_decoder"] = _decoder(tokens)
    if template is not None:
        tok["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tok))
    if gen is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(gen))
    for name, content in files.items():  # chat_template_jinja -> chat_template.jinja
        stem, _, ext = name.rpartition("_")
        path = tmp_path / f"{stem.replace('__', '/')}.{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return load_repo(tmp_path)


def found(repo) -> dict[str, Terminator]:
    return {t.content: t for t in check_repo(repo).terminators.terminators}


def test_chatml_reply_ends_with_im_end(tmp_path):
    repo = make_repo(
        tmp_path, CHATML, {1: "<|im_start|>", 2: "<|im_end|>"}, gen={"eos_token_id": 0}
    )
    (t,) = found(repo).values()
    assert (t.content, t.id, t.kind) == ("<|im_end|>", 2, TURN_END)
    assert "Eosfixassistant1<|im_end|>" in t.evidence


def test_template_that_always_appends_the_opener_is_cut_at_the_opener(tmp_path):
    template = (
        "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
        "\n\n{{ m.content }}<|eot_id|>{% endfor %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    tokens = {
        0: "<|begin_of_text|>",
        1: "<|start_header_id|>",
        2: "<|end_header_id|>",
        3: "<|eot_id|>",
    }
    repo = make_repo(tmp_path, template, tokens, eos="<|eot_id|>", bos_token="x")
    assert list(found(repo)) == ["<|eot_id|>"]


def test_next_turn_openers_when_replies_have_no_closing_token(tmp_path):
    template = (
        "{% for m in messages %}{% if m.role == 'user' %}<|user|>\n{{ m.content }}"
        "{% elif m.role == 'assistant' %}<|assistant|>\n{{ m.content }}"
        "{% for tc in m.tool_calls or [] %}{{ tc.function.arguments | tojson }}{% endfor %}"
        "{% elif m.role == 'tool' %}<|observation|>\n{{ m.content }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tokens = {10: "<|endoftext|>", 11: "<|user|>", 12: "<|assistant|>", 13: "<|observation|>"}
    repo = make_repo(tmp_path, template, tokens, eos="<|endoftext|>", gen={"eos_token_id": 10})
    terms = found(repo)
    assert {c: t.kind for c, t in terms.items()} == {
        "<|user|>": NEXT_TURN,
        "<|observation|>": NEXT_TURN,
    }
    assert check_repo(repo).proposed == (10, 11, 13)


def test_plain_text_turns_give_a_stop_string_and_no_edit(tmp_path):
    template = (
        "{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}\n\n"
        "{% else %}### Response:\n{{ m.content }}\n\n{% endif %}{% endfor %}"
    )
    repo = make_repo(tmp_path, template, {2: "</s>"}, eos="</s>", gen={"eos_token_id": 2})
    result = check_repo(repo)
    assert [(t.content, t.kind) for t in result.terminators.terminators] == [
        ("### Instruction:", STOP_STRING)
    ]
    assert result.proposed is None
    assert [f.code for f in result.findings] == ["EOS005"]


def test_in_turn_token_is_never_a_terminator(tmp_path):
    template = (
        "{% for m in messages %}{% if m.role == 'user' %}<|start|>user<|message|>{{ m.content }}"
        "<|end|>{% else %}{% if m.thinking %}<|start|>assistant<|channel|>analysis<|message|>"
        "{{ m.thinking }}<|end|>{% endif %}<|start|>assistant<|message|>{{ m.content }}"
        "{% if loop.last %}<|return|>{% else %}<|end|>{% endif %}{% endif %}{% endfor %}"
    )
    tokens = {1: "<|start|>", 2: "<|message|>", 3: "<|end|>", 4: "<|return|>", 5: "<|channel|>"}
    repo = make_repo(tmp_path, template, tokens, eos="<|return|>", gen={"eos_token_id": [4]})
    result = check_repo(repo)
    assert list(found(repo)) == ["<|return|>"]
    assert "<|end|>" in result.terminators.in_turn
    assert result.proposed is None


def test_tool_call_terminator_from_named_tool_use_template(tmp_path):
    tool_use = (
        "{% for m in messages %}{% if m.tool_calls %}<|call_start|>"
        "{{ m.tool_calls[0].function.arguments | tojson }}<|call_end|>"
        "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endif %}{% endfor %}"
    )
    tokens = {1: "<|im_start|>", 2: "<|im_end|>", 3: "<|call_start|>", 4: "<|call_end|>"}
    repo = make_repo(
        tmp_path,
        None,
        tokens,
        gen={"eos_token_id": 2},
        chat_template_jinja=CHATML,
        additional_chat_templates__tool_use_jinja=tool_use,
    )
    terms = found(repo)
    assert terms["<|call_end|>"].kind == TOOL_CALL
    assert terms["<|call_end|>"].templates == ("tool_use",)
    assert check_repo(repo).proposed == (2, 4)


def test_template_refusing_every_probe_is_reported(tmp_path):
    repo = make_repo(
        tmp_path, "{{ raise_exception('I only run inside my app') }}", {2: "<|im_end|>"}
    )
    result = check_repo(repo)
    assert result.findings[0].code == "EOS100"
    assert "I only run inside my app" in result.findings[0].message


def test_unregistered_control_token_with_tokenizer_json_is_not_a_single_token(tmp_path):
    template = "{% for m in messages %}{{ m.content }}<|turn_over|>{% endfor %}"
    tokenizer_json = {
        "version": "1.0",
        "added_tokens": [],
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"},
    }
    repo = make_repo(tmp_path, template, None, eos="a", tokenizer_json=tokenizer_json)
    result = check_repo(repo)
    assert "EOS006" in [f.code for f in result.findings]
    assert result.status.value == "problems"


def test_transformers5_layout_reads_ids_from_tokenizer_json(tmp_path):
    tokenizer_json = {
        "version": "1.0",
        "added_tokens": [
            {"id": 7, "content": "<|im_start|>", "special": True, "normalized": False},
            {"id": 8, "content": "<|im_end|>", "special": True, "normalized": False},
        ],
    }
    repo = make_repo(tmp_path, CHATML, None, gen={"eos_token_id": 0}, tokenizer_json=tokenizer_json)
    assert found(repo)["<|im_end|>"].id == 8
    assert found(repo)["<|im_end|>"].id_source == "tokenizer.json"


def test_special_tokens_map_overrides_eos_only_in_legacy_layout(tmp_path):
    repo = make_repo(
        tmp_path,
        CHATML,
        None,
        eos="</s>",
        special_tokens_map_json={"eos_token": {"content": "<|im_end|>"}},
    )
    assert repo.eos_token == "<|im_end|>"
    repo = make_repo(
        tmp_path,
        CHATML,
        {2: "<|im_end|>"},
        eos="</s>",
        special_tokens_map_json={"eos_token": {"content": "<|im_end|>"}},
    )
    assert repo.eos_token == "</s>"


def test_jinja_files_replace_tokenizer_config_templates(tmp_path):
    repo = make_repo(tmp_path, "CONFIG", {2: "<|im_end|>"}, chat_template_jinja=CHATML)
    assert [(t.name, t.file) for t in repo.templates] == [("default", "chat_template.jinja")]


def test_processor_config_template_beats_chat_template_json(tmp_path):
    repo = make_repo(
        tmp_path,
        None,
        {2: "<|im_end|>"},
        chat_template_json={"chat_template": "JSON"},
        processor_config_json={"chat_template": CHATML},
    )
    assert [(t.source, t.file) for t in repo.templates] == [(CHATML, "processor_config.json")]


def test_generation_config_missing_falls_back_to_text_config(tmp_path):
    repo = make_repo(
        tmp_path,
        CHATML,
        {1: "<|im_start|>", 2: "<|im_end|>"},
        config_json={"text_config": {"eos_token_id": 1}},
    )
    result = check_repo(repo)
    assert result.stop.source == "config.json text_config"
    assert result.findings[0].code == "EOS002"
    assert result.proposed == (1, 2)


@pytest.mark.parametrize(
    ("current", "eos_id", "ids", "expected"),
    [
        pytest.param((5,), 5, [7], (5, 7), id="append after existing"),
        pytest.param((5,), 6, [7], (5, 6, 7), id="tokenizer eos before terminators"),
        pytest.param((7, 5), 5, [7], None, id="already covered"),
        pytest.param(None, 9, [7, 8], (9, 7, 8), id="nothing set"),
        pytest.param((5, 6), None, [6, 8], (5, 6, 8), id="no duplicates"),
    ],
)
def test_propose_eos_keeps_existing_order(current, eos_id, ids, expected):
    eos = TokenInfo("eos", eos_id, True, False, "x") if eos_id is not None else None
    terms = [Terminator(f"t{i}", i, TURN_END, ("default",), "p", "") for i in ids]
    assert propose_eos(current, eos, terms) == expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            {"eos_token_id": 1},
            "generation_config.json is missing and config.json's eos_token_id 1 does not "
            "include <|im_end|> (2): generation runs past the turn end",
            id="config.json eos",
        ),
        pytest.param(
            {"text_config": {"eos_token_id": [1]}},
            "generation_config.json is missing and config.json's text_config.eos_token_id [1] "
            "does not include <|im_end|> (2): generation runs past the turn end",
            id="text_config eos",
        ),
        pytest.param(
            {"model_type": "x"},
            "generation_config.json is missing and config.json sets no eos_token_id: "
            "generation never stops on <|im_end|> (2)",
            id="config.json without eos",
        ),
        pytest.param(
            None,
            # without config.json no runtime loads the folder: say what the files lack
            "generation_config.json and config.json are missing: no file lists <|im_end|> (2) "
            "as a stop id",
            id="neither file",
        ),
    ],
)
def test_missing_generation_config_finding_is_one_sentence(tmp_path, config, message):
    files = {} if config is None else {"config_json": config}
    repo = make_repo(tmp_path, CHATML, {1: "<|im_start|>", 2: "<|im_end|>"}, **files)
    (finding,) = [f for f in check_repo(repo).findings if f.code == "EOS002"]
    assert finding.message == message
