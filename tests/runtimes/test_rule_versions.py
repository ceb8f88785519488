"""Runtime versions are PEP 440 versions: what pip and ``importlib.metadata`` report."""

from __future__ import annotations

import json

import pytest

from eosfix.runtimes import describe
from eosfix.runtimes.rule import parse_version
from tests.conftest import SAMPLES


@pytest.mark.parametrize(
    ("text", "later_than"),
    [
        ("4.57.0.dev0", "4.56.2"),  # a transformers install from source
        ("2.13.0+cpu", "2.12"),  # a local version: torch's CPU wheels
        ("0.32.0rc1", "0.31.9"),
        ("0.32", "0.31.10"),
    ],
)
def test_pep_440_versions_are_accepted_and_ordered(text, later_than):
    assert parse_version(text) > parse_version(later_than)


def test_a_pre_release_comes_before_its_release():
    assert parse_version("0.32.0.dev0") < parse_version("0.32.0") < parse_version("0.32.0.post1")
    assert describe("mlx-lm").rule_for("0.32.0.dev0").until == "0.32.0"  # the older rule
    assert describe("mlx-lm").rule_for("0.32.0").until is None


def test_a_dev_version_is_pinned_like_any_other(run_eosfix):
    result = run_eosfix(
        "check", SAMPLES / "llama3-healthy", "--format", "json", "--runtime", "mlx-lm==0.33.0.dev0"
    )
    assert result.exit_code == 0, result.stderr
    (mlx,) = [
        r for r in json.loads(result.stdout)["repos"][0]["runtimes"] if r["runtime"] == "mlx-lm"
    ]
    assert mlx["version"] == "0.33.0.dev0"
    assert mlx["versions"] == ">= 0.32.0"


@pytest.mark.parametrize("text", ["", "latest", "1.2.x", "v 1"])
def test_anything_else_is_refused_with_one_line(text):
    with pytest.raises(ValueError, match=r"is not a version like 0\.32\.2$"):
        parse_version(text)
