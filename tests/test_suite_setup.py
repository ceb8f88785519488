"""The test suite runs outside the author's folder layout, and says what needs the package
index: corpus tests skip without the corpus, and the tests that pip-install or
download from the index are marked ``package_index`` (CI runs them)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

INDEX_TESTS = {
    "tests/cli/test_precommit.py::test_try_repo_fixes_then_passes",
    "tests/cli/test_precommit.py::test_readme_snippet_runs_with_real_pre_commit",
    "tests/runtimes/test_llamacpp_real.py::test_the_cases_are_every_vocabulary_the_sdist_ships",
    "tests/runtimes/test_llamacpp_real.py::test_model_equals_real_llama_cpp_on_every_shipped_vocab",
    "tests/runtimes/test_llamacpp_real.py::test_check_and_fix_every_vocab_copy_and_real_llama_cpp_agrees",
    "tests/runtimes/test_llamacpp_real.py::test_remote_reads_agree_with_real_llama_cpp_on_the_file_downloaded_whole",
    "tests/runtimes/test_llamacpp_real.py::test_token_pieces_equal_real_llama_cpp_on_every_shipped_vocab",
    "tests/containers/gguf/test_remote.py::test_every_shipped_vocabulary_in_at_most_three_reads",
}


def _pytest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_corpus_tests_skip_when_the_corpus_is_absent(tmp_path):
    """Every test that reads a corpus case skips without it (three in test_earlystop.py
    raised FileNotFoundError)."""
    proc = _pytest(
        "-q", "-m", "not slow", "tests/containers/folder/test_earlystop.py", "tests/test_corpus.py",
        EOSFIX_CORPUS=str(tmp_path / "nowhere"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "corpus case Qwen--Qwen3-4B not found" in proc.stdout
    assert " failed" not in proc.stdout
    assert " error" not in proc.stdout


def test_the_tests_that_need_the_package_index_are_marked():
    proc = _pytest(
        "--collect-only", "-q", "-m", "package_index",
        "tests/cli/test_precommit.py", "tests/runtimes/test_llamacpp_real.py",
        "tests/containers/gguf/test_remote.py",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # a parametrized test once, whatever its cases (one per vocabulary)
    collected = {line.split("[")[0] for line in proc.stdout.splitlines() if "::" in line}
    assert collected == INDEX_TESTS


def test_ci_runs_the_package_index_tests():
    """.ci/run deselects no marker: CI (which reaches the index) runs them all."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "package_index" not in ci
    assert "not slow" not in ci
    readme = (ROOT / "README.md").read_text()
    assert '-m "not package_index"' in readme


def test_every_test_of_a_costly_fixture_runs_in_its_group(request):
    """A test that uses a fixture of ``BUILT_ONCE`` is in a module of that fixture's group
    (``GROUPS``): under pytest -n the group's modules run in one worker, which builds the
    fixture once. (Of the tests this run collected.)"""
    from tests.conftest import BUILT_ONCE, GROUPS

    astray = []
    for item in request.session.items:
        module = item.path.relative_to(ROOT).as_posix()
        for name in getattr(item, "fixturenames", ()):
            if name in BUILT_ONCE and GROUPS.get(module) != BUILT_ONCE[name]:
                astray.append(f"{item.nodeid} uses {name}: list {module} in GROUPS")
    assert not astray


def test_the_groups_run_in_one_worker(tmp_path):
    """Under pytest -n 2, the tests of one group's modules run in one worker, and the other
    tests in either."""
    (tmp_path / "conftest.py").write_text(
        "from tests.support.grouping import Groups\n\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(Groups({'test_a.py': 'g', 'test_b.py': 'g'}))\n"
    )
    for name in "abcd":
        (tmp_path / f"test_{name}.py").write_text(
            "import os\n\n\n"
            + "".join(
                f"def test_{i}():\n    print('ran in', os.environ['PYTEST_XDIST_WORKER'])\n\n\n"
                for i in range(4)
            )
        )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-v", "-s",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers: dict[str, set[str]] = {}
    for line in proc.stdout.splitlines():
        if "PASSED" in line and "::" in line:
            worker = line.split("]", 1)[0].strip("[")
            workers.setdefault(line.split("::")[0].split()[-1], set()).add(worker)
    assert set(workers) == {"test_a.py", "test_b.py", "test_c.py", "test_d.py"}, proc.stdout
    assert len(workers["test_a.py"] | workers["test_b.py"]) == 1, workers


def test_the_wheelhouse_is_keyed_by_what_pip_install_asks_the_index_for(tmp_path):
    """The pre-commit tests' wheelhouse holds wheels for pyproject.toml's build requirements
    and dependencies: a dependency or build requirement changed makes another one, so the
    hook never installs from a wheelhouse made for other requirements."""
    from tests.support.wheelhouse import folder, requirements

    def project(build: str, deps: str) -> list[str]:
        path = tmp_path / "pyproject.toml"
        path.write_text(
            f'[build-system]\nrequires = ["{build}"]\n\n'
            f'[project]\nname = "x"\ndependencies = [{deps}]\n'
        )
        return requirements(path)

    base = project("setuptools>=77", '"click>=8", "rich>=13"')
    assert base == ["setuptools>=77", "click>=8", "rich>=13"]
    others = [
        project("setuptools>=80", '"click>=8", "rich>=13"'),
        project("setuptools>=77", '"click>=8.1", "rich>=13"'),
        project("setuptools>=77", '"click>=8", "rich>=13", "packaging"'),
    ]
    assert len({folder(base), *map(folder, others)}) == 4
    assert folder(base) == folder(list(base))
    assert folder(base).name.startswith("wheelhouse-")
    ours = requirements()
    assert ours[0] == "setuptools>=77", ours  # the build's, which pip's isolated build installs
    assert "huggingface_hub>=2.1.1" in ours, ours
