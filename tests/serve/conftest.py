"""Fixtures shared by the bot's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def one_worker(fake_hub, tmp_path) -> Iterator[Any]:
    """The bot serving with one worker and policy ``pr`` (``tests.serve.test_bot.Service``)."""
    from eosfix.serve.config import ServeConfig
    from tests.serve.test_bot import SECRET, Service

    config = ServeConfig(
        secret=SECRET, token="hf_test", policy="pr", workers=1, state_dir=tmp_path / "state"
    )
    with Service(config) as s:
        yield s
