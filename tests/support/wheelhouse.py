"""The wheelhouse the pre-commit tests' hook virtualenvs install eosfix's dependencies from.

pre-commit makes a hook's virtualenv and runs ``pip install .`` in its clone of the hook repo;
pip then builds eosfix (its ``[build-system] requires`` in an isolated environment) and
resolves ``[project] dependencies``. Those two requirement lists are all the index is asked
about, so they are the key: ``pip wheel`` fetches (or builds) a wheel for each, once per
machine, into ``$EOSFIX_TEST_CACHE/wheelhouse-<key>`` (default ``~/.cache/eosfix-tests``),
and the hook's pip resolves the same requirements against that folder alone. A changed
dependency, floor, build backend or Python makes a new key, so a new wheelhouse.

Made once by ``tests/support/testcache.py built_once`` (under a lock: workers and CI's stage 0
side by side build it once; renamed into place when complete, so a reader never sees half of
one). Standard library only: CI's stage 0 runs it with the system Python, before any
virtualenv exists.

    python -m tests.support.wheelhouse create   # what CI's stage 0 runs
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # eosfix's own dependency there
    import tomli as tomllib

from tests.support.testcache import built_once, kept

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """What ``pip install .`` asks the index for: the build requirements, then the
    dependencies, as pyproject.toml spells them."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return [*data["build-system"]["requires"], *data["project"]["dependencies"]]


def _inputs(reqs: list[str]) -> list[bytes]:
    """The requirements and the interpreter that picks wheels for them (version, platform)."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return [json.dumps([python, sysconfig.get_platform(), reqs]).encode()]


def folder(reqs: list[str]) -> Path:
    """Where the wheelhouse for ``reqs`` is kept (made or not)."""
    return kept("wheelhouse", _inputs(reqs))


def wheelhouse(reqs: list[str] | None = None) -> Path:
    """The folder of wheels for ``reqs`` (default: pyproject.toml's), made now if absent
    (from the package index; LookupError naming pip's complaint when that fails)."""
    reqs = requirements() if reqs is None else reqs

    def build(into: Path) -> None:
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet",
               "--disable-pip-version-check", "--wheel-dir", str(into), *reqs]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise LookupError(f"cannot make the wheelhouse of {reqs}: {proc.stderr[-500:]}")

    return built_once("wheelhouse", _inputs(reqs), build)


def main(argv: list[str]) -> int:
    if argv != ["create"]:
        print(__doc__, file=sys.stderr)
        return 2
    made = wheelhouse()
    print(f"wheelhouse: {made}, {len(list(made.glob('*.whl')))} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
