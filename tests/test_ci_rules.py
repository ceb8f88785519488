"""CI cannot pass by skipping: with CI=true, a test skipped for want of something CI installs
(pytest.importorskip, tests.conftest.unavailable) fails; a skip about the data stays a skip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

INNER_CONFTEST = (
    "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
)

INNER_TESTS = textwrap.dedent(
    """
    import pytest
    from tests.conftest import unavailable

    def test_extra_missing():
        pytest.importorskip("eosfix_no_such_module", reason="pip install 'eosfix[verify]'")

    def test_download_failed():
        unavailable("cannot get the sdist: network unreachable")

    @pytest.fixture
    def needs_extra():
        pytest.importorskip("eosfix_no_such_module")

    def test_extra_missing_in_a_fixture(needs_extra):
        pass

    def test_data_says_skip():
        pytest.skip("no added tokens")

    @pytest.mark.skipif(True, reason="corpus absent")
    def test_skipif():
        pass

    def test_runs():
        pytest.importorskip("json")
    """
)

INNER_MODULE_SKIP = textwrap.dedent(
    """
    import pytest
    pytest.importorskip("eosfix_no_such_module", reason="pip install 'eosfix[runtimes]'")

    def test_never_collected():
        pass
    """
)


def _outcomes(tmp_path, ci: str | None, *files: str, absent: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "EOSFIX_CI_ABSENT")}
    if ci is not None:
        env["CI"] = ci
    env["EOSFIX_CI_ABSENT"] = absent
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *files],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out: dict[str, str] = {}  # test name (a skip: its reason) -> outcome
    for line in proc.stdout.splitlines():
        if m := re.match(r"SKIPPED \[\d+\] \S+:\d+: (.*)$", line):
            out[m.group(1)] = "SKIPPED"
        elif m := re.match(r"(PASSED|FAILED|ERROR) (\S+)", line):
            out[m.group(2).split("::")[-1]] = m.group(1)
    assert out, proc.stdout + proc.stderr
    return out


@pytest.fixture
def inner(tmp_path):
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    (tmp_path / "test_inner_module.py").write_text(INNER_MODULE_SKIP)
    return tmp_path


def test_in_ci_a_missing_requirement_fails_and_other_skips_stay(inner):
    got = _outcomes(inner, "true", "test_inner.py")
    assert got == {
        "test_extra_missing": "FAILED",
        "test_download_failed": "FAILED",
        "test_extra_missing_in_a_fixture": "ERROR",
        "no added tokens": "SKIPPED",
        "corpus absent": "SKIPPED",
        "test_runs": "PASSED",
    }


def test_in_ci_a_module_skipped_for_a_missing_extra_fails(inner):
    got = _outcomes(inner, "true", "test_inner_module.py")
    assert got == {"test_inner_module.py": "ERROR"}


def test_a_job_may_leave_named_requirements_out(inner):
    """The minimum-versions job has no torch: EOSFIX_CI_ABSENT names the modules it lacks on
    purpose; a skip for anything else still fails."""
    got = _outcomes(inner, "true", "test_inner.py", absent="eosfix_no_such_module")
    assert got == {
        "pip install 'eosfix[verify]'": "SKIPPED",
        "test_download_failed": "FAILED",
        "could not import 'eosfix_no_such_module': No module named 'eosfix_no_such_module'": (
            "SKIPPED"
        ),
        "no added tokens": "SKIPPED",
        "corpus absent": "SKIPPED",
        "test_runs": "PASSED",
    }


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_they_are_skips(inner, ci):
    got = _outcomes(inner, ci, "test_inner.py", "test_inner_module.py")
    assert got == {
        "pip install 'eosfix[verify]'": "SKIPPED",
        "cannot get the sdist: network unreachable": "SKIPPED",
        "could not import 'eosfix_no_such_module': No module named 'eosfix_no_such_module'": (
            "SKIPPED"
        ),
        "no added tokens": "SKIPPED",
        "corpus absent": "SKIPPED",
        "pip install 'eosfix[runtimes]'": "SKIPPED",
        "test_runs": "PASSED",
    }
