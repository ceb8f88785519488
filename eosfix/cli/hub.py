"""``eosfix hub``: check Hub repos (named in any spelling ``eosfix check`` takes) or a whole
organisation, open fix PRs (``eosfix upload`` is in ``eosfix.cli.upload``).

One module, kept apart so ``check``/``fix`` never import huggingface_hub or rich: the command,
its text output and its summary line share the run they describe.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from eosfix.cli import batch as batchcli
from eosfix.cli import live as bars
from eosfix.cli.common import keep_id_option, quiet_option, strict_option, token_option
from eosfix.cli.numbers import LIMIT, MAX_PRS, TIMEOUT, WORKERS
from eosfix.cli.term import color_option
from eosfix.core.outcome import EXIT_INPUT, QUIET, Interrupted
from eosfix.render.report import summary_parts
from eosfix.sources.hub.read import quiet_progress

if TYPE_CHECKING:
    from eosfix.batch.hub import HubSource
    from eosfix.batch.run import PrState, Run
    from eosfix.batch.state import StateFile
    from eosfix.cli.table import TermTable
    from eosfix.targets.open import Refused
    from eosfix.targets.parse import HubTarget


def summary_line(run: Run) -> str:
    """One line: how many repos came to what, and what it cost in requests."""
    parts = summary_parts(run.counts(), fixable="would be fixed")
    text = ", ".join(f"{n} {'repo' if n == 1 else 'repos'} {what}" for n, what in parts)
    text = text or "nothing checked"
    stats = run.summary()
    if stats["resumed"]:
        text += f"; {stats['resumed']} unchanged since the last run (--state)"
    if "prs_opened" in stats:
        n = stats["prs_opened"]
        text += f"; {n} pull request{'s' * (n != 1)} opened"
        text += f", {stats['prs_updated']} updated" if stats["prs_updated"] else ""
    elif "prs_would_open" in stats:
        n = stats["prs_would_open"]
        text += f"; {n} pull request{'s' * (n != 1)} would be opened (dry run)"
    if stats.get("prs_opened_earlier"):
        n = stats["prs_opened_earlier"]
        text += f"; {n} pull request{'s' * (n != 1)} opened earlier (--state)"
    n = stats["requests"]
    text += f"; {n} request{'s' * (n != 1)} for listings and files"
    if stats.get("paths_info"):
        text += f" ({stats['paths_info']} paths-info)"
    if stats["unreachable"]:
        n = stats["unreachable"]
        text += f"; {n} attempt{'s' * (n != 1)} could not connect"
    text += f"; {_rate_note(run)}" if stats["rate_limited"] else ""
    if n := stats.get("waits_capped", 0):  # resets announced past any quota window
        text += f"; {n} quota reset{'s' * (n != 1)} over {stats['longest_wait']:.0f} s cut to it"
    return text + ("; interrupted" if run.interrupted else "")


def _rate_note(run: Run) -> str:
    source: HubSource = run.source  # type: ignore[assignment]
    gate, stats = source.reader.http.gate, source.reader.http.stats
    waited = f", {gate.waited:.0f} s paused" if gate.waited >= 1 else ""
    return (
        f"{stats['rate_limited']} rate-limited (429){waited}, concurrency down to "
        f"{gate.lowest}, now {gate.limit} of {gate.max}"
    )


def _pr_line(repo_id: str, state: PrState | None) -> str | None:
    """``org/name: pull request opened: URL`` (``opened earlier (#3)`` for one an earlier run
    opened, recorded in --state), or what happened instead; None without a PR."""
    if state is None or not state.words or state.error:
        return None
    pr, url, num = state.words, state.url, state.num
    if pr == "opened earlier" and num is not None:
        pr = f"{pr} (#{num})"
    return f"{repo_id}: pull request {pr}" + (f": {url}" if url else "")


def _emit_text(
    run: Run,
    *,
    blocks: bool,
    hint: bool,
    quiet: bool = False,
    screen: bars.Screen | None = None,
    table: TermTable | None = None,
) -> None:
    """Text: each repo's block (repo ids) or the table (a listing: ``table``'s rows as each
    repo finishes on a terminal, else the whole table at the end), PR lines, the summary
    (``quiet``: only repos with something to say). ``screen``: where lines go while a
    progress bar runs."""
    from eosfix.batch.verdict import LABEL
    from eosfix.render.batch import verdict_words

    screen = screen or bars.Screen()
    pr_lines: list[str] = []
    fixable = first = False
    for result in run:
        repo, v = result.item.repo_id, result.verdict
        if v.status == "error":
            screen.err(f"{repo}: error: {v.error}")
        elif quiet and v.name in QUIET:
            pass
        elif blocks:
            words = verdict_words(v.name, v.problem)
            text = v.text.replace(LABEL, repo) if v.text else f"{repo}: {words}"
            screen.out(text if not first else "\n" + text)
            first = True
        if table is not None and not blocks and (not quiet or v.name not in QUIET):
            screen.out(table.add(result.row()))
        state = result.unit.pr
        if state is not None and state.error:
            screen.err(f"{repo}: error: {state.error}")
        line = _pr_line(repo, state)
        if line:
            pr_lines.append(line)
        fixable = fixable or v.name == "fixable"
    if run.rows is not None:
        rows = [r for r in run.results if not quiet or r.verdict not in QUIET]
        screen.flush()
        batchcli.print_table(rows, batchcli.stdout_console())
    for line in pr_lines:
        screen.out(line)
    if hint and fixable:
        screen.out("(run with --pr to open a pull request per fixable repo)")
    screen.out(("\n" if first and not pr_lines and run.rows is None else "") + summary_line(run))


@contextlib.contextmanager
def _open_state(path: Path | None) -> Iterator[StateFile | None]:
    """The --state file while the audit runs (closed after it, interrupted or not)."""
    if path is None:
        yield None
        return
    from eosfix.batch.state import StateError, StateFile

    try:
        state = StateFile(path)
    except StateError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    try:
        yield state
    finally:
        state.close()


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def interrupted_kept(run: Run, state: StateFile | None) -> str:
    """What an interrupted audit did and did not do: ``40 repos checked, 3 pull requests
    opened, 12 listed but not checked; the listing of my-org was not finished; 40 repos
    recorded in audit.jsonl: run the same command again to go on from there``."""
    source: HubSource = run.source  # type: ignore[assignment]
    parts = [f"{_plural(run.count, 'repo')} checked"]
    prs = source.prs
    if prs is not None and not prs.dry_run:
        parts.append(f"{_plural(prs.new, 'pull request')} opened")
    left = max(0, len(source.targets) + source.seen - run.count)
    parts.append(f"{left} listed but not checked" if source.author else f"{left} not checked")
    text = ", ".join(parts)
    if source.author and not source.listed:
        text += f"; the listing of {source.author} was not finished"
    if state is not None:
        text += (
            f"; {_plural(state.written, 'repo')} recorded in {state.path}: run the same command "
            "again to go on from there"
        )
    return text


SORT_WORDS = ("downloads", "likes", "created", "modified", "trending")


@click.command()
@click.argument("repo_ids", nargs=-1)
@click.option("--author", metavar="ORG", help="Check every model repo of this user or org.")
@click.option("--search", metavar="TEXT", help="Only repos whose id contains TEXT.")
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="TAG",
    help="Only repos with this tag (repeat: all of them), e.g. conversational, "
    "base_model:quantized:Qwen/Qwen3-8B.",
)
@click.option(
    "--library",
    "libraries",
    multiple=True,
    metavar="NAME",
    help="Only repos of this library (mlx, gguf, transformers...): a tag, as --filter.",
)
@click.option("--pipeline-tag", metavar="TAG", help="Only repos of this task (text-generation).")
@click.option(
    "--sort",
    type=click.Choice(SORT_WORDS),
    default=None,
    help="The Hub's order (most first); default: the Hub's own.",
)
@click.option(
    "--limit",
    type=LIMIT,
    default=None,
    metavar="N",
    help="Only the first N repos the listing gives (with --sort: the top N).",
)
@click.option("--revision", metavar="REV", help="Branch, tag or commit (default: main).")
@click.option(
    "--pr",
    "open_prs",
    is_flag=True,
    help="Open one pull request per fixable repo (generation_config.json only); an open "
    "eosfix PR with the same change is reused, never duplicated.",
)
@click.option(
    "--max-prs",
    type=MAX_PRS,
    default=None,
    metavar="N",
    help="With --pr: open at most N new pull requests (in listing order); the others are "
    "listed as not opened.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="With --pr: open nothing; list the pull requests that would be opened.",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Record each finished repo in FILE (JSON lines); a rerun with the same FILE skips "
    "repos whose commit has not changed. Safe to interrupt (Ctrl-C).",
)
@click.option(
    "--workers",
    type=WORKERS,
    default=16,
    show_default=True,
    help="Most requests in flight at once (fewer while the Hub rate-limits).",
)
@click.option(
    "--timeout",
    type=TIMEOUT,
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds a Hub answer may take to begin (then its body its size's time); 6 tries.",
)
@keep_id_option
@token_option
@batchcli.format_option
@strict_option
@quiet_option
@color_option
def hub(
    repo_ids: tuple[str, ...],
    author: str | None,
    search: str | None,
    filters: tuple[str, ...],
    libraries: tuple[str, ...],
    pipeline_tag: str | None,
    sort: str | None,
    limit: int | None,
    revision: str | None,
    open_prs: bool,
    max_prs: int | None,
    dry_run: bool,
    state_path: Path | None,
    workers: int,
    timeout: float,
    keep_ids: tuple[int, ...],
    token: str | None,
    fmt: str,
    strict: bool,
    quiet: bool,
) -> None:
    """Check Hub repos by id, a whole organisation, or any slice of the Hub (only small
    config files are downloaded, never weights).

    REPO_ID is a Hub repo in any spelling eosfix check takes of one (org/name, a
    huggingface.co URL, hf.co/org/name:QUANT, org/name/FILE.gguf, @REV).

    --author, --search, --filter, --library, --pipeline-tag, --sort and --limit select repos
    the way the Hub lists them (one request per page of the listing); each repo's few small
    files are then brought in, each distinct content once, and kept, so a later audit of
    unchanged repos only reads the listing. Requests are paced to the Hub's quotas (its
    RateLimit headers); a repo that still fails gets one error line and the audit goes on.
    With --format markdown, a listing's table is followed by a report to publish: repos by
    verdict and by runtime, the template families most common among those to fix, and
    those by downloads.

    With --pr, open a pull request on each repo that would not stop, carrying the minimal
    generation_config.json edit.

    Exit 0: nothing to fix (warnings alone too, unless --strict). 1: something to fix or a
    problem eosfix cannot fix. 2: a repo could not be read, a PR not opened, or nothing
    checked (a listing without model repos). 130: interrupted (with --state, run again to
    go on).

    \b
    Example:
        eosfix hub Qwen/Qwen3-0.6B
        eosfix hub my-org/my-model --pr
        eosfix hub --author my-org --state audit.jsonl --format markdown
        eosfix hub --author my-org --pr --max-prs 10 --dry-run
        eosfix hub --library mlx --search Qwen3 --sort downloads --limit 1000
    """
    from eosfix.sources.hub.read import ListingQuery

    query = ListingQuery(author, search, (*filters, *libraries), pipeline_tag, sort, limit)
    listing = query != ListingQuery()
    if not repo_ids and not listing:
        raise click.UsageError(
            "give REPO_ID..., or select repos with --author, --search, --filter, --library, "
            "--pipeline-tag, --sort or --limit"
        )
    if (max_prs is not None or dry_run) and not open_prs:
        raise click.UsageError("--max-prs and --dry-run go with --pr")
    from huggingface_hub import HfApi

    from eosfix.batch.hub import HubSource
    from eosfix.batch.prs import PrPlan
    from eosfix.batch.run import Run
    from eosfix.render.batch import JSON_DETAIL, TEXT_DETAIL
    from eosfix.render.pr import pr_description
    from eosfix.sources.hub.read import HubReader

    targets = [_hub_target(given) for given in repo_ids]
    blocks = fmt == "text" and not listing
    many = listing or len(set(targets)) > 1
    with _open_state(state_path) as state, quiet_progress():
        reader = HubReader(token=token, timeout=timeout, workers=workers)
        plan = None
        if open_prs:
            api = HfApi(token=token)
            plan = PrPlan(api, reader, pr_description, max_prs, dry_run, keep_ids=keep_ids)
        source = HubSource(
            reader,
            targets=targets,
            query=query if listing else None,
            revision=revision,
            state=state,
            prs=plan,
            keep_ids=keep_ids,
        )
        show = many and batchcli.wants_progress(fmt)
        # a listing's table: on a terminal a row as each repo finishes, else whole at the end
        streamed = fmt == "text" and not blocks and batchcli.table_streams()
        with bars.progress_bar(show, source.status, source.estimate) as progress:
            run = Run(
                source,
                detail=JSON_DETAIL if fmt == "json" else TEXT_DETAIL if blocks else None,
                progress=progress,
                keep_rows=fmt == "text" and not blocks and not streamed,  # repo ids: blocks
                keep_ids=keep_ids,
            )
            run.strict = strict
            run.settled = plan.settled if plan is not None else None
            try:
                with batchcli.stoppable(run):  # Ctrl-C: what is in flight finishes, reported
                    if fmt == "text":
                        table = None
                        if streamed:
                            from eosfix.cli.table import TermTable

                            table = TermTable(batchcli.stdout_console(), with_pr=open_prs)
                        screen = bars.Screen(progress)
                        _emit_text(run, blocks=blocks, hint=not open_prs, quiet=quiet,
                                   screen=screen, table=table)  # fmt: skip
                    else:
                        _stream(run, fmt, digest=listing)
            except KeyboardInterrupt:  # a second Ctrl-C, or SIGTERM: stop at once
                run.close()
            if run.interrupted:
                raise Interrupted(interrupted_kept(run, state))
    for name, message in source.errors:
        click.echo(f"{name}: error: {message}", err=True)
    if listing and not run.count and not source.errors:
        from eosfix.render.words import no_model_repos

        click.echo(no_model_repos(query.label, author=query.label == author), err=True)
    if source.state_error is not None:
        click.echo(f"error: {source.state_error}", err=True)
    sys.exit(run.exit_code)


def _hub_target(given: str) -> HubTarget | Refused:
    """A repo named on the command line, in any spelling ``eosfix check`` takes of a Hub
    repo (``eosfix.targets.parse``), or why it names none."""
    from eosfix.core.errors import NotChecked
    from eosfix.targets.open import Refused
    from eosfix.targets.parse import parse_hub

    try:
        return parse_hub(given)
    except NotChecked as exc:
        return Refused(given, exc)


def _stream(run: Run, fmt: str, *, digest: bool = False) -> None:
    """json/csv/markdown on stdout (errors are in it); csv's summary line goes to stderr.
    ``digest``: a listing's Markdown ends with the report's sections (verdicts, runtimes,
    template families, what to fix first)."""
    batchcli.stream(run, fmt, lambda: summary_line(run), digest=digest)
    if fmt == "csv":
        click.echo(summary_line(run), err=True)
