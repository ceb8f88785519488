"""The bot's web service (ASGI, FastAPI): one endpoint for Hub webhooks, health and metrics.

``POST /webhook``: the ``X-Webhook-Secret`` header is compared in constant time (401 and
nothing queued otherwise); the body is parsed with huggingface_hub's ``WebhookPayload`` (400
with one line when it is not one); a ``repo.content`` update of a watched model repo's
default branch is written to the journal and queued (202); every other event is acknowledged
and ignored (200, with the reason). A push to a pull request's branch (``refs/pr/N``) is
ignored: eosfix's own PR commits never start another check.

``GET /healthz``: 200 while the service runs, with the queue's depth. ``GET /metrics``:
counts of events, checks, PRs and errors (JSON).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from huggingface_hub import WebhookPayload
from pydantic import ValidationError

from eosfix.batch.session import HubSession
from eosfix.serve.bot import Bot
from eosfix.serve.config import ServeConfig
from eosfix.serve.journal import Journal, Push, new_push

DEFAULT_BRANCH = "refs/heads/main"


def classify(
    payload: WebhookPayload, config: ServeConfig, head_sha: str | None = None
) -> tuple[Push | None, str]:
    """The push to check, or why the event is ignored. ``head_sha``: the payload's
    ``repo.headSha`` as the Hub spells it (huggingface_hub's model reads ``head_sha``)."""
    if payload.event.scope != "repo.content" or payload.event.action != "update":
        return None, f"event {payload.event.scope}/{payload.event.action} is not a push"
    repo = payload.repo
    if repo.type != "model":
        return None, f"{repo.type} repo, not a model"
    if not config.watches(repo.name):
        return None, f"{repo.name} is not watched"
    sha = repo.head_sha or head_sha
    if payload.updatedRefs is not None:
        heads = {r.ref: r.newSha for r in payload.updatedRefs}
        if DEFAULT_BRANCH not in heads:
            refs = ", ".join(sorted(heads)) or "none"
            return None, f"no push to the default branch (refs updated: {refs})"
        sha = heads[DEFAULT_BRANCH]
    if not sha:
        return None, "no commit in the payload (a deleted branch?)"
    return new_push(repo.name, sha, DEFAULT_BRANCH), "queued"


def _head_sha(body: bytes) -> str | None:
    data = json.loads(body)
    repo = data.get("repo") if isinstance(data, dict) else None
    sha = repo.get("headSha") if isinstance(repo, dict) else None
    return sha if isinstance(sha, str) else None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(config: ServeConfig, *, session: HubSession | None = None) -> FastAPI:
    """The service; ``session`` is the Hub client (tests give one pointed at a stand-in)."""
    journal = Journal(config.state_dir)
    bot = Bot(config, journal, session)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        bot.start()
        try:
            yield
        finally:  # SIGTERM: finish what is in flight, or leave it pending in the journal
            await bot.stop(config.grace)
            journal.close()

    app = FastAPI(title="eosfix", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.bot = bot

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        bot.metrics["events"] += 1
        given = request.headers.get("x-webhook-secret", "").encode()
        if not hmac.compare_digest(given, config.secret.encode()):
            bot.metrics["rejected"] += 1
            return _error(401, "missing or wrong X-Webhook-Secret")
        body = await request.body()
        try:
            payload = WebhookPayload.model_validate_json(body)
        except ValidationError as exc:
            bot.metrics["rejected"] += 1
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return _error(400, f"not a Hub webhook payload: {where}: {first['msg']}")
        push, reason = classify(payload, config, _head_sha(body))
        if push is None:
            bot.metrics["ignored"] += 1
            return JSONResponse({"status": "ignored", "reason": reason})
        await bot.submit(push)
        return JSONResponse(
            {"status": "queued", "repo": push.repo, "sha": push.sha}, status_code=202
        )

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "queued": bot.depth(), "in_flight": bot.metrics["in_flight"]}

    @app.get("/metrics")
    async def metrics() -> dict[str, Any]:
        counts = dict(sorted(bot.metrics.items()))
        return {**counts, "queued": bot.depth(), "policy": config.policy, "dry_run": config.dry_run}

    return app
