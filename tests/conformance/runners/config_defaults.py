"""The ``eos_token_id`` default of every config class a runtime builds from config.json.

vLLM and SGLang read the config *object* transformers builds from config.json: where the file
has no ``eos_token_id`` key, the attribute is the config class's default (``LlamaConfig``: 2),
or absent when the class has none. The class is transformers' for the ``model_type``
(``CONFIG_MAPPING``) unless the runtime registers its own (``_CONFIG_REGISTRY`` in
``vllm/transformers_utils/config.py`` and ``sglang/srt/utils/hf_transformers/common.py``).

``python config_defaults.py --out FILE TABLE...`` (``transformers``, ``vllm``, ``sglang``) writes
``{TABLE: {"transformers": version, "defaults": {model_type: default}}}``, listing every class
that has the attribute (``null``: it defaults to None); a class missing from the list has none,
and a class that cannot be built without arguments is listed under ``errors``. eosfix keeps these
tables in ``eosfix/runtimes/config_defaults.py``; tests/conformance compares the two.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import json
import logging
import sys
import warnings


def _registry(runtime: str) -> dict[str, type]:
    if runtime == "vllm":
        module = importlib.import_module("vllm.transformers_utils.config")
    elif runtime == "sglang":
        module = importlib.import_module("sglang.srt.utils.hf_transformers.common")
    else:
        return {}
    registry = module._CONFIG_REGISTRY
    return {name: registry[name] for name in list(registry.keys())}


_BUILT: dict[type, tuple[str, object]] = {}  # a class's default, asked once for every table


def _default(cls: type) -> tuple[str, object]:
    """``("default", value)``, ``("absent", None)`` or ``("error", exception name)``."""
    if cls not in _BUILT:
        try:
            config = cls()
        except Exception as exc:  # noqa: BLE001 - a class that needs arguments is reported
            _BUILT[cls] = ("error", type(exc).__name__)
        else:
            has = hasattr(config, "eos_token_id")
            _BUILT[cls] = ("default", config.eos_token_id) if has else ("absent", None)
    return _BUILT[cls]


def _table(runtime: str) -> dict[str, object]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    classes: dict[str, type] = {name: CONFIG_MAPPING[name] for name in CONFIG_MAPPING}
    classes.update(_registry(runtime))
    defaults: dict[str, object] = {}
    errors: dict[str, str] = {}
    for model_type, cls in sorted(classes.items()):
        kind, value = _default(cls)
        if kind == "error":
            errors[model_type] = str(value)
        elif kind == "default":
            defaults[model_type] = value
    return {
        "runtime": runtime,
        "transformers": importlib.metadata.version("transformers"),
        "defaults": defaults,
        "errors": errors,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("tables", nargs="+", choices=["transformers", "vllm", "sglang"])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    # A thousand configuration modules imported and as many classes built, in one short
    # process: Python's cyclic collector, run again and again over the growing heap, was a
    # sixth to a third of the time; no default depends on when cycles are freed.
    gc.disable()
    document = {name: _table(name) for name in args.tables}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
