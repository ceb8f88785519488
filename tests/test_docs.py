"""README and --help stay in sync with the code."""

from __future__ import annotations

import re

import click
import pytest

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
    """The README lists every code of the one registry, with its title, and no other."""
    from eosfix.core.codes import CODES

    documented = set(re.findall(r"^### (EOS\d{3})", README, flags=re.MULTILINE))
    assert documented == set(CODES)
    for code, entry in CODES.items():
        assert f"### {code} — {entry.title}" in README, code


def test_every_long_option_is_in_readme():
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        for param in cmd.params:
            if isinstance(param, click.Option):
                opts = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
                assert any(o in README for o in opts), (name, opts)


def _python_api_snippet() -> str:
    section = README[README.index("## Python API") :]
    block = re.search(r"```python\n(.*?)\n```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


@pytest.mark.parametrize(
    "target",
    ["chatml-missing-im-end", "llama3-healthy", "base-model", "missing", "readme", "gguf"],
)
def test_readme_python_api_snippet_runs_on_every_kind_of_path(target, tmp_path, capsys):
    """The snippet never crashes: a fixable repo, a healthy one, a base model, a missing
    path, a file that is no model, a GGUF (issue 15: it used to raise AttributeError)."""
    from tests import ggufs
    from tests.conftest import SAMPLES, copy_repo

    if target in ("missing", "readme"):
        path = tmp_path / "README.md"
        if target == "readme":
            path.write_text("hi\n")
    elif target == "gguf":
        path = ggufs.chatml(tmp_path / "m.gguf")
    else:
        path = copy_repo(SAMPLES / target, tmp_path / target)
    code = _python_api_snippet().replace('"./my-model"', repr(str(path)))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    out = capsys.readouterr().out.splitlines()
    if target == "chatml-missing-im-end":
        assert out == [
            "fixable ['<|im_end|>']",
            "(248044, 248046)",
            "('generation_config.json',)",
            "ok",
        ]
    elif target in ("missing", "readme"):
        assert out[0].startswith(f"{path}: ")
        assert out[-1] == "error"


def test_readme_exit_code_table_matches_the_constants_and_help():
    from eosfix.render import report

    table = README[README.index("## Exit codes") :]
    for code in (report.EXIT_OK, report.EXIT_FINDINGS, report.EXIT_INPUT, report.EXIT_INTERNAL):
        assert f"\n| {code} | " in table
    assert "--strict" in table.split("\n| 1 |")[1].split("\n")[0]
    ctx = click.Context(cli)
    for name in ("check", "fix", "cache", "hub"):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        assert "unless --strict" in " ".join((cmd.help or "").split()), name


def test_readme_runtime_table_says_what_is_executed():
    """Each runtime's row says "executed with" exactly when eosfix runs its rule against the
    runtime (``Runtime.executed``; issue 23: llama.cpp's row said "modelled, not executed"
    while ``explain`` said executed)."""
    from eosfix.runtimes import RUNTIMES

    table = README[README.index("| runtime | current rule |") :].split("\n\n")[0]
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.rstrip(" |").split(" | ")[-1]
        for line in table.splitlines()[2:]
    }
    assert set(rows) == {r.name for r in RUNTIMES}
    for r in RUNTIMES:
        if r.executed is None:  # issue 24: never a row with neither
            assert rows[r.name].startswith("cited at "), r.name
        else:
            assert rows[r.name].startswith("executed with "), r.name
            assert r.executed.split(" (")[0] in rows[r.name], r.name
