"""The seed's MLX case, end to end in the real mlx-lm: SmolLM2-135M-Instruct, broken as the
seed's repo was (tokenizer eos ``<|endoftext|>``, eos 0 in config.json and
generation_config.json), answers a question greedily and runs past ``<|im_end|>`` into an
invented turn; after ``eosfix fix`` it stops right after the answer. eosfix's mlx-lm verdict
(and its predicted stop set) matches what mlx-lm did, before and after.
"""

from __future__ import annotations

import pytest

from eosfix import api
from tests.conformance.harness import predictions

pytestmark = pytest.mark.slow
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install 'eosfix[runtimes]')")

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 24  # the answer is 8 tokens; the invented turn follows at once
IM_END = "<|im_end|>"


def mlx_generate(folder) -> tuple[str, frozenset[int]]:
    """Greedy ``stream_generate`` (the ``mlx_lm.generate`` default sampler is argmax): the
    decoded reply with special tokens kept, and the ids mlx-lm stopped on."""
    import mlx_lm
    from mlx_lm.generate import stream_generate

    model, tokenizer = mlx_lm.load(str(folder))
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True)
    tokens = [r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=MAX_TOKENS)]
    return tokenizer.decode(tokens, skip_special_tokens=False), frozenset(tokenizer.eos_token_ids)


def test_seed_runs_past_im_end_in_mlx_lm_until_fixed(seed_repo):
    predicted_before, predicted_after = predictions(seed_repo, "mlx-lm")
    assert predicted_before.stops is False  # eosfix: mlx-lm misses <|im_end|>

    ran_on, stop_ids = mlx_generate(seed_repo)
    assert stop_ids == predicted_before.ids == {0}
    answer, sep, rest = ran_on.partition(IM_END)
    assert sep, ran_on
    assert "Paris" in answer
    # mlx-lm did not stop at <|im_end|>: it went on and opened a turn nobody asked for
    assert "<|im_start|>" in rest, ran_on
    assert "<|im_start|>user" in rest or "<|im_start|>system" in rest, ran_on

    result = api.fix(seed_repo)
    assert result.written == ("generation_config.json",)
    assert result.before is not None  # what fix planned; check is the folder as written
    assert result.before.proposed == (0, 2)
    assert result.check is not None
    assert result.check.stop.ids == (0, 2)

    stopped, stop_ids = mlx_generate(seed_repo)
    assert stop_ids == predicted_after.ids == {0, 2}
    assert predicted_after.stops is True  # eosfix: mlx-lm stops after the fix
    assert stopped == answer + IM_END  # the same answer, and nothing after the turn end


def test_mlx_lm_load_wires_the_stop_ids_the_conformance_tests_read(seed_repo):
    """tests/conformance reads ``load_config`` + ``load_tokenizer``; ``mlx_lm.load`` agrees."""
    import mlx_lm

    from tests.conformance.harness import mlx_lm_stop_set

    _, tokenizer = mlx_lm.load(str(seed_repo))
    assert frozenset(tokenizer.eos_token_ids) == mlx_lm_stop_set(seed_repo)
