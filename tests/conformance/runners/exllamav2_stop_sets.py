"""ExLlamaV2's stop id for each folder, from its own loader (no CUDA, no weights).

``import exllamav2`` compiles a CUDA extension (``exllamav2_ext``) on first use; no loading
code below calls it, so an empty module stands in for it, and nothing else is replaced. Then
what an application does before generating: ``ExLlamaV2Config(folder).prepare(no_tensors=True)``
and ``ExLlamaV2Tokenizer(config)``. ExLlamaV2's generators stop on ``tokenizer.eos_token_id``
(``generator/streaming.py``: ``self.stop_tokens = {tokenizer.eos_token_id,}``;
``generator/base.py``: ``stop_token = -1`` means it); ``config.generation_config`` is read but
no generator uses it (applications such as TabbyAPI may).
"""

from __future__ import annotations

import importlib.metadata
import sys
import types

from _protocol import main

# exllamav2/ext.py: `import exllamav2_ext` succeeds, so no JIT build is attempted
sys.modules["exllamav2_ext"] = types.ModuleType("exllamav2_ext")


def stop_set(folder: str, scan: int) -> list[int]:
    from exllamav2 import ExLlamaV2Config, ExLlamaV2Tokenizer

    config = ExLlamaV2Config(folder)
    config.prepare(no_tensors=True)
    tokenizer = ExLlamaV2Tokenizer(config)
    return sorted({tokenizer.eos_token_id} - {None})


if __name__ == "__main__":
    details = {"extension": "stubbed (exllamav2_ext: an empty module)"}
    main("ExLlamaV2", importlib.metadata.version("exllamav2"), details, stop_set)
