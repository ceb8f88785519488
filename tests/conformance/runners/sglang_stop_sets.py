"""SGLang's stop set for each folder, from the scheduler's own objects (no device, no weights).

What the scheduler builds for a request, on a CPU: ``ModelConfig(model_path=folder)``, whose
``hf_eos_token_id`` unites config.json's eos (as the loaded config object holds it) with a truthy
generation_config.json eos; the tokenizer as ``Scheduler.init_tokenizer`` loads it
(``get_tokenizer``, or ``get_processor`` for a multimodal model), to which
``attach_additional_stop_token_ids`` adds the ids of some added tokens; then a ``Req`` with
``eos_token_ids=hf_eos_token_id`` and that tokenizer. The set is what
``Req._check_token_based_finish`` reads (sampling ``stop_token_ids``, the request's eos ids, the
tokenizer's eos and its additional stop ids), and every id is confirmed by calling it.
"""

from __future__ import annotations

import importlib.metadata
from array import array

from _protocol import confirm, main


def stop_set(folder: str, scan: int) -> list[int]:
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.utils.hf_transformers_utils import (
        get_processor,
        get_tokenizer,
        get_tokenizer_from_processor,
    )

    model_config = ModelConfig(model_path=folder)
    if model_config.is_multimodal:
        tokenizer = get_tokenizer_from_processor(get_processor(folder, model_name=folder))
    else:
        tokenizer = get_tokenizer(folder)

    def request() -> Req:
        params = SamplingParams(max_new_tokens=8)
        params.normalize(tokenizer)
        req = Req(
            "r", "", array("q", [1]), params,
            eos_token_ids=model_config.hf_eos_token_id, vocab_size=model_config.vocab_size,
        )  # fmt: skip
        req.tokenizer = tokenizer
        return req

    req = request()
    declared = [  # a list: the values as the fields hold them (confirm compares them)
        *(req.sampling_params.stop_token_ids or ()),
        *(req.eos_token_ids or ()),
        tokenizer.eos_token_id,
        *(tokenizer.additional_stop_token_ids or ()),
    ]

    def stops(token_id: int) -> bool:
        req = request()
        req.output_ids.append(token_id)
        return req._check_token_based_finish([token_id])

    return confirm(declared, stops, scan)


if __name__ == "__main__":
    version = importlib.metadata.version("sglang")
    details = {"transformers": importlib.metadata.version("transformers")}
    main("SGLang", version, details, stop_set)
