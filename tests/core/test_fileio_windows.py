"""Without fcntl (Windows): every command still runs, writes stay atomic and exclusive.

Windows is simulated on this machine: the child processes below start with ``fcntl``
unimportable and without ``os.O_DIRECTORY``, ``os.O_NOFOLLOW`` and ``os.fchmod`` (none of
them exists on Windows before Python 3.13), so eosfix takes its non-POSIX path: a
``filelock`` lock file per directory, temp files judged by age, ``chmod`` by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from eosfix import api
from eosfix.core import fileio
from tests.conftest import ROOT, SAMPLES, copy_repo
from tests.support.racing import race

SAMPLE = SAMPLES / "chatml-missing-im-end"
NEW = (SAMPLE / "fixed" / "generation_config.json").read_bytes()
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# Prepended to every child: what a Windows Python lacks.
_NO_POSIX = textwrap.dedent(
    """
    import os, sys
    sys.modules["fcntl"] = None  # import fcntl -> ImportError
    for name in ("O_DIRECTORY", "O_NOFOLLOW", "fchmod"):
        if hasattr(os, name):
            delattr(os, name)
    """
)

_RACER = _NO_POSIX + textwrap.dedent(
    """
    from eosfix import api
    from eosfix.core import fileio
    assert fileio._fcntl is None
    roots = sys.argv[1:]
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    print(sum(len(api.fix(root).written) for root in roots), flush=True)
    """
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = _NO_POSIX + "from eosfix.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_command_runs_without_fcntl(tmp_path):
    root = copy_repo(SAMPLE, tmp_path / "repo")
    (root / "generation_config.json").chmod(0o640)
    check = _cli("check", str(root))
    assert check.returncode == 1, check.stderr
    assert "EOS001" in check.stdout
    fix = _cli("fix", str(root))
    assert fix.returncode == 1, fix.stderr
    assert "Traceback" not in fix.stderr
    assert (root / "generation_config.json").read_bytes() == NEW
    assert (root / "generation_config.json").stat().st_mode & 0o777 == 0o640  # mode kept
    assert _cli("check", str(root)).returncode == 0
    explain = _cli("explain", str(root), "--format", "json")
    assert explain.returncode == 0, explain.stderr
    json.loads(explain.stdout)
    left = {p.name for p in root.iterdir()} - {p.name for p in SAMPLE.iterdir()}
    # the lock file: Windows deletes it on release; filelock on POSIX leaves it
    assert left <= {fileio._LOCK_FILE}


def test_two_processes_without_fcntl_write_each_repo_once(tmp_path):
    roots = [copy_repo(SAMPLE, tmp_path / f"r{i}") for i in range(20)]
    counts = race(_RACER, roots, timeout=300)
    assert sum(counts) == len(roots)  # the lock file made each fix exclusive
    for root in roots:
        assert (root / "generation_config.json").read_bytes() == NEW
        assert not list(root.glob(".*.eosfix-tmp"))


def test_without_fcntl_only_old_temp_files_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio, "_fcntl", None)
    fresh = tmp_path / ".a.json.1.eosfix-tmp"
    old = tmp_path / ".b.json.2.eosfix-tmp"
    fresh.write_text("x")
    old.write_text("y")
    os.utime(old, (time.time() - 120, time.time() - 120))
    assert fileio.remove_stale_temps(tmp_path) == [old]
    assert fresh.exists()
    assert not old.exists()


def test_without_fcntl_the_directory_lock_is_reentrant_and_exclusive(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio, "_fcntl", None)
    root = copy_repo(SAMPLE, tmp_path / "repo")
    with fileio.locked_dir(root), fileio.locked_dir(root / "config.json"):  # re-entrant
        # another process cannot take the same lock meanwhile
        probe = textwrap.dedent(
            f"""
            from filelock import FileLock, Timeout
            try:
                FileLock({str(root / fileio._LOCK_FILE)!r}).acquire(timeout=0)
            except Timeout:
                print("held")
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
        )
        assert out.stdout.strip() == "held"
    result = api.fix(root)
    assert result.written == ("generation_config.json",)
