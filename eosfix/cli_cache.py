"""`eosfix cache`: check (and fix) every model in the local Hugging Face cache."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from eosfix import cache as cachelib
from eosfix.report import EXIT_INPUT

_STYLE = {
    "fixed": "bold green", "fixable": "bold red", "problems": "bold red", "warned": "yellow",
    "ok": "green", "no_template": "dim", "error": "bold red",
}
_VERDICT_TEXT = {
    "fixed": "fixed", "fixable": "won't stop", "problems": "problems (not fixable)",
    "warned": "ok, with warnings", "ok": "ok", "no_template": "no chat template",
    "error": "error",
}


class _RichProgress(cachelib.Progress):
    """A transient progress bar on stderr."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.task: Any = None

    def start(self, stage: str, total: int) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(stage, total=total) if total else None

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)


def _ids(ids: tuple[int, ...] | None) -> str:
    if ids is None:
        return "(not set)"
    return str(ids[0]) if len(ids) == 1 else "[" + ", ".join(map(str, ids)) + "]"


def _row(r: cachelib.SnapshotResult) -> list[Any]:
    from rich.text import Text

    s, v = r.snapshot, r.verdict
    revision = s.short + (f" ({', '.join(s.refs)})" if s.refs else "")
    terms = "\n".join(f"{c} {i}" if i is not None else c for c, i in v.terminators)
    eos = "" if v.status == "error" else _ids(v.eos)
    if v.eos_source and v.eos_source != "generation_config.json" and v.status != "error":
        eos += f" (from {v.eos_source})"
    verdict = Text(_VERDICT_TEXT[r.verdict_name], style=_STYLE[r.verdict_name])
    if r.verdict_name in ("fixable", "fixed", "problems") and v.proposed is not None:
        verdict.append(f" -> {_ids(v.proposed)}")
    if v.error:
        verdict.append(f": {v.error}")
    return [s.repo_id, revision, terms or "-", eos, verdict]


def summary_line(run: cachelib.CacheRun) -> str:
    counts = run.counts()
    fixable = "fixable" if run.fixing else "would be fixed (run with --fix)"
    parts = [
        (counts["fixed"], "fixed"), (counts["fixable"], fixable),
        (counts["problems"], "with problems eosfix cannot fix"),
        (counts["warned"], "with warnings only"), (counts["ok"], "stop correctly"),
        (counts["no_template"], "without a chat template"),
        (counts["error"], "could not be read"),
    ]
    repos = len({r.snapshot.repo_id for r in run.results})
    n = len(run.results)
    head = f"{n} snapshot{'s' * (n != 1)} of {repos} repo{'s' * (repos != 1)}"
    body = ", ".join(f"{k} {what}" for k, what in parts if k) or "nothing to check"
    k = len(run.corrupted)
    tail = f"; {k} corrupted repo{'s' * (k != 1)} skipped" if k else ""
    return f"{head}: {body}{tail}"


def _render_text(run: cachelib.CacheRun) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:  # piped: no wrapping at 80 columns
        console.width = 200
    if run.results:
        table = Table(show_lines=False, header_style="bold")
        for name in ("repo", "revision", "ends a turn", "stops on", "verdict"):
            table.add_column(name, overflow="fold")
        for r in run.results:
            table.add_row(*(Text(c) if isinstance(c, str) else c for c in _row(r)))
        console.print(table)
    for c in run.corrupted:
        console.print(f"[bold red]corrupted[/] {escape(c.repo_id or c.name or '?')}: "
                      f"{escape(c.message)} (skipped)", soft_wrap=True)
    console.print(escape(summary_line(run)), soft_wrap=True)


def _use_progress() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


@click.command()
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="The hub cache (default: HF_HUB_CACHE, else $HF_HOME/hub).")
@click.option("--fix", "do_fix", is_flag=True,
              help="Fix every snapshot that needs it (the link is replaced, blobs stay intact).")
@click.option("--repo", "repos", multiple=True, metavar="GLOB",
              help="Only repo ids matching this glob, e.g. 'Qwen/*' (repeatable).")
@click.option("--revision", "revisions", multiple=True, metavar="REV",
              help="Only this ref ('main', 'refs/pr/1') or commit sha (repeatable; "
              "default: every cached revision).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text for people, json for scripts.")
def cache(cache_dir: str | None, do_fix: bool, repos: tuple[str, ...],
          revisions: tuple[str, ...], fmt: str) -> None:
    """Check every model in the local Hugging Face cache; --fix repairs them in place.

    Each revision is its own snapshot: a fix replaces that snapshot's link by a file and
    never touches the shared blobs, so other revisions keep their files.
    Exit 0: nothing to fix. 1: findings, or files changed. 2: unreadable or corrupted input.

    \b
    Example:
        eosfix cache
        eosfix cache --repo 'Qwen/*' --revision main --fix
    """
    root = cache_dir if cache_dir is not None else cachelib.default_cache_dir()
    try:
        scan = cachelib.select(cachelib.scan_cache(root), repos, revisions)
    except cachelib.CacheError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    if _use_progress():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      console=Console(stderr=True), transient=True) as bar:
            run = cachelib.run_cache(scan, fix=do_fix, detail=fmt == "json",
                                     progress=_RichProgress(bar))
    else:
        run = cachelib.run_cache(scan, fix=do_fix, detail=fmt == "json")
    if fmt == "json":
        click.echo(json.dumps(cachelib.run_to_dict(run), indent=2, ensure_ascii=False))
    else:
        _render_text(run)
    sys.exit(run.exit_code)
