"""A Hub repo id as huggingface_hub validates one (``validate_repo_id``): ``org/name``, word
characters, ``-`` and ``.``, each part starting and ending with a letter or digit, no ``--`` or
``..``, a name of at most 96 characters. Here, below every layer that reads ids: what a user
typed (``eosfix.targets.parse``) and what the Hub answers (``eosfix.sources``) are held to the
same rule."""

from __future__ import annotations

import re

_HUB_ID = re.compile(
    r"(?!.*(?:--|\.\.))[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?/(?=.{1,96}$)"
    r"[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?"
)


def is_hub_id(text: str) -> bool:
    """``org/name`` shaped like a Hub repo id (whether or not a local path has that name)."""
    return _HUB_ID.fullmatch(text) is not None
