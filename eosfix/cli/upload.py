"""``eosfix upload REPO_ID FOLDER``: upload a folder only if it stops at the end of every turn.

The arguments come in the order ``hf upload`` takes them. The earlier order (``FOLDER
REPO_ID``) still works, with a deprecation line on stderr: it is recognised when the first
argument is an existing folder and the second is not.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from eosfix.cli.common import token_option
from eosfix.cli.term import color_option
from eosfix.core.outcome import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK
from eosfix.render.report import RENDERER_BY_NAME, Report

OLD_ORDER = (
    "eosfix upload FOLDER REPO_ID is deprecated and will stop working in the next release: "
    "give REPO_ID FOLDER, the order hf upload takes"
)


def _upload_target(given: str, revision: str | None) -> tuple[str, str | None]:
    """(repo id, revision) of the repo named in any spelling ``eosfix check`` takes of one
    (``org/name``, a huggingface.co URL, ``@REV`` or ``/tree/REV``); a file or a quant is
    no place to upload a folder to."""
    from eosfix.core.errors import NotChecked
    from eosfix.targets.parse import parse_hub

    try:
        target = parse_hub(given)
    except NotChecked as exc:
        raise click.BadParameter(str(exc), param_hint="'REPO_ID'") from None
    if target.file is not None or target.quant is not None:
        raise click.BadParameter(
            f"{given}: names a file of the repo; give the repo (org/name)", param_hint="'REPO_ID'"
        )
    return target.repo_id, revision if revision is not None else target.revision


def _folder_text(text: str) -> str:
    """The folder a text names, as the target grammar takes a path: whitespace around it
    dropped unless a path has it; "" names none (``Path("")`` would be the current folder)."""
    return text if os.path.lexists(text) else text.strip()


def _is_folder(text: str) -> bool:
    folder = _folder_text(text)
    return bool(folder) and Path(folder).is_dir()


def _in_order(first: str, second: str) -> tuple[str, str]:
    """(repo id, folder) from the two arguments, in either order (see the module doc)."""
    if _is_folder(first) and not _is_folder(second):
        click.echo(f"warning: {OLD_ORDER} (eosfix upload {second} {first})", err=True)
        return second, first
    return first, second


def _folder(given: str) -> Path:
    """The folder FOLDER names; a usage error naming it when it names none."""
    text = _folder_text(given)
    if not text:
        raise click.BadParameter(f"{given!r}: empty: give a folder", param_hint="'FOLDER'")
    folder = Path(text)
    if not folder.is_dir():
        reason = "not a folder" if folder.exists() else "no such folder"
        raise click.BadParameter(f"{given!r}: {reason}", param_hint="'FOLDER'")
    return folder


@click.command()
@click.argument("repo_id")
@click.argument("folder")
@click.option("--fix", "do_fix", is_flag=True, help="Fix the folder first (minimal edit).")
@click.option("--revision", metavar="BRANCH", help="Branch to upload to (default: main).")
@click.option("--create-pr", is_flag=True, help="Upload as a pull request.")
@click.option("--private", is_flag=True, help="Create the repo as private if it does not exist.")
@click.option("--commit-message", default=None, help="Commit title.")
@token_option
@color_option
def upload(
    repo_id: str,
    folder: str,
    do_fix: bool,
    revision: str | None,
    create_pr: bool,
    private: bool,
    commit_message: str | None,
    token: str | None,
) -> None:
    """Upload FOLDER to REPO_ID only if it stops at the end of every turn.

    The arguments come in the order hf upload takes them (the earlier order, FOLDER REPO_ID,
    still works, with a deprecation line). The folder is checked
    (and with --fix, fixed) first; a folder that would not stop is refused and nothing is
    uploaded (exit 1). Otherwise it is uploaded with huggingface_hub's upload_folder and the
    commit URL is printed.

    \b
    Example:
        eosfix upload me/model-mlx-4bit ./out --fix
    """
    from eosfix.sources.hub.http import describe_error, hub_errors
    from eosfix.sources.hub.read import quiet_progress
    from eosfix.sources.hub.write import upload as upload_folder
    from eosfix.targets.session import check_before_upload, refusal_reason

    given, folder = _in_order(repo_id, folder)
    repo_id, revision = _upload_target(given, revision)
    path = _folder(folder)
    result = check_before_upload(path, fix=do_fix)
    for name in result.written:
        click.echo(f"Fixing {path / name}", err=True)
    reason = refusal_reason(result, how_to_fix="run again with --fix")
    if reason is not None:
        if result.check is not None:
            click.echo(RENDERER_BY_NAME["text"]([result], Report([result])))
        click.echo(f"refusing to upload {path} to {repo_id}: {reason}", err=True)
        sys.exit(EXIT_FINDINGS)
    try:
        with quiet_progress():
            commit = upload_folder(
                path,
                repo_id,
                token=token,
                create=True,
                private=private,
                revision=revision,
                create_pr=create_pr,
                commit_message=commit_message,
            )
    except Exception as exc:
        if not isinstance(exc, hub_errors()):
            raise
        message, _ = describe_error(exc)
        click.echo(f"{repo_id}: error: {message}", err=True)
        sys.exit(EXIT_INPUT)
    click.echo(commit.pr_url or commit.commit_url)
    sys.exit(EXIT_OK)
