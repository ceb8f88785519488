"""`eosfix cache`: check (and fix) every model in the local Hugging Face cache."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from eosfix.batch.cache import CacheRun
from eosfix.cli import batch as batchcli
from eosfix.cli import live as bars
from eosfix.cli.common import keep_id_option, quiet_option, strict_option
from eosfix.cli.term import color_option
from eosfix.core.errors import EosfixError
from eosfix.core.outcome import EXIT_INPUT, QUIET, Interrupted
from eosfix.render.batch import JSON_DETAIL
from eosfix.render.report import summary_parts
from eosfix.sources import cache as cachelib

GGUF_FIX = "eosfix fix FILE --output NEW.gguf"  # a cache blob is shared: never written through


def summary_line(run: CacheRun) -> str:
    """``2 snapshots of 2 repos: 1 would be fixed (run with --fix), ...``; GGUF files are
    counted apart, as files (``1 snapshot of 1 repo, 2 GGUF files in it: 1 would be fixed
    ...``)."""
    fixable = "fixable" if run.fixing else "would be fixed (run with --fix)"
    repos, ggufs = run.repos, run.cache.ggufs
    n = run.cache.snapshots if ggufs else run.count
    head = f"{n} snapshot{'s' * (n != 1)} of {repos} repo{'s' * (repos != 1)}"
    if not ggufs:
        parts = summary_parts(run.counts(), fixable=fixable)
        body = ", ".join(f"{k} {what}" for k, what in parts) or "nothing checked"
    else:
        folders = [f"{_plural(k, 'snapshot')} {what}"
                   for k, what in summary_parts(run.counts("folder"), fixable=fixable)]  # fmt: skip
        files = summary_parts(run.counts("gguf"), fixable=f"would be fixed ({GGUF_FIX})")
        head += f", {_plural(ggufs, 'GGUF file')} in {'it' if n == 1 else 'them'}"
        body = ", ".join([*folders, *(f"{_plural(k, 'GGUF file')} {what}" for k, what in files)])
    k = len(run.corrupted)
    tail = f"; {k} corrupted repo{'s' * (k != 1)} skipped" if k else ""
    stopped = "; interrupted" if run.interrupted else ""
    return f"{head}: {body}{tail}{stopped}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def interrupted_kept(run: CacheRun, total: int) -> str:
    """What an interrupted run did and did not do: ``61 snapshots fixed, 12 checked and left
    as they were, 248 not checked`` (``total``: how many snapshots the run would have seen)."""
    left = max(0, total - run.count)
    if not run.fixing:
        return f"{_plural(run.count, 'snapshot')} checked, {left} not checked"
    fixed = run.counts()["fixed"]
    return (
        f"{_plural(fixed, 'snapshot')} fixed, {run.count - fixed} checked and left as they "
        f"were, {left} not checked; run the same command again to go on"
    )


def _stream_table(run: CacheRun, quiet: bool, screen: bars.Screen) -> None:
    """On a terminal: each snapshot's row as it finishes (``quiet``: only rows with
    something to say), above the progress bar."""
    from eosfix.cli.table import TermTable

    table = TermTable(batchcli.stdout_console())
    for result in run:
        row = result.row()
        if not quiet or row.verdict not in QUIET:
            screen.out(table.add(row))


def _render_text(run: CacheRun, quiet: bool, *, streamed: bool = False) -> None:
    """The table (``quiet``: only rows with something to say; ``streamed``: printed already,
    a row at a time), each corrupted repo, the summary."""
    from rich.markup import escape

    console = batchcli.stdout_console()
    if not streamed:
        rows = [r for r in run.results if not quiet or r.verdict not in QUIET]
        batchcli.print_table(rows, console)
    for c in run.corrupted:
        console.print(
            f"[bold red]corrupted[/] {escape(c.repo_id or c.name or '?')}: "
            f"{escape(c.message)} (skipped)",
            soft_wrap=True,
        )
    console.print(escape(summary_line(run)), soft_wrap=True)


def _selection(
    repos: tuple[str, ...], revisions: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """--repo as given: a glob (``'Qwen/*'``), or a repo in any spelling ``eosfix check``
    takes of one (``https://huggingface.co/org/name/tree/REV``: its id, and its revision
    when it names one)."""
    from eosfix.core.errors import NotChecked
    from eosfix.targets.parse import parse_hub

    globs, revs = [], list(revisions)
    for given in repos:
        try:
            target = parse_hub(given)
        except NotChecked:
            globs.append(given)  # a glob: no repo id spells '*'
            continue
        globs.append(target.repo_id)
        if target.revision is not None:
            revs.append(target.revision)
    return tuple(globs), tuple(dict.fromkeys(revs))


def _fixed_copy_command(path: Path) -> str:
    """The command check names for a GGUF it may not write (``eosfix fix FILE --output NEW``,
    a name nothing holds yet), as it runs when typed."""
    from eosfix.containers.gguf.read import read_header
    from eosfix.containers.gguf.write import instead_command

    try:
        return instead_command(read_header(path))
    except EosfixError:  # read once already; a file gone since: the plain spelling
        return shlex.join(["eosfix", "fix", str(path), "--output", "NEW.gguf"])


def _nothing_selected(
    scan: cachelib.CacheScan, repos: tuple[str, ...], revisions: tuple[str, ...]
) -> str | None:
    """Why the selection holds no snapshot, when it holds none."""
    if scan.estimate():
        return None
    where = f"in the cache {scan.cache_dir}"
    if repos and not scan.folders:
        globs = " ".join(f"--repo {g!r}" for g in repos)
        return f"no cached model repo matches {globs} {where}"
    if revisions:
        revs = " ".join(f"--revision {r!r}" for r in revisions)
        which = "the matching repos" if repos else "any cached model repo"
        return f"no snapshot of {which} matches {revs} {where}"
    return None


@click.command()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="The hub cache (default: HF_HUB_CACHE, else $HF_HOME/hub).",
)
@click.option(
    "--fix",
    "do_fix",
    is_flag=True,
    help="Fix every snapshot that needs it (the link is replaced, blobs stay intact).",
)
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="GLOB",
    help="Only repo ids matching this glob, e.g. 'Qwen/*' (repeatable).",
)
@click.option(
    "--revision",
    "revisions",
    multiple=True,
    metavar="REV",
    help="Only this ref ('main', 'refs/pr/1') or commit sha (repeatable; "
    "default: every cached revision).",
)
@keep_id_option
@batchcli.format_option
@strict_option
@quiet_option
@color_option
def cache(
    cache_dir: str | None,
    do_fix: bool,
    repos: tuple[str, ...],
    revisions: tuple[str, ...],
    keep_ids: tuple[int, ...],
    fmt: str,
    strict: bool,
    quiet: bool,
) -> None:
    """Check every model in the local Hugging Face cache; --fix repairs them in place.

    Each revision is its own snapshot: a fix replaces that snapshot's link by a file and
    never touches the shared blobs, so other revisions keep their files.

    Exit 0: nothing to fix (warnings alone too, unless --strict). 1: something to fix, files
    changed, or a problem eosfix cannot fix. 2: unreadable or corrupted input, a --repo or
    --revision that matches nothing, or nothing checked at all.

    \b
    Example:
        eosfix cache
        eosfix cache --repo 'Qwen/*' --revision main --fix
    """
    repos, revisions = _selection(repos, revisions)
    root = cache_dir if cache_dir is not None else cachelib.default_cache_dir()
    try:
        scan = cachelib.select(cachelib.scan_cache(root), repos, revisions)
    except cachelib.CacheError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    nothing = _nothing_selected(scan, repos, revisions)
    if nothing is not None:  # the run goes on (JSON stays a whole document) and exits 2
        click.echo(f"error: {nothing}", err=True)
    text = fmt == "text"
    streamed = text and batchcli.table_streams()  # on a terminal: a row as each finishes

    def go(progress: bars.RichProgress | None) -> CacheRun:
        detail = JSON_DETAIL if fmt == "json" else None
        keep = text and not streamed
        run = CacheRun(
            scan, fix=do_fix, detail=detail, progress=progress, keep_rows=keep, keep_ids=keep_ids
        )
        run.strict = strict
        try:
            with batchcli.stoppable(run):  # Ctrl-C: what is in flight finishes, is reported
                if streamed:
                    _stream_table(run, quiet, bars.Screen(progress))
                elif text:
                    run.drain()
                else:
                    batchcli.stream(run, fmt, lambda: summary_line(run))
        except KeyboardInterrupt:  # a second Ctrl-C, or SIGTERM: stop at once
            run.close()  # the worker processes stop; a file being written is left whole
        return run

    try:
        with bars.progress_bar(batchcli.wants_progress(fmt)) as progress:
            run = go(progress)
    except cachelib.CacheError as exc:  # only a huggingface_hub without the per-repo scanner
        sys.stdout.flush()
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    if text:
        _render_text(run, quiet, streamed=streamed)  # interrupted: the snapshots done so far
    elif fmt == "csv":
        click.echo(summary_line(run), err=True)
    for path in run.cache.unwritten:  # --fix of a GGUF: what it would write, and how
        click.echo(
            f"{path}: not written: its blob is shared by every revision that has it; "
            f"{_fixed_copy_command(path)} writes the fixed copy",
            err=True,
        )
    sys.stdout.flush()
    if run.interrupted:
        raise Interrupted(interrupted_kept(run, scan.estimate()))
    sys.exit(run.exit_code)
