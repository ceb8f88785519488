"""README and --help stay in sync with the code."""

from __future__ import annotations

import re

import click

from eosfix.cli import cli
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_starts_with_two_working_commands():
    block = re.search(r"```bash\n(.*?)\n```", README, re.DOTALL)
    assert block is not None
    first, second = block.group(1).splitlines()
    assert first.startswith("pip install . && eosfix check sample_repos/")
    sample = first.split()[-1]
    assert (ROOT / sample).is_dir()
    assert "pytest" in second


def test_ci_runs_the_readme_test_command():
    test_command = README.split("```bash\n", 1)[1].splitlines()[1]
    install_and_test = test_command.split("&& ", 2)[-1]  # after creating the venv
    assert install_and_test in (ROOT / ".ci" / "run").read_text()


def test_every_command_has_help_and_is_in_readme():
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        assert cmd.help, name
        assert f"eosfix {name}" in README, name


def test_every_finding_code_is_documented():
    from eosfix import check

    codes = set(re.findall(r"EOS\d{3}", check.__doc__ or ""))
    assert codes
    for code in codes:
        assert f"### {code}" in README, code
