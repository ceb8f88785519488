"""The bot's web service (ASGI, FastAPI): one endpoint for Hub webhooks, health and metrics.

``POST /webhook``: the ``X-Webhook-Secret`` header is compared in constant time (401, the body
never read, nothing queued otherwise). Then, before anything else, what the payload names is
checked: ``repo.name`` must be a Hub repo id (``org/name`` in the Hub's grammar: no ``..``,
no third part, which the HTTP client would collapse into another repo's path) and
``repo.headSha`` and each ``updatedRefs[].newSha`` a commit id (40 lowercase hex digits, or
null for a deleted branch); 400 with one line naming the field otherwise. The body is then
parsed with huggingface_hub's ``WebhookPayload`` (400 with one line when it is not one; a
body nested deeper than ``MAX_JSON_DEPTH`` levels is refused before any parser recurses). A
``repo.content`` update of a watched model repo's default branch is written to the journal
and queued (202); a redelivered push is not queued twice (202 while its copy waits; 200, the
earlier outcome in the reason, once it was handled), and every other event is acknowledged
and ignored (200, with the reason). A push to a pull request's
branch (``refs/pr/N``) is ignored: eosfix's own PR commits never start another check.

``GET /healthz``: 200 while the service runs, with the pushes queued (accepted, not yet taken
by a worker) and in flight. ``GET /metrics``: counts of events, checks, outcomes, PRs, errors,
crashes, and the limits' refusals (JSON).

The page for people (``GET /``, ``/check``, ``POST /pr``...) is ``eosfix.serve.page``.

Every route is under the limits of ``eosfix.serve.limits`` (body size, slow clients,
connections): the app carries them (``app.state.guard``) and ``limits.server`` serves it.
Every answer carries the headers of ``eosfix.serve.headers`` (``App`` wraps everything in
them). No OpenAPI schema or docs routes are served: the service has no API to document for
visitors.
"""

from __future__ import annotations

import hmac
import json
import re
from array import array
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import accumulate
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from huggingface_hub import WebhookPayload
from pydantic import ValidationError
from starlette.types import ASGIApp

from eosfix.core.hubid import is_hub_id
from eosfix.core.saferead import MAX_JSON_DEPTH
from eosfix.serve.bot import Bot
from eosfix.serve.config import ServeConfig
from eosfix.serve.headers import SecurityHeaders
from eosfix.serve.journal import Journal, Push, new_push
from eosfix.serve.limits import BoundedBody, Guard
from eosfix.serve.page import attach_page
from eosfix.sources.hub.http import stop_every_gate
from eosfix.targets.session import HubSession

DEFAULT_BRANCH = "refs/heads/main"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # in, in, out, out (signed bytes)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


class App(FastAPI):
    """FastAPI with ``SecurityHeaders`` outside its whole middleware stack, Starlette's error
    handler included: no answer of the app goes out without them."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def nested_over(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``body`` opens more than ``limit`` arrays and objects inside one
    another (brackets inside strings do not count). Told before parsing: Python's parser, the
    payload model and ``json.dumps`` all recurse, and a deep enough body makes any of them
    raise RecursionError."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # every webhook the Hub sends
    steps = _STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(array("b", steps)), default=0) > limit


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


def names_problem(data: Any) -> str | None:
    """Why the repo id or a commit id the payload names cannot be used, or None."""
    repo = data.get("repo") if isinstance(data, dict) else None
    if isinstance(repo, dict) and "name" in repo:
        name = repo["name"]
        if not isinstance(name, str) or not is_hub_id(name):
            return f"repo.name: not a Hub repo id (org/name): {json.dumps(name)[:120]}"
    shas = [("repo.headSha", repo.get("headSha"))] if isinstance(repo, dict) else []
    refs = data.get("updatedRefs") if isinstance(data, dict) else None
    for i, ref in enumerate(refs if isinstance(refs, list) else ()):
        if isinstance(ref, dict):
            shas.append((f"updatedRefs.{i}.newSha", ref.get("newSha")))
    for where, sha in shas:
        if sha is not None and not (isinstance(sha, str) and _COMMIT.fullmatch(sha)):
            return f"{where}: not a commit id (40 hex digits): {json.dumps(sha)[:120]}"
    return None


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
            stop_every_gate()  # what the grace did not see end gives up its Hub requests now
            journal.close()

    app = App(title="eosfix", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.bot = bot
    app.state.guard = guard = Guard(config, bot.metrics)
    try:
        attach_page(app, config)  # the page (its session middleware, when sign-in is on)
    except BaseException:
        journal.close()
        raise
    app.add_middleware(BoundedBody, guard=guard)  # added last: the outermost, before any read

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        bot.metrics["events"] += 1
        given = request.headers.get("x-webhook-secret", "").encode()
        if not hmac.compare_digest(given, config.secret.encode()):
            bot.metrics["rejected"] += 1
            return _error(401, "missing or wrong X-Webhook-Secret")
        body = await request.body()
        if nested_over(body):
            bot.metrics["rejected"] += 1
            return _error(400, f"not a Hub webhook payload: nested over {MAX_JSON_DEPTH} levels")
        try:
            data = json.loads(body)
        except ValueError:  # not JSON (or not UTF-8): the payload model says where
            data = None
        problem = names_problem(data)
        if problem is not None:
            bot.metrics["rejected"] += 1
            return _error(400, f"not a Hub webhook payload: {problem}")
        try:
            payload = WebhookPayload.model_validate_json(body)
        except ValidationError as exc:
            bot.metrics["rejected"] += 1
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return _error(400, f"not a Hub webhook payload: {where}: {first['msg']}")
        head = data["repo"].get("headSha") if isinstance(data.get("repo"), dict) else None
        push, reason = classify(payload, config, head)
        if push is None:
            bot.metrics["ignored"] += 1
            return JSONResponse({"status": "ignored", "reason": reason})
        if not is_hub_id(push.repo) or not _COMMIT.fullmatch(push.sha):  # the model read
            bot.metrics["rejected"] += 1  # other values than json.loads (duplicate keys)
            return _error(400, "not a Hub webhook payload: repo.name or commit id")
        done = journal.handled(push.repo, push.sha)
        if done is not None:
            bot.metrics["redelivered"] += 1
            reason = f"{push.repo} at {push.sha} was handled already ({done.outcome})"
            return JSONResponse({"status": "ignored", "reason": reason})
        if bot.waiting(push.repo) == push.sha:  # a redelivery of a push still queued
            bot.metrics["redelivered"] += 1
        else:
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
