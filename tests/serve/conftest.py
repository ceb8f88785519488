"""Fixtures shared by the bot's and the page's tests: the bot with one worker, and the page
signed in (huggingface_hub's mocked OAuth routes, the user's token
``tests.support.serve.USER_TOKEN``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.serve import USER_TOKEN


@pytest.fixture
def one_worker(fake_hub, tmp_path) -> Iterator[Any]:
    """The bot serving with one worker and policy ``pr`` (``tests.support.service.Service``)."""
    from tests.support.service import Service, bot_config

    with Service(bot_config(tmp_path, workers=1)) as s:
        yield s


@pytest.fixture
def signed(fake_hub, tmp_path, monkeypatch) -> Iterator[Any]:
    pytest.importorskip("fastapi")
    pytest.importorskip("multipart")
    from eosfix.serve.config import ServeConfig
    from tests.support.service import Page

    monkeypatch.setenv("HF_TOKEN", USER_TOKEN)
    monkeypatch.delenv("SPACE_ID", raising=False)
    config = ServeConfig(
        secret="s", state_dir=tmp_path / "state", page_rate=1000, page_mock_sign_in=True
    )
    with Page(config) as p:
        yield p
