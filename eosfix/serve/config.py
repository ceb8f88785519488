"""The bot's settings: from a TOML file (``--config``), overridden by the environment.

| setting | environment | file key | default |
| --- | --- | --- | --- |
| webhook secret (required) | ``EOSFIX_WEBHOOK_SECRET`` (``WEBHOOK_SECRET`` on a Space) | ``secret`` | - |
| Hub token | ``HF_TOKEN`` | ``token`` | none (read-only) |
| repos watched | ``EOSFIX_WATCH_REPOS`` (comma-separated) | ``repos`` | all |
| authors watched | ``EOSFIX_WATCH_AUTHORS`` (comma-separated) | ``authors`` | all |
| policy: ``report`` or ``pr`` | ``EOSFIX_POLICY`` | ``policy`` | ``report`` |
| comment the report on the repo | ``EOSFIX_COMMENT`` (1/0) | ``comment`` | off |
| dry run: write nothing to the Hub | ``EOSFIX_DRY_RUN`` (1/0) | ``dry_run`` | off |
| state folder (queue, results) | ``EOSFIX_STATE_DIR`` | ``state_dir`` | ``./eosfix-serve`` |
| repos checked at once | ``EOSFIX_WORKERS`` | ``workers`` | 4 |
| attempts per push (5xx, 429, network) | ``EOSFIX_ATTEMPTS`` | ``attempts`` | 5 |
| seconds to finish in-flight work on SIGTERM | ``EOSFIX_GRACE`` | ``grace`` | 20 |
| largest request body, bytes | ``EOSFIX_MAX_BODY`` | ``max_body`` | 1048576 |
| seconds a client gets to send a whole request | ``EOSFIX_REQUEST_TIMEOUT`` | ``request_timeout`` | 10 |
| connections open at once | ``EOSFIX_MAX_CONNECTIONS`` | ``max_connections`` | 256 |
| page: checks per client per minute | ``EOSFIX_PAGE_RATE`` | ``page_rate`` | 30 |
| page: checks run at once (more wait) | ``EOSFIX_PAGE_WORKERS`` | ``page_workers`` | 4 |
| page: bytes of one form of dropped files | ``EOSFIX_PAGE_FILES_BYTES`` | ``page_files_bytes`` | 71303168 (68 MiB) |
| page: mocked sign-in (local tests only) | ``EOSFIX_PAGE_MOCK_SIGN_IN`` (1/0) | ``page_mock_sign_in`` | off |

With no repos and no authors, every model repo whose webhook reaches the bot is watched (the
Hub's webhook settings already choose them). A bad file or value is one ``ServeConfigError``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from eosfix.core.errors import EosfixError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

POLICIES = ("report", "pr")


class ServeConfigError(EosfixError):
    """The bot's configuration cannot be used."""


@dataclass(frozen=True)
class ServeConfig:
    secret: str
    token: str | None = None
    repos: frozenset[str] = field(default_factory=frozenset)
    authors: frozenset[str] = field(default_factory=frozenset)
    policy: str = "report"
    comment: bool = False
    dry_run: bool = False
    state_dir: Path = Path("eosfix-serve")
    workers: int = 4
    attempts: int = 5
    grace: float = 20.0
    max_body: int = 1024 * 1024  # a Hub webhook is a few kB
    request_timeout: float = 10.0
    max_connections: int = 256  # and never more than the open-file limit leaves room for
    page_rate: int = 30
    page_workers: int = 4
    # a form of a model's files: tokenizer.json at the Hub reader's cap, and 4 MiB for the rest
    page_files_bytes: int = 68 * 1024 * 1024
    page_mock_sign_in: bool = False

    def watches(self, repo_id: str) -> bool:
        """Whether pushes to ``repo_id`` are checked."""
        if not self.repos and not self.authors:
            return True
        return repo_id in self.repos or repo_id.split("/", 1)[0] in self.authors


_ENV = {
    "secret": ("EOSFIX_WEBHOOK_SECRET", "WEBHOOK_SECRET"),
    "token": ("HF_TOKEN",),
    "repos": ("EOSFIX_WATCH_REPOS",),
    "authors": ("EOSFIX_WATCH_AUTHORS",),
    "policy": ("EOSFIX_POLICY",),
    "comment": ("EOSFIX_COMMENT",),
    "dry_run": ("EOSFIX_DRY_RUN",),
    "state_dir": ("EOSFIX_STATE_DIR",),
    "workers": ("EOSFIX_WORKERS",),
    "attempts": ("EOSFIX_ATTEMPTS",),
    "grace": ("EOSFIX_GRACE",),
    "max_body": ("EOSFIX_MAX_BODY",),
    "request_timeout": ("EOSFIX_REQUEST_TIMEOUT",),
    "max_connections": ("EOSFIX_MAX_CONNECTIONS",),
    "page_rate": ("EOSFIX_PAGE_RATE",),
    "page_workers": ("EOSFIX_PAGE_WORKERS",),
    "page_files_bytes": ("EOSFIX_PAGE_FILES_BYTES",),
    "page_mock_sign_in": ("EOSFIX_PAGE_MOCK_SIGN_IN",),
}


def _names(value: Any, where: str) -> frozenset[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ServeConfigError(f"{where}: expected names separated by commas")
    return frozenset(i.strip() for i in items if i.strip())


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ServeConfigError(f"{where}: expected 1 or 0, got {value!r}")


def _number(value: Any, where: str, kind: type[int | float], low: float) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ServeConfigError(f"{where}: expected a number, got {value!r}") from None
    if number < low:
        raise ServeConfigError(f"{where}: must be at least {low}, got {value!r}")
    return number


def _convert(name: str, value: Any, where: str) -> Any:
    if name in ("repos", "authors"):
        return _names(value, where)
    if name in ("comment", "dry_run", "page_mock_sign_in"):
        return _flag(value, where)
    if name in ("workers", "attempts", "max_body", "max_connections", "page_rate", "page_workers",
                "page_files_bytes"):  # fmt: skip
        return _number(value, where, int, 1)
    if name == "grace":
        return _number(value, where, float, 0)
    if name == "request_timeout":
        return _number(value, where, float, 0.1)
    if name == "state_dir":
        return Path(str(value))
    if name == "policy" and value not in POLICIES:
        raise ServeConfigError(f"{where}: expected one of {', '.join(POLICIES)}, got {value!r}")
    if not isinstance(value, str):
        raise ServeConfigError(f"{where}: expected text, got {value!r}")
    return value


def load_config(
    path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ServeConfig:
    """The settings of ``path`` (a TOML file, its table ``[eosfix.serve]`` or top level), then
    the environment over them."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ServeConfigError(f"cannot read the configuration: {exc}", path=path) from None
        table = data.get("eosfix", {}).get("serve", data) if isinstance(data, dict) else {}
        known = {f.name for f in fields(ServeConfig)}
        unknown = sorted(set(table) - known - {"eosfix"})
        if unknown:
            raise ServeConfigError(f"unknown setting {unknown[0]!r}", path=path)
        values.update({k: _convert(k, v, f"{path}: {k}") for k, v in table.items() if k in known})
    for name, keys in _ENV.items():
        for key in keys:
            if env.get(key) not in (None, ""):
                values[name] = _convert(name, env[key], key)
                break
    if not values.get("secret"):
        raise ServeConfigError(
            "no webhook secret: set EOSFIX_WEBHOOK_SECRET (the secret entered in the Hub's "
            "webhook settings)"
        )
    if values.get("policy") == "pr" and not values.get("token") and not values.get("dry_run"):
        raise ServeConfigError("policy 'pr' needs HF_TOKEN (a token that can open PRs)")
    return ServeConfig(**values)
