"""An error renamed for its reader (``EosfixError.but``): the same class and fields, another
path or message, the original untouched."""

from __future__ import annotations

import pytest

from eosfix.core.errors import EosfixError, NotChecked, RepoLoadError
from eosfix.sources.hub.read import HubError


def test_a_hub_error_keeps_its_class_and_fields():
    """HubError takes keyword-only fields: a copy made by calling the class would fail."""
    error = HubError("repository not found (404)", repo_id="org/x", status=404)
    renamed = error.but(path="hf.co/org/x:Q4_K_M")
    assert type(renamed) is HubError
    assert (renamed.repo_id, renamed.status) == ("org/x", 404)
    assert str(renamed) == "hf.co/org/x:Q4_K_M: repository not found (404)"
    assert str(error) == "org/x: repository not found (404)"  # untouched


@pytest.mark.parametrize("cls", [EosfixError, RepoLoadError, NotChecked])
def test_a_message_and_a_path_each_replace_their_own_field(cls):
    error = cls("cannot read", path="/store/abc/generation_config.json")
    said = error.but(message="cannot read; no local folder either")
    assert (said.path, said.args) == (error.path, ("cannot read; no local folder either",))
    moved = error.but(path="org/name/generation_config.json")
    assert str(moved) == "org/name/generation_config.json: cannot read"
    assert error.but(path=None).path is None
