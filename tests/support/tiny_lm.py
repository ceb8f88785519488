"""A scripted causal LM and a WordLevel tokenizer, to run the real ``generate()`` without weights.

``ScriptedLM`` is a transformers ``PreTrainedModel``: whatever the input, its logits at the
position after ``prompt_len + k`` tokens put all the mass on ``script[k]``, so greedy generation
replays ``script``. Whether generation stops inside the script is decided only by
transformers' own stopping criteria, fed by a ``GenerationConfig``.

``scripted_lm`` imports torch and transformers on first use; the tokenizer helpers need only
the ``tokenizers`` library.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers

_PIECES = r"\w+|[^\w\s]|\s+"


@functools.cache
def _classes() -> tuple[type, type]:
    """Define the model classes on first use, so the tokenizer helpers need no torch."""
    import torch
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    class ScriptedConfig(PretrainedConfig):
        model_type = "eosfix-scripted"

        def __init__(
            self, vocab_size: int = 8, script: Sequence[int] = (0,), prompt_len: int = 0, **kwargs
        ):
            self.vocab_size = vocab_size
            self.script = list(script)
            self.prompt_len = prompt_len
            self.num_hidden_layers = 1
            super().__init__(**kwargs)

    class ScriptedLM(PreTrainedModel, GenerationMixin):
        """Greedy generation replays ``config.script`` after ``config.prompt_len`` tokens."""

        config_class = ScriptedConfig
        main_input_name = "input_ids"

        def __init__(self, config: ScriptedConfig):
            super().__init__(config)
            self.unused = torch.nn.Parameter(torch.zeros(1))  # a model needs one parameter
            self.post_init()

        def forward(self, input_ids, attention_mask=None, **_: object):
            batch, length = input_ids.shape
            logits = torch.full((batch, length, self.config.vocab_size), -1e4)
            script = self.config.script
            for pos in range(length):  # the logits at ``pos`` choose the token at ``pos + 1``
                step = min(max(pos + 1 - self.config.prompt_len, 0), len(script) - 1)
                logits[:, pos, script[step]] = 0.0
            return CausalLMOutput(logits=logits)

    return ScriptedConfig, ScriptedLM


def scripted_lm(script: Sequence[int], prompt_len: int, vocab_size: int):
    """A model whose greedy generation after ``prompt_len`` prompt tokens replays ``script``."""
    config_cls, model_cls = _classes()
    config = config_cls(
        vocab_size=vocab_size, script=script, prompt_len=prompt_len, use_cache=False
    )
    return model_cls(config)


def word_level_tokenizer(texts: Iterable[str], added: Mapping[str, int]) -> Tokenizer:
    """A WordLevel tokenizer: ``added`` (special tokens at their real ids) plus every word,
    punctuation mark and whitespace run of ``texts`` at ids above them."""
    added_re = re.compile("|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)))
    words: dict[str, None] = {}
    for text in texts:
        for chunk in added_re.split(text) if added else [text]:
            words.update(dict.fromkeys(re.findall(_PIECES, chunk)))
    vocab = dict(added)
    next_id = max(added.values(), default=-1) + 1
    for word in ["[UNK]", *words]:
        if word not in vocab:
            vocab[word] = next_id
            next_id += 1
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_PIECES), behavior="isolated")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    return tok


def save_tokenizer(tok: Tokenizer, folder: Path) -> Path:
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path
