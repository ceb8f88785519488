"""eosfix: make chat models stop where they should."""

from __future__ import annotations

__version__ = "0.1.0"
