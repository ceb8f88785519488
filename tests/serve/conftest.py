"""The page signed in: served with huggingface_hub's mocked OAuth routes, the user's token
``tests.support.serve.USER_TOKEN``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.serve import USER_TOKEN


@pytest.fixture
def signed(fake_hub, tmp_path, monkeypatch) -> Iterator:
    pytest.importorskip("fastapi")
    pytest.importorskip("multipart")
    from eosfix.serve.config import ServeConfig
    from tests.serve.pagekit import Page

    monkeypatch.setenv("HF_TOKEN", USER_TOKEN)
    monkeypatch.delenv("SPACE_ID", raising=False)
    config = ServeConfig(
        secret="s", state_dir=tmp_path / "state", page_rate=1000, page_mock_sign_in=True
    )
    with Page(config) as p:
        yield p
