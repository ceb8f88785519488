"""eosfix/runtimes/config_defaults.py holds what transformers and vLLM's and SGLang's own config
registries say each config class defaults ``eos_token_id`` to (asked in their virtualenvs)."""

from __future__ import annotations

import pytest

from eosfix.runtimes import config_defaults
from tests.conformance import external, venvs
from tests.conftest import tool

defaults = tool("gen_config_defaults")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config_class_defaults():
    """What transformers', vLLM's and SGLang's config registries say, asked in their
    virtualenvs (tools/gen_config_defaults.py's ``collect``): once per lock and runner source,
    then kept in the virtualenv (nothing of eosfix's goes into the answer; the comparison with
    eosfix's tables runs every time)."""
    try:
        return defaults.collect()
    except LookupError as exc:
        if external.required():
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def test_the_tables_are_what_the_runtimes_say(config_class_defaults):
    assert (
        config_class_defaults["transformers"]["transformers"]
        == config_defaults.TRANSFORMERS_VERSION
    )
    assert defaults.table(config_class_defaults["transformers"]) == config_defaults.TRANSFORMERS
    base = config_defaults.TRANSFORMERS
    for name, table in (("vllm", config_defaults.VLLM), ("sglang", config_defaults.SGLANG)):
        document = config_class_defaults[name]
        assert document["transformers"] == config_defaults.TRANSFORMERS_VERSION
        assert table == defaults.table(document), name
        changes = getattr(config_defaults, f"{name.upper()}_CHANGES")
        assert changes == {
            k: getattr(config_defaults, v) if v in ("ABSENT", "UNKNOWN") else v
            for k, v in defaults.changes(base, document).items()
        }


def test_the_module_is_what_the_generator_writes(config_class_defaults):
    """``python tools/gen_config_defaults.py`` would write the committed file unchanged."""
    assert defaults.render(config_class_defaults) == config_defaults.__loader__.get_source(  # type: ignore[union-attr]
        config_defaults.__name__
    )


def test_llama_defaults_to_2_and_llava_has_none():
    assert config_defaults.VLLM["llama"] == config_defaults.SGLANG["llama"] == 2
    assert "llava" not in config_defaults.VLLM
    assert venvs.VENVS["vllm"].lock.is_file()
