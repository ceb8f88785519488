"""vLLM's stop set for each folder, from the engine's own request path (no device, no weights).

What ``LLMEngine.add_request`` does before a request reaches the scheduler, on a CPU:
``ModelConfig(model=folder)`` and a ``VllmConfig`` (device ``cpu``: the CUDA wheel cannot infer
one here), the ``InputProcessor`` (which calls ``try_get_generation_config()`` and builds the
renderer, whose tokenizer is ``cached_tokenizer_from_config``), then ``process_inputs`` with
default ``SamplingParams``, which runs ``update_from_generation_config(gen, tokenizer eos)``.
The set is ``{sampling_params.eos_token_id} | stop_token_ids``, and every id is confirmed with
the scheduler's ``check_stop`` on a ``Request`` built from the engine request.
"""

from __future__ import annotations

import importlib.metadata
import sys

from _protocol import confirm, main


def stop_set(folder: str, scan: int) -> list[int]:
    from vllm import SamplingParams
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig
    from vllm.v1.core.sched.utils import check_stop
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.request import Request

    model_config = ModelConfig(model=folder)
    config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
    processor = InputProcessor(config)
    (prompt,) = processor.renderer.render_cmpl([{"prompt_token_ids": [1]}])

    def engine_request(token_id: int):
        return processor.process_inputs(
            f"r{token_id}", prompt, SamplingParams(max_tokens=8), ("generate",)
        )

    params = engine_request(-1).sampling_params
    declared = [params.eos_token_id, *(params.stop_token_ids or ())]  # a list: values as held

    def stops(token_id: int) -> bool:
        request = Request.from_engine_core_request(engine_request(token_id), None)
        request.append_output_token_ids(token_id)
        return check_stop(request, model_config.max_model_len)

    return confirm(declared, stops, scan)


if __name__ == "__main__":
    version = importlib.metadata.version("vllm")
    details = {"transformers": importlib.metadata.version("transformers")}
    sys.exit(main("vLLM", version, details, stop_set))
