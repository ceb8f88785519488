"""vLLM's stop set for each folder, from the engine's own request path (no device, no weights).

What ``LLMEngine.add_request`` does before a request reaches the scheduler, on a CPU:
``ModelConfig(model=folder)`` and a ``VllmConfig`` (device ``cpu``: the CUDA wheel cannot infer
one here), the ``InputProcessor`` (which calls ``try_get_generation_config()`` and builds the
renderer, whose tokenizer is ``cached_tokenizer_from_config``), then ``process_inputs`` with
default ``SamplingParams``, which runs ``update_from_generation_config(gen, tokenizer eos)``.
The set is ``{sampling_params.eos_token_id} | stop_token_ids``, and every id is confirmed with
the scheduler's ``check_stop`` on a fresh ``Request`` built from the engine request, as the
engine core builds it (``Request.from_engine_core_request`` only reads the engine request:
vllm/v1/request.py:244-270; ``check_stop`` sets the request's status: one ``Request`` per id).
"""

from __future__ import annotations

import importlib.metadata
import types

from _protocol import confirm, main


def _retry_without_waiting() -> None:
    """vLLM parses config.json a second time, 2 s after a first failure
    (vllm/transformers_utils/repo_utils.py:99-130, ``with_retry``, called by
    transformers_utils/config.py:927 ``get_config``), to wait out a Hub cache refresh that
    hides the file for a moment. A local folder does not change: both attempts still run and
    fail alike, only the wait is left out (2 s for each folder with an unreadable config.json)."""
    from vllm.transformers_utils import repo_utils

    repo_utils.time = types.SimpleNamespace(sleep=lambda seconds: None)  # type: ignore[assignment]


def stop_set(folder: str, scan: int) -> list[int]:
    from vllm import SamplingParams
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig
    from vllm.v1.core.sched.utils import check_stop
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.request import Request

    _retry_without_waiting()
    model_config = ModelConfig(model=folder)
    config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
    processor = InputProcessor(config)
    (prompt,) = processor.renderer.render_cmpl([{"prompt_token_ids": [1]}])

    engine_request = processor.process_inputs(
        "r", prompt, SamplingParams(max_tokens=8), ("generate",)
    )
    params = engine_request.sampling_params
    declared = [params.eos_token_id, *(params.stop_token_ids or ())]  # a list: values as held

    def stops(token_id: int) -> bool:
        request = Request.from_engine_core_request(engine_request, None)
        request.append_output_token_ids(token_id)
        return check_stop(request, model_config.max_model_len)

    return confirm(declared, stops, scan)


if __name__ == "__main__":
    version = importlib.metadata.version("vllm")
    details = {"transformers": importlib.metadata.version("transformers")}
    main("vLLM", version, details, stop_set)
