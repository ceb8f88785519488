"""``[tool.eosfix]`` in the nearest ``pyproject.toml``: option defaults for check, fix, explain.

Like ruff, the table is looked for from the current folder upward, and the first
``pyproject.toml`` that has one is used (pre-commit runs hooks from the repository's root, so
the hook picks up the project's table). Options given on the command line win. Keys are the
long option names without ``--``::

    [tool.eosfix]
    keep-id = [151643]          # --keep-id (a list, or one integer)
    strict = true               # --strict
    config-json = true          # --config-json (check and fix)
    format = "github"           # --format (check and fix)
    quiet = true                # --quiet (check and fix)
    runtime = ["mlx-lm==0.31.3"]  # --runtime

A table eosfix cannot use (invalid TOML, an unknown key, a value of the wrong type) is one
line naming the file and the key, exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eosfix.core.errors import EosfixError

PYPROJECT = "pyproject.toml"
COMMANDS = ("check", "fix", "explain")  # the commands the table gives defaults to


class ConfigError(EosfixError):
    """``[tool.eosfix]`` cannot be used: one line naming the file and the key."""


def _ids(value: object) -> list[int] | None:
    items = value if isinstance(value, list) else [value]
    ids = [i for i in items if isinstance(i, int) and not isinstance(i, bool) and i >= 0]
    return ids if len(ids) == len(items) else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _strings(value: object) -> list[str] | None:
    items = value if isinstance(value, list) else [value]
    return [str(i) for i in items] if all(isinstance(i, str) for i in items) else None


def _format(value: object) -> str | None:
    from eosfix.render.report import RENDERER_BY_NAME

    return value if isinstance(value, str) and value in RENDERER_BY_NAME else None


def _format_choices() -> str:
    from eosfix.render.report import RENDERER_BY_NAME

    return "one of " + ", ".join(sorted(RENDERER_BY_NAME))


# key -> (the click parameter it sets, the commands that take it, parse, what is expected)
_KEYS: dict[str, tuple[str, tuple[str, ...], Callable[[object], Any], Callable[[], str]]] = {
    "keep-id": ("keep_ids", COMMANDS, _ids, lambda: "an id >= 0 or a list of them"),
    "strict": ("strict", ("check", "fix"), _flag, lambda: "true or false"),
    "config-json": ("config_json", ("check", "fix"), _flag, lambda: "true or false"),
    "format": ("fmt", ("check", "fix"), _format, _format_choices),
    "quiet": ("quiet", ("check", "fix"), _flag, lambda: "true or false"),
    "runtime": ("pins", COMMANDS, _strings, lambda: 'a "NAME==VERSION" string or a list'),
}


def find_pyproject(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.eosfix]``
    table, with that table; None when there is none."""
    folder = start.absolute()
    for where in (folder, *folder.parents):
        path = where / PYPROJECT
        if path.is_file():
            table = _read_table(path, start)
            if table is not None:
                return path, table
    return None


def _shown(path: Path, start: Path) -> str:
    return os.path.relpath(path, start.absolute())


def _read_table(path: Path, start: Path) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"cannot read: {reason}", path=_shown(path, start)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=_shown(path, start)) from None
    tool = data.get("tool")
    table = tool.get("eosfix") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError("[tool.eosfix] must be a table", path=_shown(path, start))
    return table


def option_defaults(start: Path) -> dict[str, dict[str, Any]]:
    """click's ``default_map`` for each command of COMMANDS, from the nearest table."""
    found = find_pyproject(start)
    if found is None:
        return {}
    path, table = found
    shown = _shown(path, start)
    out: dict[str, dict[str, Any]] = {name: {} for name in COMMANDS}
    for key, value in table.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"[tool.eosfix] unknown key {key!r} (known: {known})", path=shown)
        param, commands, parse, expected = _KEYS[key]
        parsed = parse(value)
        if parsed is None:
            raise ConfigError(
                f"[tool.eosfix] {key} = {_toml(value)}: expected {expected()}", path=shown
            )
        if key == "runtime":
            _check_pins(parsed, shown)
        for name in commands:
            out[name][param] = parsed
    return out


def _check_pins(pins: list[str], shown: str) -> None:
    from eosfix.runtimes import parse_pins

    try:
        parse_pins(tuple(pins))
    except ValueError as exc:
        raise ConfigError(f"[tool.eosfix] runtime: {exc}", path=shown) from None


def _toml(value: object) -> str:
    """A value as TOML shows it (enough for a message)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{...}"
    return str(value)
