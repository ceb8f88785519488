"""candle's llama example: config.json only, else ``</s>``.

Modelled, not executed (no Rust crates registry here), from huggingface/candle at 2a13b0f3
(2026-08-14): ``candle-examples/examples/llama/main.rs`` reads ``config.json`` into a
``LlamaConfig`` (lines 177-178), takes ``config.eos_token_id``, else the tokenizer's ``</s>``
(lines 211-215, ``EOS_TOKEN`` line 27), and its loop stops on that id or any id of the list
(lines 273-278); ``candle-transformers/src/models/llama.rs`` ``LlamaEosToks`` is an int or a
list (lines 31-36), ``LlamaConfig.eos_token_id`` the top-level key only (line 50).
"""

from __future__ import annotations

from eosfix.core.repo import CONFIG, TOKENIZER_JSON
from eosfix.runtimes.rule import Refusals, Runtime, StopInputs, ids_of, one, refusing


def _candle(x: StopInputs) -> frozenset[int]:
    # huggingface/candle candle-examples/examples/llama/main.rs: config.json, else "</s>"
    if x.config_eos is not None:
        return ids_of(x.config_eos)
    return one(x.vocab.get("</s>"))


RUNTIME = Runtime(
    name="candle",
    reads="config.json (top level), else </s>",
    source="huggingface/candle@2a13b0f3 candle-examples/examples/llama/main.rs lines 177-178, "
    "211-215, 273-278; candle-transformers/src/models/llama.rs LlamaEosToks (lines 31-36)",
    derive=_candle,
    note="llama example",
    config_only=True,
    # serde_json::from_slice (config.json) and the tokenizers crate (tokenizer.json) refuse a
    # mark: "expected value at line 1 column 1" (the tokenizers crate executed under
    # ExLlamaV2, tests/conformance/); modelled for candle
    refusals=Refusals(files=refusing(CONFIG, TOKENIZER_JSON)),
)
