"""Faults: nothing lost, nothing hung, nothing left running.

Each test reproduces one fault of the fault-injection pass and asserts what eosfix now does:
files are their old or their new bytes, bad input is one line and exit 2, a stale marker is
repaired, workers die with their parent. Kill points are deterministic (an environment hook
or an event waited for), never a wall-clock window.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.file_download import _CACHED_NO_EXIST

from eosfix.cli import cli
from eosfix.core import repo as repolib
from eosfix.core.errors import RepoLoadError
from eosfix.core.repo import TokenizerJson
from tests.conftest import SAMPLES, copy_repo
from tests.support import memory
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.processes import alive, children, wait_for

GEN = "generation_config.json"
ROOT = Path(__file__).resolve().parent.parent
_CLI = [sys.executable, "-c", "import sys; from eosfix.cli import main; sys.exit(main())"]


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _snapshot_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# --- 1. a stale .no_exist marker ---------------------------------------------------------------


def test_stale_no_exist_marker_is_removed_on_the_next_fix(tmp_path):
    """A run killed after writing generation_config.json but before deleting its marker: the
    file is right, so the analysis says ok, but huggingface_hub still answers "no such file"."""
    b = CacheBuilder(tmp_path / "hub")
    sha = b.add_revision(
        "org/nogen", chatml_files(2000, generation_config=False, template_file=False)
    )
    snap = b.snapshot("org/nogen", sha)
    _cli("cache", "--cache-dir", str(b.root), "--repo", "org/nogen", "--fix")
    assert (snap / GEN).is_file()
    marker = b.repo_dir("org/nogen") / ".no_exist" / sha / GEN
    marker.parent.mkdir(parents=True)
    marker.touch()  # the state a kill between the write and the unlink leaves
    kwargs = {"cache_dir": b.root, "revision": sha}
    assert try_to_load_from_cache("org/nogen", GEN, **kwargs) is _CACHED_NO_EXIST
    _cli("cache", "--cache-dir", str(b.root), "--repo", "org/nogen", "--fix")
    assert not marker.exists()
    assert try_to_load_from_cache("org/nogen", GEN, **kwargs) == str(snap / GEN)


# --- 3. devices and FIFOs ----------------------------------------------------------------------


def _rss_limited(args: list[str], cwd: Path, limit: int = 1 << 30) -> subprocess.CompletedProcess:
    """Run the CLI in a child whose address space is capped, so a regression fails the test
    (MemoryError, exit 3) instead of eating the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit * 3, limit * 3))

    return subprocess.run(
        [*_CLI, *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=120,  # a hang is the failure; a healthy run takes about a second
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("name", ["chat_template.jinja", GEN, "tokenizer.json"])
def test_dev_zero_link_is_refused_in_one_line(tmp_path, name):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    (repo / name).unlink(missing_ok=True)
    os.symlink("/dev/zero", repo / name)
    before = _snapshot_files(repo)
    proc = _rss_limited(["fix", str(repo)], tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = f"error: {repo / name}: is not a regular file (a device, FIFO or socket); "
    assert proc.stderr.strip().splitlines() == [line + "refusing to read it"]
    assert _snapshot_files(repo) == before


@pytest.mark.parametrize("name", [GEN, "tokenizer_config.json"])
def test_fifo_is_refused_not_waited_on(tmp_path, name):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    (repo / name).unlink(missing_ok=True)
    os.mkfifo(repo / name)
    proc = _rss_limited(["check", str(repo)], tmp_path)
    assert proc.returncode == 2
    assert "is not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_gguf_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "m.gguf")
    proc = _rss_limited(["check", str(tmp_path / "m.gguf")], tmp_path)
    assert proc.returncode == 2
    assert "is not a regular file" in proc.stderr


def test_dev_zero_link_in_a_cache_is_one_repo_error(tmp_path):
    """One bad snapshot is an error for that repo; the others are still checked."""
    b = CacheBuilder(tmp_path / "hub")
    b.add_revision("org/good", chatml_files(3000, healthy=True))
    sha = b.add_revision("org/zero", chatml_files(1000))
    snap = b.snapshot("org/zero", sha)
    (snap / GEN).unlink()
    os.symlink("/dev/zero", snap / GEN)
    proc = _rss_limited(["cache", "--cache-dir", str(b.root), "--format", "json"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    repos = {r["repo_id"]: r for r in json.loads(proc.stdout)["repos"]}
    assert repos["org/good"]["verdict"] == "ok"
    assert "is not a regular file" in repos["org/zero"]["error"]


def test_tokenizer_json_cap_holds_for_the_vocabulary_load(tmp_path, monkeypatch):
    """The lazy vocabulary load (used when tokenizer_config.json has added_tokens_decoder)
    obeys the same cap as the head read."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}}, "pad": "x" * 5000}))
    monkeypatch.setattr(repolib, "MAX_TOKENIZER_JSON_BYTES", 4096)
    with pytest.raises(RepoLoadError, match="too large"):
        TokenizerJson(path).tokenizer()


# --- 4. deep JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [150, 400, 700, 990])
@pytest.mark.parametrize("where", [GEN, "tokenizer.json"])
def test_deep_json_is_one_line_exit_2(tmp_path, run_eosfix, depth, where):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    nest = "[" * depth + "]" * depth
    if where == GEN:
        (repo / GEN).write_text('{"eos_token_id": 2, "x": ' + nest + "}")
    else:
        (repo / where).write_text(
            '{"added_tokens": [{"id": 1, "content": "a", "x": ' + nest + '}], "model": {}}'
        )
    before = _snapshot_files(repo)
    result = run_eosfix("fix", repo)
    assert result.exit_code == 2, result.stderr
    assert "invalid JSON: nested too deeply" in result.stderr
    assert _snapshot_files(repo) == before


# --- 5. templates that build huge strings ------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ range(8000)|join('x' * 999999) }}",
        "{{ range(8000)|map('string')|join('x' * 999999) }}",
        "{{ ('x' * 999999).join(range(8000)|map('string')) }}",
        "{{ ('x' * 999999)|replace('x', 'y' * 999999) }}",
    ],
)
def test_string_bombs_are_refused_before_allocating(source):
    from eosfix.analysis.template import render
    from eosfix.core.limits import RenderLimitExceeded

    memory.reset_peak()  # this worker's earlier peak (a model a test loaded) must not hide it
    before = memory.peak_mib()
    with pytest.raises(RenderLimitExceeded, match="size"):
        render(source, {})
    grown = memory.peak_mib() - before
    assert grown < 200  # MiB: the bomb would be 8 GB; a refused one allocates nothing big


def test_join_of_a_generator_renders_what_jinja_renders():
    """Counting a generator's items before a join must not consume what the join reads."""
    import jinja2.sandbox

    from eosfix.analysis.template import render

    source = "{{ ', '.join(messages|map(attribute='content')) }}|{{ range(3)|join('-') }}"
    context = {"messages": [{"content": "a"}, {"content": "b"}]}
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(source).render(context)
    assert render(source, context) == plain == "a, b|0-1-2"


# --- 2. workers die with the main process; SIGTERM and SIGHUP are Ctrl-C ------------------------


def _big_cache(root: Path, n: int = 60) -> CacheBuilder:
    b = CacheBuilder(root)
    for i in range(n):
        b.add_revision(f"org/m{i:03d}", chatml_files(1000 + 10 * i))
    return b


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGHUP"])
def test_workers_die_with_the_main_process(tmp_path, how):
    import signal

    b = _big_cache(tmp_path / "hub")
    proc = subprocess.Popen(
        [*_CLI, "cache", "--cache-dir", str(b.root), "--fix"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_for(lambda: len(children(proc.pid)) >= 1 or proc.poll() is not None, "a worker")
        workers = children(proc.pid)
        if not workers:
            pytest.fail("the run finished before it started a worker; make the cache bigger")
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=120)
        for pid in workers:
            wait_for(lambda pid=pid: not alive(pid), f"worker {pid} to exit")
        out = proc.stdout.read()  # EOF: no orphan holds the pipe open
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if how == "SIGKILL":
        assert code == -signal.SIGKILL
    else:
        assert code == 130, err
        assert "Traceback" not in err
    assert isinstance(out, bytes)


# --- 8 and the write path: an error injected at every write syscall in turn ---------------------


def _names_a_file(line: str) -> bool:
    """``error: /some/file: why`` (the repo's file, or the pyproject.toml options come from)."""
    import re

    match = re.match(r"error: (/[^:]+): ", line)
    return match is not None and Path(match[1]).parent.is_dir()


def _named(args: tuple) -> tuple:
    """The filename an OSError from ``os.<func>(*args)`` carries (none for an fd)."""
    if args and isinstance(args[0], (str, bytes, os.PathLike)):
        return (os.fsdecode(args[0]),)
    return ()


def _invoke_failing(monkeypatch, func: str, k: int, err: int, *args: str):
    """``eosfix ARGS`` in-process with the k-th call of ``os.<func>`` raising ``err`` (naming
    the file when given one, as the OS does); the result and how many calls ``func`` saw."""
    real = getattr(os, func)
    calls = 0

    def failing(*a, **kw):
        nonlocal calls
        calls += 1
        if calls == k:
            raise OSError(err, os.strerror(err), *_named(a))
        return real(*a, **kw)

    monkeypatch.setattr(os, func, failing)
    try:
        result = CliRunner().invoke(cli, list(args))
    finally:
        monkeypatch.setattr(os, func, real)
    return result, calls


def _fix_outcome(repo: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(the files before, the files after) a clean ``fix --config-json`` of a copy."""
    before = _snapshot_files(repo)
    clean = copy_repo(repo, repo.parent / "clean")
    CliRunner().invoke(cli, ["fix", str(clean), "--config-json"])
    return before, _snapshot_files(clean)


@pytest.mark.parametrize("func", ["replace", "fsync", "fchmod", "open", "scandir", "lstat"])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EMFILE])
def test_injected_errors_leave_all_files_old_or_all_new(tmp_path, monkeypatch, func, err):
    """Raise ``err`` from the k-th call of ``os.<func>`` during a two-file fix, for every k
    that call sees: each time the folder holds every file old or every file new (never one of
    each, never a torn file, no temp file), and a failure is one line, exit 2."""
    base = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "base")
    old, new = _fix_outcome(base)
    assert old["config.json"] != new["config.json"]
    assert old[GEN] != new[GEN]
    k = 0
    while True:
        k += 1
        repo = copy_repo(base, tmp_path / f"r{func}{k}")
        result, calls = _invoke_failing(
            monkeypatch, func, k, err, "fix", str(repo), "--config-json"
        )
        files = _snapshot_files(repo)
        assert not [p for p in repo.iterdir() if p.name.endswith(".eosfix-tmp")]
        assert files in (old, new), f"{func} call {k}: a mix of old and new files"
        if files == old:  # a failure: one line naming the file, exit 2 (reads as writes)
            assert result.exit_code == 2, (k, result.output, result.exception)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert _names_a_file(result.stderr), result.stderr
        if calls < k:  # the fix made fewer calls than k: every call point was tried
            break
    assert k > 1


# A SIGKILL at each write-path call in turn (a process killed, not an error raised): every file
# is whole, old or new; a kill between the two renames may leave one new and one old (the
# guarantee docs/safety.md states); and running the fix again always ends with every file new
# and no temp file left.
_KILLER = """
import os, signal, sys
func, k = sys.argv[1], int(sys.argv[2])
real = getattr(os, func)
calls = 0
def killing(*args, **kwargs):
    global calls
    calls += 1
    if calls == k:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(os, func, killing)
from eosfix.cli import main
code = main(["fix", sys.argv[3], "--config-json"])
print(calls, flush=True)
sys.exit(code)
"""


@pytest.mark.parametrize("func", ["fsync", "fchmod", "replace"])
def test_a_kill_at_each_write_call_leaves_whole_files_and_the_rerun_completes(tmp_path, func):
    base = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "base")
    old, new = _fix_outcome(base)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = 0
    for k in range(1, 50):
        repo = copy_repo(base, tmp_path / f"r{func}{k}")
        proc = subprocess.run(
            [sys.executable, "-c", _KILLER, func, str(k), str(repo)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        files = {
            name: data
            for name, data in _snapshot_files(repo).items()
            if name in (GEN, "config.json")
        }
        for name, data in files.items():  # each file whole: its old bytes or its new bytes
            assert data in (old[name], new[name]), (func, k, name)
        if proc.returncode != -9:  # the fix ran to its end: every call point was tried
            assert proc.returncode == 1, proc.stderr
            assert files == {n: new[n] for n in files}
            assert int(proc.stdout.strip().splitlines()[-1]) < k
            break
        killed += 1
        rerun = CliRunner().invoke(cli, ["fix", str(repo), "--config-json"])
        assert rerun.exit_code in (0, 1), rerun.output
        assert _snapshot_files(repo) == new, (func, k, "the rerun did not complete the fix")
        assert not [p for p in repo.iterdir() if p.name.endswith(".eosfix-tmp")]
    assert killed >= 1


# --- 9. a leftover GGUF temp file on a tight disk -----------------------------------------------


def _tight_disk(monkeypatch, folder: Path, room: int) -> None:
    """A file system with ``room`` bytes free besides the temp files in ``folder`` (a stale
    temp file takes space until it is removed)."""
    from types import SimpleNamespace

    from eosfix.containers.gguf import write as gguf_write

    def usage(_path):
        temps = sum(p.stat().st_size for p in folder.glob(".*.eosfix-tmp"))
        return SimpleNamespace(free=room - temps)

    monkeypatch.setattr(gguf_write.shutil, "disk_usage", usage)


@pytest.mark.parametrize("output", [False, True])
def test_stale_gguf_temp_is_removed_before_the_free_space_check(tmp_path, monkeypatch, output):
    """A killed rewrite left a temp file as big as the model; on a disk with room for one
    copy, the re-run must remove it first instead of refusing for want of space forever."""
    from tests.support.ggufs import chatml, glm

    if output:  # --output with nothing to fix: copy_gguf
        path = chatml(tmp_path / "ok.gguf", tensor=bytes(range(256)) * 256)
        args = ["fix", path, "--output", tmp_path / "out.gguf"]
    else:  # a key to add: _rewrite
        path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 256)
        args = ["fix", path]
    stale = tmp_path / f".{path.name}.killed.eosfix-tmp"
    stale.write_bytes(path.read_bytes())  # nobody holds its lock: left by a killed run
    size = path.stat().st_size  # room for the new file and the 16 MB margin, not for two
    _tight_disk(monkeypatch, tmp_path, room=16 * 1024 * 1024 + 2 * size - 1000)
    code, _out, err = _cli(*args)
    assert "not enough free space" not in err
    assert code in (0, 1), err
    assert not stale.exists()
    assert not list(tmp_path.glob(".*.eosfix-tmp"))


# --- 10. lost updates: another program's edit between eosfix's read and its rename ---------------


def _users_edit(path: Path, how: str) -> bytes:
    """What another program does to ``path``: rewrite it in place (same inode), the same in
    the same timestamp tick (size and mtime_ns unchanged), or rename a new file of the same
    size over it (a new inode)."""
    text = path.read_text()
    new = text.replace("{", '{"x": 1, ', 1) if how == "in place" else text.replace("2", "3")
    assert new != text
    if how == "in place":
        path.write_text(new)
    elif how == "same tick":
        info = path.stat()
        path.write_text(new)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    else:
        other = path.with_name("edited-by-user")
        other.write_text(new)
        os.replace(other, path)
    return path.read_bytes()


@pytest.mark.parametrize("how", ["in place", "renamed"])
def test_an_edit_after_eosfix_read_the_repo_is_not_overwritten(tmp_path, monkeypatch, how):
    """The edit lands after the analysis read the files, before the write starts."""
    from eosfix.containers.folder import write as folder_write

    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    real = folder_write._check_writable
    edited: dict[str, bytes] = {}

    def edit_then_check(root, patch, replace_symlinks):
        if not edited:
            edited["config.json"] = _users_edit(root / "config.json", how)
        return real(root, patch, replace_symlinks)

    monkeypatch.setattr(folder_write, "_check_writable", edit_then_check)
    before = _snapshot_files(repo)
    code, _out, err = _cli("fix", repo, "--config-json")
    assert code == 2, err
    assert err.strip().splitlines() == [
        (
            f"error: {repo / 'config.json'}: changed since eosfix read it (another program wrote "
            "it); nothing written, run eosfix again"
        )
    ]
    assert _snapshot_files(repo) == {**before, **edited}
    assert not list(repo.glob(".*.eosfix-tmp"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("how", ["in place", "same tick", "renamed"])
@pytest.mark.parametrize("name", [GEN, "config.json"])
def test_an_edit_while_eosfix_writes_is_not_overwritten(tmp_path, monkeypatch, name, how):
    """The edit lands while eosfix writes its temp file (after its last read of the target,
    before the rename): refused, and the file written before it is put back."""
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    real = os.fsync
    edited: dict[str, bytes] = {}

    def fsync(fd):
        real(fd)
        if not edited and os.readlink(f"/proc/self/fd/{fd}").startswith(str(repo / f".{name}.")):
            edited[name] = _users_edit(repo / name, how)

    before = _snapshot_files(repo)
    monkeypatch.setattr(os, "fsync", fsync)
    code, _out, err = _cli("fix", repo, "--config-json")
    monkeypatch.setattr(os, "fsync", real)
    assert edited, "the injected edit never ran"
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "changed since eosfix read it" in err
    assert _snapshot_files(repo) == {**before, **edited}
    assert not list(repo.glob(".*.eosfix-tmp"))


def _gguf_users_edit(path: Path, how: str) -> bytes:
    """Another program's write to a GGUF: bytes appended in place, or a new file renamed over."""
    if how == "in place":
        with open(path, "ab") as fh:
            fh.write(b"\0" * 32)
    else:
        other = path.with_name("edited-by-user.gguf")
        other.write_bytes(path.read_bytes()[:-1] + b"\x01")
        os.replace(other, path)
    return path.read_bytes()


@pytest.mark.parametrize("how", ["in place", "renamed"])
def test_an_edit_during_a_gguf_rewrite_is_not_overwritten(tmp_path, monkeypatch, how):
    """The edit lands while eosfix copies the tensor data into its temp file."""
    from eosfix.containers.gguf import write as gguf_write
    from tests.support.ggufs import glm

    path = glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 64)
    real = gguf_write._copy_data
    edited: list[bytes] = []

    def copy_then_edit(*args, **kwargs):
        digest = real(*args, **kwargs)
        edited.append(_gguf_users_edit(path, how))
        return digest

    monkeypatch.setattr(gguf_write, "_copy_data", copy_then_edit)
    code, _out, err = _cli("fix", path)
    assert edited
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        f"error: {path}: changed since eosfix read it (another program wrote it); "
        "nothing written, run eosfix again"
    )
    assert path.read_bytes() == edited[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["glm.gguf"]


# --- 11. two fixes of one GGUF: the tensor infos are read from the file that was checked --------


def test_a_gguf_replaced_after_its_header_was_read_is_refused_not_misread(tmp_path, monkeypatch):
    """Another eosfix (or anything) renames a rewritten GGUF over the file after this run read
    its header: the tensor infos must not be read from the new file at the old offsets (a
    spurious "truncated" error, or a header built from the wrong bytes)."""
    from eosfix.containers.gguf import write as gguf_write
    from tests.support.ggufs import glm

    (tmp_path / "a").mkdir()
    path = glm(tmp_path / "a" / "glm.gguf", tensor=bytes(range(256)) * 64)
    other = copy_repo(tmp_path / "a", tmp_path / "b") / "glm.gguf"
    assert _cli("fix", other)[0] == 1  # the other run's result: keys appended, header longer
    assert other.stat().st_size != path.stat().st_size
    real = gguf_write.check_in_place
    swapped: list[bytes] = []

    def swap_then_check(header):
        os.replace(other, path)
        swapped.append(path.read_bytes())
        return real(header)

    monkeypatch.setattr(gguf_write, "check_in_place", swap_then_check)
    code, _out, err = _cli("fix", path)
    assert swapped
    assert code == 2, err
    assert "truncated" not in err
    assert err.strip().splitlines()[-1].endswith("changed since eosfix read it (another "
                                                  "program wrote it); nothing written, run "
                                                  "eosfix again")  # fmt: skip
    assert path.read_bytes() == swapped[0]
    assert sorted(p.name for p in path.parent.iterdir()) == ["glm.gguf"]


# --- 7. a state file on a full disk ------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_state_file_on_a_full_disk_is_one_line_exit_2(fake_hub, tmp_path, monkeypatch, fmt):
    """The third state line is written in part, then the disk is full: the file keeps only
    whole lines, the run's output is still whole (a valid JSON document), and the state
    error is the one line on stderr, exit 2 (close() flushing nothing to fail again)."""
    from tests.support.hubrepos import chatml_org

    chatml_org(fake_hub, 5)
    state = tmp_path / "audit.jsonl"
    real = os.write
    lines = 0

    def write(fd, data):
        nonlocal lines
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if name != str(state):
            return real(fd, data)
        lines += 1
        if lines < 3:
            return real(fd, data)
        if lines == 3:
            return real(fd, bytes(data)[:10])  # part of the line, then...
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    code, out, err = _cli("hub", "--author", "org", "--state", state, "--format", fmt)
    monkeypatch.setattr(os, "write", real)
    assert code == 2, err
    assert err.strip().splitlines() == [f"error: {state}: cannot write: No space left on device"]
    text = state.read_text()
    assert text.endswith("\n")
    assert [json.loads(line)["repo_id"] for line in text.splitlines()] == ["org/m000", "org/m001"]
    if fmt == "json":
        document = json.loads(out)
        assert len(document["repos"]) == 5
        assert document["exit_code"] == 2


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A tmpfs of two pages (where this process may mount one: root on Linux), one filled."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mnt)],
        check=False,
        capture_output=True,
    )
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "filler").write_bytes(b"\0" * 4096)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_state_file_on_a_real_full_tmpfs(fake_hub, tiny_tmpfs):
    from tests.support.hubrepos import chatml_org

    chatml_org(fake_hub, 30)
    state = tiny_tmpfs / "audit.jsonl"
    code, out, err = _cli("hub", "--author", "org", "--state", state, "--format", "json")
    assert code == 2, err
    assert err.strip().splitlines() == [f"error: {state}: cannot write: No space left on device"]
    text = state.read_text()
    assert text.endswith("\n")
    recorded = [json.loads(line)["repo_id"] for line in text.splitlines()]
    assert 0 < len(recorded) < 30
    document = json.loads(out)
    assert (len(document["repos"]), document["exit_code"]) == (30, 2)
    _code, again, _err = _cli("hub", "--author", "org", "--state", state, "--format", "json")
    assert json.loads(again)["summary"]["resumed"] == len(recorded)


# --- 12. metadata: owner, group, mode and xattrs kept; a hard link split is said -----------------


def _set_xattr_or_skip(path: Path, name: str, value: bytes) -> None:
    if not hasattr(os, "setxattr"):
        pytest.skip("no xattrs on this platform")
    try:
        os.setxattr(path, name, value)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip("this file system has no user xattrs")
        raise


def _owner_to_change() -> tuple[int, int] | None:
    """An owner and group to give a file (root only: anyone else cannot give files away)."""
    return (4321, 4322) if os.geteuid() == 0 else None


def test_a_fixed_file_keeps_its_owner_mode_and_xattrs(tmp_path):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    gen = repo / GEN
    _set_xattr_or_skip(gen, "user.origin", b"downloaded by hand")
    os.chmod(gen, 0o640)
    owner = _owner_to_change()
    if owner is not None:
        os.chown(gen, *owner)
    before = gen.read_bytes()
    code, _out, err = _cli("fix", repo)
    assert code == 1, err
    assert gen.read_bytes() != before
    assert os.getxattr(gen, "user.origin") == b"downloaded by hand"
    info = gen.stat()
    assert info.st_mode & 0o7777 == 0o640
    if owner is not None:
        assert (info.st_uid, info.st_gid) == owner


def test_a_rewritten_gguf_keeps_its_owner_and_xattrs(tmp_path):
    from eosfix.containers.gguf.read import read_header
    from tests.support.ggufs import glm

    path = glm(tmp_path / "glm.gguf", tensor=bytes(64))
    _set_xattr_or_skip(path, "user.origin", b"converted")
    owner = _owner_to_change()
    if owner is not None:
        os.chown(path, *owner)
    inode = path.stat().st_ino
    code, _out, err = _cli("fix", path)
    assert code == 1, err
    assert path.stat().st_ino != inode  # rewritten, not edited in place
    assert read_header(path).value("tokenizer.ggml.eot_token_id") is not None
    assert os.getxattr(path, "user.origin") == b"converted"
    if owner is not None:
        assert (path.stat().st_uid, path.stat().st_gid) == owner


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_hard_linked_file_is_fixed_with_a_warning(tmp_path, fmt):
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    other = tmp_path / "backup-of-generation_config.json"
    os.link(repo / GEN, other)
    old = other.read_bytes()
    code, out, err = _cli("fix", repo, "--format", fmt)
    assert code == 1, err
    note = (
        f"{repo / GEN}: had 2 hard links; only this name has the fix, 1 other name(s) still "
        "lead to the old file"
    )
    assert f"warning: {note}" in err.splitlines()
    assert other.read_bytes() == old  # the other name keeps the old file, as said
    assert (repo / GEN).read_bytes() != old
    if fmt == "json":
        assert json.loads(out)["repos"][0]["notes"] == [note]


def test_a_hard_linked_gguf_rewrite_is_said(tmp_path):
    from tests.support.ggufs import glm

    path = glm(tmp_path / "glm.gguf", tensor=bytes(64))
    os.link(path, tmp_path / "same.gguf")
    code, _out, err = _cli("fix", path)
    assert code == 1, err
    assert f"warning: {path}: had 2 hard links" in err


# --- 6. cut-short answers from the Hub ----------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "match"),
    [("listing", r"^/api/models$"), ("info", r"/revision/"), ("file", r"/resolve/")],
)
def test_a_cut_short_hub_answer_is_retried(fake_hub, what, match):
    """Twice cut short (a JSON listing, a repo's info, a file whose hash then mismatches),
    then whole: the run retries in the same run and ends as if nothing happened."""
    from tests.support.hubrepos import chatml_org

    ids = chatml_org(fake_hub, 3)
    fake_hub.fail("*", 200, match=match, times=2, cut=20)
    args = ["hub", *ids] if what == "info" else ["hub", "--author", "org"]
    code, out, err = _cli(*args, "--format", "json")
    assert code == 1, err
    document = json.loads(out)
    assert all(r["verdict"] != "error" for r in document["repos"]), document["repos"]
    assert len(document["repos"]) == 3
    assert document["summary"]["retries"] >= 2


def test_a_listing_always_cut_short_is_the_authors_error(fake_hub):
    from tests.support.hubrepos import chatml_org

    chatml_org(fake_hub, 3)
    fake_hub.fail("*", 200, match=r"^/api/models$", cut=20)
    code, out, err = _cli("hub", "--author", "org", "--format", "json")
    assert code == 2, err
    document = json.loads(out)  # still one whole document
    assert document["exit_code"] == 2
    [error] = document["errors"]
    assert error["author"] == "org"
    assert error["error"].startswith("the Hub's answer is not complete JSON (cut short?) (6 ")
    assert "Traceback" not in err
    assert "internal error" not in err


def test_a_file_always_cut_short_is_that_repos_error(fake_hub):
    from tests.support.hubrepos import chatml_org

    ids = chatml_org(fake_hub, 3)
    fake_hub.fail(ids[1], 200, match=r"/resolve/", cut=20)
    code, out, err = _cli("hub", "--author", "org", "--format", "json")
    assert code == 2, err
    repos = {r["repo_id"]: r for r in json.loads(out)["repos"]}
    assert "do not match the Hub's hash (6 attempts)" in repos[ids[1]]["error"]
    assert repos[ids[0]]["verdict"] != "error"
    assert repos[ids[2]]["verdict"] != "error"


# --- 14a. cache --fix on a snapshot this user cannot write ----------------------------------------


def _unwritable_cache(tmp_path: Path) -> tuple[CacheBuilder, Path]:
    b = CacheBuilder(tmp_path / "hub")
    sha = b.add_revision("org/m", chatml_files(1000))
    return b, b.snapshot("org/m", sha)


def test_cache_fix_on_a_snapshot_owned_by_another_user_says_why(tmp_path, monkeypatch):
    """As another user (os.access says no: root may write anything, so it is simulated),
    the error names the owner and what to do, never the cache --fix that just failed."""
    b, snap = _unwritable_cache(tmp_path)
    real = os.access

    def access(path, mode, **kwargs):
        if str(path).startswith(str(snap)) and mode & os.W_OK:
            return False
        return real(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    before = _snapshot_files(snap)
    code, out, err = _cli("cache", "--cache-dir", b.root, "--fix", "--format", "json")
    assert code == 2, err
    [repo] = json.loads(out)["repos"]
    import pwd

    owner = pwd.getpwuid(snap.stat().st_uid).pw_name
    assert repo["error"] == (
        f"{GEN}: the cache snapshot's folder is not writable by this user (it belongs "
        f"to {owner}): run eosfix cache --fix as {owner}, or copy the snapshot (cp -rL) and "
        "run eosfix fix on the copy"
    )
    assert "--fix replaces the link" not in out
    assert _snapshot_files(snap) == before


def test_cache_fix_on_a_read_only_mount_says_so(tmp_path):
    b, snap = _unwritable_cache(tmp_path)
    before = _snapshot_files(snap)
    bind = ["mount", "--bind", str(b.root), str(b.root)]
    if subprocess.run(bind, check=False, capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        ro = ["mount", "-o", "remount,ro,bind", str(b.root)]
        if subprocess.run(ro, check=False, capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        code, out, err = _cli("cache", "--cache-dir", b.root, "--fix", "--format", "json")
    finally:
        subprocess.run(["umount", "-l", str(b.root)], check=False)
    assert code == 2, err
    [repo] = json.loads(out)["repos"]
    assert "on a read-only file system: remount it writable" in repo["error"]
    assert "--fix replaces the link" not in repo["error"]
    assert _snapshot_files(snap) == before


# --- read-path OS errors: one line naming the file, exit 2 --------------------------------------


@pytest.mark.parametrize("func", ["scandir", "stat", "open"])  # check makes no lstat that can fail
@pytest.mark.parametrize("err", [errno.EMFILE, errno.EIO])
def test_read_path_os_errors_are_one_line_naming_the_file(tmp_path, monkeypatch, func, err):
    """``check`` with ``err`` raised from the k-th call of ``os.<func>``, for every k: the
    result is the usual one or one line naming a file of the repo, exit 2 (never a
    traceback, never exit 3)."""
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    failures = k = 0
    while True:
        k += 1
        result, calls = _invoke_failing(monkeypatch, func, k, err, "check", str(repo))
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            k,
            result.exception,
        )
        assert result.exit_code in (1, 2), (k, result.output)
        if result.exit_code == 2:
            failures += 1
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert _names_a_file(result.stderr), result.stderr
            assert result.stderr.rstrip().endswith(os.strerror(err)), result.stderr
        if calls < k:
            break
    assert failures > 0


def test_a_read_only_folder_is_not_written_even_by_root(tmp_path):
    """A folder nobody may write (0o555) is refused by its mode bits, as a 0o444 file is:
    root passes os.access, but the bits say "don't". One line, exit 2,
    nothing written."""
    repo = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "r")
    before = _snapshot_files(repo)
    repo.chmod(0o555)
    try:
        code, out, err = _cli("fix", str(repo))
    finally:
        repo.chmod(0o755)
    assert code == 2, (out, err)
    assert _snapshot_files(repo) == before
    line = err.strip()
    assert len(line.splitlines()) == 1
    assert f"{repo / GEN}: its folder is " in line
