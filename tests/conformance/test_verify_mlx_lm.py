"""The seed's MLX case, end to end in the real mlx-lm: SmolLM2-135M-Instruct, broken as the
seed's repo was (tokenizer eos ``<|endoftext|>``, eos 0 in config.json and
generation_config.json), answers a question greedily and runs past ``<|im_end|>`` into an
invented turn; after ``eosfix fix`` it stops right after the answer. eosfix's mlx-lm verdict
(and its predicted stop set) matches what mlx-lm did, before and after.
"""

from __future__ import annotations

import re

import pytest

from eosfix import api
from tests.conformance.harness import predictions

pytestmark = pytest.mark.slow
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install 'eosfix[runtimes]')")

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 24  # the answer is 8 tokens; the invented turn follows at once
IM_END = "<|im_end|>"
# What the broken run must show: the turn end, then a turn nobody asked for, opened and named.
RAN_ON = re.compile(r"<\|im_end\|>.*<\|im_start\|>(user|system)", re.DOTALL)


def mlx_generate(model, tokenizer, prompt: list[int], cache) -> str:
    """Greedy ``stream_generate`` (the ``mlx_lm.generate`` default sampler is argmax) on the
    model's KV cache ``cache`` (``prompt`` is what it does not hold yet): the decoded reply
    with special tokens kept, read until mlx-lm stops, or the reply ran on into a turn of its
    own (RAN_ON: nothing after that can change a verdict), or MAX_TOKENS."""
    from mlx_lm.generate import stream_generate

    tokens: list[int] = []
    for r in stream_generate(model, tokenizer, prompt, max_tokens=MAX_TOKENS, prompt_cache=cache):
        tokens.append(r.token)
        if RAN_ON.search(tokenizer.decode(tokens, skip_special_tokens=False)):
            break
    return str(tokenizer.decode(tokens, skip_special_tokens=False))


def test_seed_runs_past_im_end_in_mlx_lm_until_fixed(seed_repo):
    import mlx_lm
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    predicted_before, predicted_after = predictions(seed_repo, "mlx-lm")
    assert predicted_before.stops is False  # eosfix: mlx-lm misses <|im_end|>

    model, tokenizer = mlx_lm.load(str(seed_repo))
    assert frozenset(tokenizer.eos_token_ids) == predicted_before.ids == {0}
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True)
    cache = make_prompt_cache(model)
    ran_on = mlx_generate(model, tokenizer, prompt, cache)
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

    # mlx-lm's stop ids are its tokenizer's, which mlx_lm.load reads from the fixed folder
    # (lazy: the weights, which fix left alone, are not read again). The reply runs on the model
    # already loaded, from the prompt's KV cache: trimmed to all but the prompt's last token,
    # which is then the only input, as mlx-lm's server reuses a cache for a prompt it has seen
    # (mlx-lm 0.32.2 mlx_lm/models/cache.py LRUPromptCache.fetch_nearest_cache, lines
    # 1652-1666, called from mlx_lm/server.py lines 1073-1105). The answer is then the same
    # tokens, and where the reply stops is stream_generate's own test (mlx_lm/generate.py
    # lines 739-740, ``if token in tokenizer.eos_token_ids: break``).
    _, tokenizer = mlx_lm.load(str(seed_repo), lazy=True)
    trim_prompt_cache(cache, cache[0].offset - (len(prompt) - 1))
    stopped = mlx_generate(model, tokenizer, prompt[-1:], cache)
    assert frozenset(tokenizer.eos_token_ids) == predicted_after.ids == {0, 2}
    assert predicted_after.stops is True  # eosfix: mlx-lm stops after the fix
    assert stopped == answer + IM_END  # the same answer, and nothing after the turn end


def test_mlx_lm_load_wires_the_stop_ids_the_conformance_tests_read(seed_repo):
    """tests/conformance reads ``load_config`` + ``load_tokenizer``; ``mlx_lm.load`` agrees."""
    import mlx_lm

    from tests.conformance.harness import mlx_lm_stop_set

    _, tokenizer = mlx_lm.load(str(seed_repo))
    assert frozenset(tokenizer.eos_token_ids) == mlx_lm_stop_set(seed_repo)
