"""ExLlamaV2: config.json, and only the first id of a list."""

from __future__ import annotations

from eosfix.runtimes.base import Runtime, StopInputs


def _exllamav2(x: StopInputs) -> frozenset[int]:
    # turboderp/exllamav2 exllamav2/config.py: config.json eos_token_id, list -> [0] only
    return frozenset(x.config_eos[:1]) if x.config_eos else frozenset()


RUNTIME = Runtime(
    name="ExLlamaV2",
    reads="config.json",
    source="turboderp/exllamav2 exllamav2/config.py @b9c025b4",
    derive=_exllamav2,
    note="keeps only the first id of config.json",
    config_only=True,
    first_id_only=True,
)
