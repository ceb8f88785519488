"""The wheelhouse the pre-commit tests' hook virtualenvs install eosfix's dependencies from.

pre-commit makes a hook's virtualenv and runs ``pip install .`` in its clone of the hook repo;
pip then builds eosfix (its ``[build-system] requires`` in an isolated environment) and
resolves ``[project] dependencies``. Those two requirement lists are all the index is asked
about, so they are the key: ``pip wheel`` fetches (or builds) a wheel for each, once per
machine, into ``$EOSFIX_TEST_CACHE/wheelhouse-<key>`` (default ``~/.cache/eosfix-tests``),
and the hook's pip resolves the same requirements against that folder alone. A changed
dependency, floor, build backend or Python makes a new key, so a new wheelhouse.

Made under a lock (workers and CI's stage 0 side by side build it once), in a temporary
folder renamed into place when complete, so a reader never sees half of one. Standard library
only: CI's stage 0 runs it with the system Python, before any virtualenv exists.

    python -m tests.support.wheelhouse create   # what CI's stage 0 runs
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # eosfix's own dependency there
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """What ``pip install .`` asks the index for: the build requirements, then the
    dependencies, as pyproject.toml spells them."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return [*data["build-system"]["requires"], *data["project"]["dependencies"]]


def key(reqs: list[str]) -> str:
    """The requirements and the interpreter that picks wheels for them (version, platform)."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    text = json.dumps([python, sysconfig.get_platform(), reqs])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _cache() -> Path:
    default = Path.home() / ".cache" / "eosfix-tests"
    return Path(os.environ.get("EOSFIX_TEST_CACHE", default))


def folder(reqs: list[str]) -> Path:
    return _cache() / f"wheelhouse-{key(reqs)}"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:  # no flock (Windows): the rename below still never shows half
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wheelhouse(reqs: list[str] | None = None) -> Path:
    """The folder of wheels for ``reqs`` (default: pyproject.toml's), made now if absent
    (from the package index; LookupError naming pip's complaint when that fails)."""
    reqs = requirements() if reqs is None else reqs
    target = folder(reqs)
    if target.is_dir():
        return target
    with _locked(target.with_name(target.name + ".lock")):
        if target.is_dir():  # made while this process waited for the lock
            return target
        building = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
        try:
            cmd = [sys.executable, "-m", "pip", "wheel", "--quiet",
                   "--disable-pip-version-check", "--wheel-dir", str(building), *reqs]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
            if proc.returncode != 0:
                raise LookupError(f"cannot make the wheelhouse {target}: {proc.stderr[-500:]}")
            building.rename(target)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return target


def main(argv: list[str]) -> int:
    if argv != ["create"]:
        print(__doc__, file=sys.stderr)
        return 2
    made = wheelhouse()
    print(f"wheelhouse: {made}, {len(list(made.glob('*.whl')))} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
