"""Every numeric option of every command has its bounds in one place (eosfix/cli/numbers.py):
a value outside them (below, above, nan, inf, not a number) is a usage error, exit 2, said in
one line naming the option, before the command does anything."""

from __future__ import annotations

import click
import pytest

from eosfix.cli import cli, main
from eosfix.cli.numbers import Number

NUMERIC = (click.types.IntParamType, click.types.FloatParamType, Number)


def _numeric_options() -> list[tuple[str, click.Parameter]]:
    ctx = click.Context(cli)
    out = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        out += [(name, p) for p in command.params if isinstance(p.type, NUMERIC)]
    return out


OPTIONS = _numeric_options()


def test_every_numeric_option_has_its_bounds_in_one_place():
    """A plain int or float option (click.INT, click.FLOAT, click.IntRange...) takes nan, inf
    or a negative number: each numeric option is a ``Number``."""
    assert OPTIONS, "no numeric option found"
    plain = [f"{cmd} {p.opts[0]}" for cmd, p in OPTIONS if not isinstance(p.type, Number)]
    assert not plain
    expected = {"check --keep-id", "hub --timeout", "hub --workers", "serve --port"}
    assert expected <= {f"{cmd} {p.opts[0]}" for cmd, p in OPTIONS}


def _out_of_range(t: Number) -> list[str]:
    low = t.low if t.low_open else t.low - 1
    values = [str(low), str(t.high + 1), "nan", "inf", "-inf", "12x"]
    if t.kind is int:
        values.append("2.5")
    return values


@pytest.mark.parametrize(
    ("command", "option"),
    [(c, p) for c, p in OPTIONS],
    ids=[f"{c} {p.opts[0]}" for c, p in OPTIONS],
)
def test_a_value_out_of_range_is_a_one_line_usage_error(command, option, capsys, tmp_path):
    assert isinstance(option.type, Number)
    for value in _out_of_range(option.type):
        code = main([command, option.opts[0], value, str(tmp_path / "nothing-here")])
        out, err = capsys.readouterr()
        assert code == 2, (command, option.opts[0], value, out, err)
        assert out == ""
        assert err.startswith(f"error: {option.opts[0]}: "), err
        assert err.count("\n") == 1, err
        assert option.type.bounds in err


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "0"])
def test_hub_timeout_out_of_range_never_reaches_the_hub(value, capsys):
    code = main(["hub", "--timeout", value, "org/model"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == (
        f"error: --timeout: {value if value in ('-1', '0') else repr(value)} is not a number of "
        "seconds (more than 0 and at most 3600)\n"
    )


def test_values_in_range_are_taken():
    assert Number(float, 0, 3600, "s", low_open=True).convert("0.5", None, None) == 0.5
    assert Number(int, 1, 64, "n").convert("64", None, None) == 64
    assert Number(int, 0, 2**32 - 1, "id").convert(7, None, None) == 7
