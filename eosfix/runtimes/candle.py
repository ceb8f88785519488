"""candle's llama example: config.json only, else ``</s>``."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs, ids_of, one


def _candle(x: StopInputs) -> frozenset[int]:
    # huggingface/candle candle-examples/examples/llama/main.rs: config.json, else "</s>"
    if x.config_eos is not None:
        return ids_of(x.config_eos)
    return one(x.vocab.get("</s>"))


RUNTIME = Runtime(
    name="candle",
    reads="config.json (top level), else </s>",
    source="huggingface/candle candle-examples/examples/llama/main.rs @2a13b0f3",
    derive=_candle,
    note="llama example",
    config_only=True,
)
