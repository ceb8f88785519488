"""The early stop with the real model: SmolLM2-135M-Instruct in transformers.

A generation_config.json whose list holds an ordinary token of the model's own greedy answer
to "What is the capital of France?" (`` Paris``) cuts that answer in ``generate()``; ``check``
names the token (EOS012); after ``fix`` the same generation runs to ``<|im_end|>`` with the
whole answer.

(It runs after tests/analysis/test_template.py, whose hostile templates' memory is measured: a
subprocess's ``ru_maxrss`` starts from its parent's resident size at fork, and the model this
test loads stays in the pytest process.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the real model needs torch (pip install 'eosfix[verify]')")
pytest.importorskip("transformers", reason="the real model needs transformers")

from transformers import AutoTokenizer, GenerationConfig

from eosfix import api
from tests.support.realmodel import greedy_from_folder

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning:transformers.*"),
    pytest.mark.filterwarnings("ignore::FutureWarning:transformers.*"),
]
MAX_NEW_TOKENS = 24
ENDOFTEXT, IM_END = 0, 2  # SmolLM2's <|endoftext|> and <|im_end|>


def _answer(folder: Path) -> list[int]:
    """Load the folder as a user would and answer greedily with its own generation config."""
    return greedy_from_folder(folder, MAX_NEW_TOKENS)[0]


def _write_eos(folder: Path, ids: list[int]) -> None:
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": ids}, indent=2) + "\n"
    )


def test_a_word_of_the_answer_as_a_stop_id_cuts_it_until_fixed(seed_repo):
    tokenizer = AutoTokenizer.from_pretrained(seed_repo)
    _write_eos(seed_repo, [ENDOFTEXT, IM_END])
    full = _answer(seed_repo)
    assert full[-1] == IM_END, tokenizer.decode(full)
    answer = tokenizer.decode(full[:-1])
    assert "Paris" in answer
    # the answer's own token for " Paris" (an ordinary BPE token, not a special one)
    paris = next(i for i in full if tokenizer.decode([i]).strip() == "Paris")
    assert paris not in tokenizer.all_special_ids
    _write_eos(seed_repo, [ENDOFTEXT, IM_END, paris])

    cut = _answer(seed_repo)
    assert cut == full[: full.index(paris) + 1], "generate() stops at the first ' Paris'"
    assert len(cut) < len(full)
    assert IM_END not in cut

    result = api.check(seed_repo)
    assert result.check is not None, result.error
    (finding,) = [f for f in result.check.findings if f.code == "EOS012"]
    word = tokenizer.decode([paris])
    assert finding.message.startswith(
        f"eos_token_id holds {word!r} ({paris}), an ordinary text token, not a special or added "
        "token: a reply is cut wherever the model writes it"
    )
    assert result.check.status.value == "fixable"

    fixed = api.fix(seed_repo)
    assert fixed.written == ("generation_config.json",)
    assert GenerationConfig.from_pretrained(seed_repo).eos_token_id == [ENDOFTEXT, IM_END]
    assert _answer(seed_repo) == full  # the whole answer, ending on <|im_end|>
    assert api.check(seed_repo).check.status.value == "ok"
