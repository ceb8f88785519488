"""Two eosfix processes on one repo, a process killed mid-fix, temp files left behind."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from eosfix import api
from eosfix.core.fileio import remove_stale_temps
from tests.conftest import ROOT, SAMPLES, copy_repo
from tests.support.racing import race

SAMPLE = SAMPLES / "chatml-missing-im-end"
OLD = (SAMPLE / "generation_config.json").read_bytes()
NEW = (SAMPLE / "fixed" / "generation_config.json").read_bytes()
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

_RACER = textwrap.dedent(
    """
    import sys
    from eosfix import api
    roots = sys.argv[1:]
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    print(sum(len(api.fix(root).written) for root in roots), flush=True)
    """
)


def test_two_processes_fixing_the_same_repos(tmp_path):
    roots = [copy_repo(SAMPLE, tmp_path / f"r{i}") for i in range(30)]
    counts = race(_RACER, roots, timeout=60)
    assert sum(counts) == len(roots)  # each repo written exactly once, by one of them
    for root in roots:
        data = (root / "generation_config.json").read_bytes()
        assert data == NEW
        json.loads(data)
        assert sorted(p.name for p in root.iterdir()) == sorted(
            p.name for p in SAMPLE.iterdir() if p.name not in ("fixed", "expected.txt")
        )


# Says "fixed" after each repo; the last repo waits for a line on stdin, which never comes:
# the kill always lands before it, whatever the speed of the machine.
_KILLED = textwrap.dedent(
    """
    import os, sys
    from eosfix.cli import main
    marks, sys.stdout = sys.stdout, open(os.devnull, "w")
    roots = sys.argv[1:]
    for i, root in enumerate(roots):
        if i == len(roots) - 1:
            sys.stdin.readline()
        main(["fix", "--config-json", root])
        print("fixed", file=marks, flush=True)
    """
)


def test_fix_killed_at_random_moments_leaves_old_or_new(tmp_path):
    rng = random.Random(6)
    old_cfg = (SAMPLE / "config.json").read_bytes()
    seen: set[tuple[bool, bool]] = set()
    for round_ in range(6):
        roots = [copy_repo(SAMPLE, tmp_path / f"k{round_}-{i}") for i in range(20)]
        with subprocess.Popen(
            [sys.executable, "-c", _KILLED, *map(str, roots)],
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as proc:
            assert proc.stdout is not None
            for _ in range(rng.randint(1, len(roots) - 2)):  # wait until some are fixed...
                assert proc.stdout.readline() == b"fixed\n"
            time.sleep(rng.uniform(0.0, 0.05))  # ...then kill at a random moment of the next
            proc.kill()
        states = set()
        for root in roots:
            gen = (root / "generation_config.json").read_bytes()
            assert gen in (OLD, NEW)
            json.loads(gen)
            cfg = (root / "config.json").read_bytes()
            json.loads(cfg)
            states.add((gen == NEW, cfg != old_cfg))
            result = api.fix(root, config_json=True)  # the next run completes the fix
            assert result.error is None
            assert (root / "generation_config.json").read_bytes() == NEW
        seen.update(states)
    assert (True, True) in seen, seen  # some repos were fixed before the kill...
    assert (False, False) in seen, seen  # ...and some not yet: killed mid-batch


def test_stale_temp_files_are_removed_on_next_write(tmp_path):
    root = copy_repo(SAMPLE, tmp_path / "repo")
    stale = root / ".generation_config.json.abc.eosfix-tmp"
    stale.write_bytes(b"half a file")
    in_use = root / ".config.json.def.eosfix-tmp"
    in_use.write_bytes(b"being written")
    fd = os.open(in_use, os.O_RDONLY)
    try:
        import fcntl  # POSIX: the non-fcntl path is tests/core/test_fileio_windows.py

        fcntl.flock(fd, fcntl.LOCK_EX)  # another writer still holds it
        assert api.fix(root).written == ("generation_config.json",)
        assert not stale.exists()
        assert in_use.exists()
    finally:
        os.close(fd)
    assert remove_stale_temps(root) == [in_use]  # its writer is gone now
    unrelated = root / "notes.eosfix-tmp.txt"
    unrelated.write_text("mine")
    assert remove_stale_temps(root) == []
    assert unrelated.exists()


def test_old_unlockable_temp_is_removed(tmp_path, monkeypatch):
    """Where flock is unavailable, only temp files older than a minute are removed."""
    from eosfix.core import fileio

    monkeypatch.setattr(fileio, "_try_flock", lambda fd: None)
    fresh = tmp_path / ".a.json.1.eosfix-tmp"
    old = tmp_path / ".b.json.2.eosfix-tmp"
    fresh.write_text("x")
    old.write_text("y")
    os.utime(old, (time.time() - 120, time.time() - 120))
    assert remove_stale_temps(tmp_path) == [old]
    assert fresh.exists()


def test_killed_process_temp_is_cleaned_by_next_cli_fix(tmp_path):
    root = copy_repo(SAMPLE, tmp_path / "repo")
    leftover = root / ".generation_config.json.zzz.eosfix-tmp"
    leftover.write_bytes(OLD[:10])
    Path(root / "generation_config.json").write_bytes(OLD)
    proc = subprocess.run(
        [sys.executable, "-m", "eosfix", "fix", str(root)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert not leftover.exists()
    assert (root / "generation_config.json").read_bytes() == NEW
