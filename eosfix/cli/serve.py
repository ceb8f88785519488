"""``eosfix serve``: the Hub bot, a web service for Hub webhooks (needs ``eosfix[serve]``)."""

from __future__ import annotations

import contextlib

import click

from eosfix.cli.numbers import PORT
from eosfix.core.errors import EosfixError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7860, show_default=True, type=PORT, help="Port to listen on.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="A TOML file of settings ([eosfix.serve] or top level); the environment wins.",
)
def serve(host: str, port: int, config_path: str | None) -> None:
    """Watch Hub repos: check every push to a watched model repo at its new commit, and open
    (or update) the fix pull request, or report, by policy.

    Enter this service's URL + /webhook in the Hub's webhook settings (Settings ->
    Webhooks: "Repo update" events, the repos or authors to watch, a secret), and give the
    same secret in EOSFIX_WEBHOOK_SECRET. Settings (environment, or --config): HF_TOKEN,
    EOSFIX_POLICY (report | pr), EOSFIX_WATCH_REPOS, EOSFIX_WATCH_AUTHORS, EOSFIX_COMMENT,
    EOSFIX_DRY_RUN, EOSFIX_STATE_DIR (the queue: a restart loses no push), EOSFIX_WORKERS,
    EOSFIX_ATTEMPTS, EOSFIX_GRACE, EOSFIX_MAX_BODY, EOSFIX_REQUEST_TIMEOUT,
    EOSFIX_MAX_CONNECTIONS. GET /healthz and /metrics report its state; logs are JSON lines on
    stderr. SIGTERM finishes the work in flight (or leaves it queued).

    \b
    Example:
        EOSFIX_WEBHOOK_SECRET=... HF_TOKEN=hf_... EOSFIX_POLICY=pr \\
            eosfix serve --host 0.0.0.0 --port 7860
    """
    try:
        from eosfix.serve.app import create_app
        from eosfix.serve.limits import server
    except ImportError as exc:
        raise EosfixError(
            f"eosfix serve needs its web server: pip install 'eosfix[serve]' ({exc.name} is "
            "missing)"
        ) from None
    from eosfix.core.limits import give_back_large_blocks
    from eosfix.serve.config import load_config
    from eosfix.serve.logs import json_logging

    config = load_config(config_path)
    give_back_large_blocks()  # a long-running process: what a large check held goes back
    log_config = json_logging()
    app = create_app(config)
    # uvicorn shuts down gracefully on SIGTERM/Ctrl-C, then re-raises the signal to the handler
    # it found (eosfix's: KeyboardInterrupt); recent releases (0.54 here) swallow that in
    # uvicorn.run, 0.29 (the declared floor) does not. A server stopped on purpose exits 0.
    with contextlib.suppress(KeyboardInterrupt):
        server(app, host=host, port=port, log_config=log_config).run()
