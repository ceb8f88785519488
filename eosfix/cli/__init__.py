"""The command line: parse, call the API, render, exit. Only ``eosfix.cli`` prints or exits.

Each command lives in a module of this package and is imported only when it runs
(``LazyGroup``), so ``eosfix check`` never imports huggingface_hub or rich. Ctrl-C and SIGTERM
stop any command the same way: one line on stderr, exit 130 (``main``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

import click

from eosfix import __version__
from eosfix.cli.term import color_option, show_only_own_styles, survive_closed_pipe
from eosfix.core.errors import EosfixError
from eosfix.core.outcome import EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, Interrupted


class LazyGroup(click.Group):
    """Subcommands are imported from their module only when used (fast startup). ``--help``
    lists them from ``summaries`` (each one's first sentence), so it imports none."""

    lazy: dict[str, str] = {}  # noqa: RUF012 - filled at module end
    summaries: dict[str, str] = {}  # noqa: RUF012 - filled at module end
    # Set by ``main`` when the process is this command's alone (no argv given: the console
    # script, ``python -m eosfix``): then a command's modules, once imported, are frozen out
    # of the garbage collector (``gc.freeze``). They live as long as the process; without it,
    # every full collection a check triggers (compiling a template makes many objects) walks
    # them all again: 15% of a check of Qwen3-4B. Cycles made later are collected as before.
    freeze_imports = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, a stand-in made of its summary for each lazy command (one
        without a summary is imported to ask it)."""
        commands = {}
        for name in self.list_commands(ctx):
            summary = self.summaries.get(name) if name in self.lazy else None
            cmd = click.Command(name, help=summary) if summary else self.get_command(ctx, name)
            if cmd is not None:
                commands[name] = cmd
        click.Group.format_commands(click.Group(commands=commands), ctx, formatter)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, attr = self.lazy[cmd_name].split(":")
            cmd: click.Command = getattr(importlib.import_module(module), attr)
            if self.freeze_imports:
                gc.freeze()
            return cmd
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> object:
        """Ctrl-C in a command is ``Interrupted``, which ``main`` reports (click would print
        a blank line and raise Abort)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None
        except BrokenPipeError:  # a reader that stopped early: survive_closed_pipe's
            raise
        except OSError as exc:  # EMFILE, EIO outside any one repo (finding the paths...)
            where = f"{exc.filename}: " if exc.filename is not None else ""
            click.echo(f"error: {where}cannot read: {exc.strerror or exc}", err=True)
            ctx.exit(EXIT_INPUT)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eosfix")
@color_option
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Make chat models stop where they should.

    eosfix reads a model repository's chat template and tokenizer files, finds the token(s)
    that really end an assistant turn, and repairs generation_config.json so eos_token_id
    includes them. check, fix and explain take their option defaults from [tool.eosfix] in
    the nearest pyproject.toml (options given on the command line win).
    """
    from eosfix.cli.config import COMMANDS, option_defaults

    if ctx.invoked_subcommand in COMMANDS:
        ctx.default_map = {**option_defaults(Path.cwd()), **(ctx.default_map or {})}


LazyGroup.lazy = {
    "check": "eosfix.cli.repo:check",
    "fix": "eosfix.cli.repo:fix",
    "explain": "eosfix.cli.repo:explain",
    "cache": "eosfix.cli.cache:cache",
    "hub": "eosfix.cli.hub:hub",
    "upload": "eosfix.cli.upload:upload",
    "ollama": "eosfix.cli.ollama:ollama",
    "render": "eosfix.cli.ports:render",
    "goldens": "eosfix.cli.ports:goldens",
    "diagnose": "eosfix.cli.ports:diagnose",
    "serve": "eosfix.cli.serve:serve",
}
# The first sentence of each command's help, as --help lists it (tests/cli/test_imports.py holds
# each to its command's).
LazyGroup.summaries = {
    "check": "Report whether each model folder or GGUF file stops where its turns end (read-only).",
    "fix": "Rewrite eos_token_id so generation stops at every turn terminator, and only there.",
    "explain": "Explain one repo in depth: each probe rendered, each terminator with its evidence.",
    "cache": "Check every model in the local Hugging Face cache; --fix repairs them in place.",
    "hub": "Check Hub repos by id, a whole organisation, or any slice of the Hub (only small "
    "config files are downloaded, never weights).",
    "upload": "Upload FOLDER to REPO_ID only if it stops at the end of every turn.",
    "ollama": "Check every model in ollama's store: does it stop at the end of each turn?",
    "render": "Render a conversation exactly as apply_chat_template does, with its ids and stop "
    "ids.",
    "goldens": "Write golden prompts for a port's tests: one JSON line per conversation and "
    "template.",
    "diagnose": "Say what went wrong in what a hand-written generation loop produced.",
    "serve": "Watch Hub repos: check every push to a watched model repo at its new commit, and "
    "open (or update) the fix pull request, or report, by policy.",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: known errors print one line; a bug prints a hint (EOSFIX_DEBUG=1). Output
    piped into a reader that stops early (``| head``) does not change the exit code. Ctrl-C
    and SIGTERM print one line and exit 130."""
    survive_closed_pipe()
    show_only_own_styles()
    LazyGroup.freeze_imports = argv is None
    try:
        with _sigterm_interrupts():
            cli.main(
                args=list(argv) if argv is not None else None,
                prog_name="eosfix",
                standalone_mode=False,
            )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except Interrupted as exc:
        return _interrupted(exc)
    except KeyboardInterrupt:  # between click's own steps
        return _interrupted(Interrupted())
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # while click parsed the command line
            return _interrupted(Interrupted())
        click.echo("Aborted!", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return EXIT_INPUT
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
    except EosfixError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_INPUT
    except Exception:  # noqa: BLE001 - the last resort: a bug becomes exit 3 with a hint
        if os.environ.get("EOSFIX_DEBUG"):
            import traceback  # only a bug needs it

            traceback.print_exc()
        else:
            exc_type, exc_value, _ = sys.exc_info()
            click.echo(
                f"internal error: {exc_type.__name__ if exc_type else ''}: {exc_value}", err=True
            )
            click.echo("this is a bug in eosfix; set EOSFIX_DEBUG=1 for the traceback", err=True)
        return EXIT_INTERNAL
    return 0


def _interrupted(exc: Interrupted) -> int:
    """One line on stderr (after the terminal's ``^C``, on a line of its own); exit 130."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    newline = "\n" if sys.stderr.isatty() else ""
    click.echo(f"{newline}{exc}", err=True)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (``kill``, a CI timeout, a container stopping) stops a command like Ctrl-C:
    it raises KeyboardInterrupt in the main thread, so whatever cleans up after Ctrl-C runs.
    Only in this process: a worker process forked from it dies of SIGTERM as usual."""
    pid = os.getpid()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid:  # a forked child that kept this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt

    # SIGHUP (the terminal closed, an ssh session dropped) too
    signums = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    try:
        previous = {signum: signal.signal(signum, interrupt) for signum in signums}
    except ValueError:  # not the main thread (main() called from a thread): leave it
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
