"""``eosfix hub`` and ``eosfix upload``: the commands that talk to the Hugging Face Hub.

Kept in its own module so ``check``/``fix`` never import huggingface_hub or rich.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from eosfix.api import RepoResult
from eosfix.check import Status
from eosfix.cli.common import _format_option
from eosfix.report import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, RENDERER_BY_NAME, Report

_token_option = click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help="Hub token (default: the one huggingface_hub finds: HF_TOKEN or `hf auth login`). "
    "Never printed.",
)


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """No huggingface_hub progress bars: eosfix shows its own progress."""
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def _check_all(
    session: object, repo_ids: list[str], revision: str | None, workers: int
) -> list[RepoResult]:
    """Check concurrently; a rich progress bar on a terminal, nothing when piped."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from eosfix.sources.hub import HubSession

    assert isinstance(session, HubSession)
    console = Console(stderr=True)
    show = console.is_terminal and len(repo_ids) > 1
    with Progress(
        TextColumn("checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
        disable=not show,
    ) as progress:
        task = progress.add_task("", total=len(repo_ids))

        def done(result: RepoResult) -> None:
            progress.update(task, advance=1, description=result.name)

        return session.check_many(repo_ids, revision, workers=workers, on_done=done)


def _summary_table(results: list[RepoResult]) -> str:
    """The table that ends an organisation scan (plain text when piped)."""
    from rich.console import Console
    from rich.table import Table

    from eosfix.report import _ids

    table = Table(title="eosfix hub summary")
    for col in ("repo", "status", "stops on", "proposed", "pull request or error"):
        table.add_column(col)
    for r in results:
        if r.error is not None:
            table.add_row(r.name, "error", "", "", _error_text(r))
            continue
        assert r.check is not None
        proposed = _ids(r.check.proposed) if r.check.proposed is not None else ""
        table.add_row(
            r.name,
            r.check.status.value,
            _ids(r.check.stop.raw),
            proposed,
            str(r.extra.get("pr_url", "")),
        )
    buf = io.StringIO()
    Console(file=buf, width=160, force_terminal=False, no_color=True).print(table)
    return buf.getvalue().rstrip("\n")


@click.command()
@click.argument("repo_ids", nargs=-1)
@click.option("--author", metavar="ORG", help="Check every model repo of this user or org.")
@click.option("--revision", metavar="REV", help="Branch, tag or commit (default: main).")
@click.option(
    "--pr",
    "open_prs",
    is_flag=True,
    help="Open one pull request per fixable repo (generation_config.json only).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 16),
    default=4,
    show_default=True,
    help="Repos checked at the same time.",
)
@click.option(
    "--timeout", type=float, default=None, metavar="SECONDS", help="Timeout of each Hub request."
)
@_token_option
@_format_option
def hub(
    repo_ids: tuple[str, ...],
    author: str | None,
    revision: str | None,
    open_prs: bool,
    workers: int,
    timeout: float | None,
    token: str | None,
    fmt: str,
) -> None:
    """Check Hub repos by id (only small config files are downloaded, never weights).

    With --pr, open a pull request on each repo that would not stop, carrying the minimal
    generation_config.json edit; an open eosfix PR with the same change is reused.

    Exit 0: nothing to fix. 1: findings. 2: a repo could not be read or a PR not opened.

    \b
    Example:
        eosfix hub Qwen/Qwen3-0.6B
        eosfix hub my-org/my-model --pr
        eosfix hub --author my-org
    """
    from eosfix.sources.hub import HubError, HubSession

    if not repo_ids and not author:
        raise click.UsageError("give REPO_ID... or --author ORG")
    failed = False
    with tempfile.TemporaryDirectory(prefix="eosfix-hub-") as work, _quiet_hub():
        session = HubSession(work, token=token, timeout=timeout)
        ids = list(dict.fromkeys(repo_ids))
        if author:
            try:
                ids += [i for i in session.list_author(author) if i not in ids]
            except HubError as exc:
                click.echo(f"{author}: error: {exc.message}", err=True)
                sys.exit(EXIT_INPUT)
        results = _check_all(session, ids, revision, workers)
        if open_prs:
            failed = _open_prs(session, results)
        report = Report(list(results))
        if fmt == "text":
            _emit_text(results, report, scan=bool(author) or len(ids) > 1)
        else:
            click.echo(RENDERER_BY_NAME[fmt](results, report))
    sys.exit(EXIT_INPUT if failed else report.exit_code)


def _open_prs(session: object, results: list[RepoResult]) -> bool:
    """Open (or find) a PR for each fixable repo; record its URL; True if one failed."""
    from eosfix.sources.hub import HubError, HubSession

    assert isinstance(session, HubSession)
    failed = False
    for i, r in enumerate(results):
        if r.status is not Status.FIXABLE:
            continue
        try:
            pr = session.open_pr(r)
        except HubError as exc:
            click.echo(f"{r.name}: error: {exc.message}", err=True)
            failed = True
            continue
        if pr is None:
            continue
        results[i] = RepoResult(
            r.path,
            r.check,
            r.patches,
            r.written,
            r.error,
            r.label,
            {**r.extra, "pr_url": pr.url, "pr_created": pr.created},
        )
    return failed


def _error_text(r: RepoResult) -> str:
    """The reason a repo could not be read; a file error keeps its repo path."""
    assert r.error is not None
    return r.error.message if r.error.path == r.name else str(r.error)


def _emit_text(results: list[RepoResult], report: Report, *, scan: bool) -> None:
    from eosfix.report import render_text

    for r in results:
        if r.error is not None:
            click.echo(f"{r.name}: error: {_error_text(r)}", err=True)
    readable = [r for r in results if r.error is None]
    text = render_text(readable, report, fixing=True, dry_run=True)
    for r in readable:
        if "pr_url" in r.extra:
            verb = "opened" if r.extra.get("pr_created") else "already open"
            text += f"\n{r.name}: pull request {verb}: {r.extra['pr_url']}"
    if any(r.status is Status.FIXABLE and "pr_url" not in r.extra for r in readable):
        text += "\n(run with --pr to open a pull request per fixable repo)"
    click.echo(text)
    if scan:
        click.echo(_summary_table(results))


@click.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("repo_id")
@click.option("--fix", "do_fix", is_flag=True, help="Fix the folder first (minimal edit).")
@click.option("--revision", metavar="BRANCH", help="Branch to upload to (default: main).")
@click.option("--create-pr", is_flag=True, help="Upload as a pull request.")
@click.option("--private", is_flag=True, help="Create the repo as private if it does not exist.")
@click.option("--commit-message", default=None, help="Commit title.")
@_token_option
def upload(
    folder: Path,
    repo_id: str,
    do_fix: bool,
    revision: str | None,
    create_pr: bool,
    private: bool,
    commit_message: str | None,
    token: str | None,
) -> None:
    """Upload FOLDER to REPO_ID only if it stops at the end of every turn.

    The folder is checked (and with --fix, fixed) first; a folder that would not stop is
    refused and nothing is uploaded (exit 1). Otherwise it is uploaded with
    huggingface_hub's upload_folder and the commit URL is printed.

    \b
    Example:
        eosfix upload ./out me/model-mlx-4bit --fix
    """
    from huggingface_hub import HfApi

    from eosfix.sources.hub import check_folder, describe_error, refusal_reason

    result = check_folder(folder, fix=do_fix)
    for name in result.written:
        click.echo(f"Fixing {folder / name}", err=True)
    reason = refusal_reason(result)
    if reason is not None:
        if result.check is not None:
            click.echo(RENDERER_BY_NAME["text"]([result], Report([result])))
        click.echo(f"refusing to upload {folder} to {repo_id}: {reason}", err=True)
        sys.exit(EXIT_FINDINGS)
    api = HfApi(token=token)
    try:
        with _quiet_hub():
            if not api.repo_exists(repo_id):
                api.create_repo(repo_id, private=private)
            commit = api.upload_folder(
                repo_id=repo_id,
                folder_path=folder,
                revision=revision,
                create_pr=create_pr,
                commit_message=commit_message,
            )
    except Exception as exc:
        from eosfix.sources.hub import _hub_errors

        if not isinstance(exc, _hub_errors()):
            raise
        message, _ = describe_error(exc)
        click.echo(f"{repo_id}: error: {message}", err=True)
        sys.exit(EXIT_INPUT)
    click.echo(commit.pr_url or commit.commit_url)
    sys.exit(EXIT_OK)
