"""The page: a person checks a Hub repo (or the small files of a private model), sees where it
stops in each runtime, and opens the fix PR as themselves. One module: every route shares the
page's templates, sign-in, headers and limits set up in ``attach_page``. Routes of the same app as the bot
(``eosfix.serve.app``), under the same limits (``eosfix.serve.limits``: body bound, request
deadline, connection cap), server-rendered from Jinja2 templates; a single check works
without JavaScript.

- ``GET /``: the forms. ``GET /check?repo=org/name``: one check of a public Hub repo, named
  in any spelling ``eosfix check`` takes of one (``eosfix.targets.parse`` with
  ``local=False``: a repo id, ``hf.co/org/name:QUANT``, a huggingface.co URL; never a path,
  never another site: the configured Hub is the only host ever asked), read without the bot's token (an
  anonymous visitor never sees a private repo through the bot), or with the signed-in user's
  own token. A GGUF repo is checked by its files' headers: one result per group of alike
  files, shown without a PR button (a PR cannot change a header).
- ``POST /check/files``: the small files of a model (``FILES``), each under ``FILE_CAP``
  bytes, checked in a temporary folder deleted before the answer is sent.
- ``POST /pr``: signed in with Hugging Face (huggingface_hub's ``attach_huggingface_oauth``;
  its mocked routes when ``page_mock_sign_in`` is set for local tests), with the session's
  CSRF token: the fix PR made with the user's token through the same code as ``eosfix hub
  --pr`` (an open eosfix PR is updated, never doubled). The token stays in the signed session
  cookie, never in a page, a log line or the journal.
- ``GET /audit?author=org``: an audit of a user or organisation (``eosfix.serve.audit``).
- ``GET /codes``: every finding code and its title (the result's code links point here).

Every check takes a slot of ``page_workers`` (more wait; 503 once 32 times that many wait) and a
token of the client's ``page_rate`` per minute (429 with ``Retry-After`` otherwise). Every
answer carries a strict Content-Security-Policy (no inline script or style, nothing from
another origin) and ``nosniff``; every text from a repo is escaped by the templates.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import os
import secrets
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from python_multipart.exceptions import FormParserError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from eosfix import pipeline
from eosfix.core.codes import CODES
from eosfix.core.errors import NotChecked
from eosfix.core.hubid import is_hub_id
from eosfix.render.gguf_hub import is_hub_gguf
from eosfix.render.pr import pr_description
from eosfix.result import RepoResult
from eosfix.serve import view as views
from eosfix.serve.audit import Audits
from eosfix.serve.config import ServeConfig, ServeConfigError
from eosfix.serve.limits import Busy, Limiter, RateLimited, Slots
from eosfix.sources.hub.http import hub_errors
from eosfix.sources.hub.read import HubError
from eosfix.sources.hub.write import PrOutcome, PullRequest, find_open_pr
from eosfix.targets.checked import Checked
from eosfix.targets.hub import check_hub_target
from eosfix.targets.parse import HubTarget, parse_hub
from eosfix.targets.pr import fix_bytes
from eosfix.targets.session import HubSession

log = logging.getLogger("eosfix.serve.page")
T = TypeVar("T")

# What a dropped-files check reads (tokenizer.json and weights are too big for a form).
FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
)
FILE_CAP = 512 * 1024  # bytes per file; the body bound (max_body) caps the whole form

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'self' https://huggingface.co"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
STATIC = {"page.css": "text/css", "page.js": "text/javascript"}


@dataclass
class User:
    name: str
    token: str


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("eosfix.serve", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def sign_in_mode(config: ServeConfig, env: dict[str, str] | None = None) -> str | None:
    """``space`` (real Hugging Face OAuth, on a Space with ``hf_oauth: true``), ``mock``
    (huggingface_hub's mocked routes: the local token's user), or None (no sign-in)."""
    env = dict(os.environ) if env is None else env
    if env.get("SPACE_ID") and env.get("OAUTH_CLIENT_ID"):
        return "space"
    if config.page_mock_sign_in:
        return "mock"
    return None


def attach_page(app: FastAPI, config: ServeConfig) -> None:
    """Add the page's routes (and, when sign-in is on, huggingface_hub's OAuth routes and
    their session) to ``app``."""
    templates = _environment()
    limiter = Limiter(config.page_rate)
    slots = Slots(config.page_workers)
    mode = sign_in_mode(config)
    if mode is not None:
        from huggingface_hub import attach_huggingface_oauth

        with warnings.catch_warnings():  # the mocked routes warn that they are mocked
            warnings.simplefilter("ignore")
            try:
                attach_huggingface_oauth(app)
            except (ValueError, KeyError, OSError) as exc:  # mocked: no token, no user
                raise ServeConfigError(f"sign-in ({mode}): {exc}") from None
        if mode == "mock":  # local tests over plain http: the cookie cannot be Secure there
            for m in app.user_middleware:
                if getattr(m.cls, "__name__", "") == "SessionMiddleware":
                    m.kwargs.update(https_only=False, same_site="lax")
    app.state.page = {"limiter": limiter, "slots": slots, "sign_in": mode}

    app.add_middleware(LocalTargets)  # pure ASGI: the body bound's exceptions pass through

    def user_of(request: Request) -> User | None:
        if mode is None:
            return None
        from huggingface_hub import parse_huggingface_oauth

        info = parse_huggingface_oauth(request)
        if info is None or not info.access_token:
            return None
        return User(info.user_info.preferred_username, info.access_token)

    def csrf(request: Request) -> str | None:
        if mode is None:
            return None
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = request.session["csrf"] = secrets.token_urlsafe(32)
        return token

    def client(request: Request) -> str:
        if os.environ.get("SPACE_ID"):  # behind the Space's proxy: the first forwarded hop
            forwarded = request.headers.get("x-forwarded-for", "")
            if forwarded:
                return forwarded.split(",")[0].strip()
        return request.client.host if request.client else "?"

    def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        user = user_of(request)
        body = templates.get_template(name).render(
            user=user.name if user else None,
            sign_in=mode is not None,
            csrf=csrf(request) if user else None,
            login=f"/oauth/huggingface/login?_target_url={_target(request)}",
            **context,
        )
        return HTMLResponse(body, status_code=status, headers=HEADERS)

    def problem(request: Request, status: int, message: str, **extra: Any) -> HTMLResponse:
        response = page(request, "problem.html", status, message=message)
        response.headers.update(extra)
        return response

    async def guarded(request: Request, work: Callable[[], T]) -> T | HTMLResponse:
        try:
            limiter.take(client(request))
            return await slots.run(work)
        except RateLimited as exc:
            return problem(
                request,
                429,
                f"Too many checks from you: try again in {exc.retry_after} s.",
                **{"Retry-After": str(exc.retry_after)},
            )
        except Busy:
            return problem(
                request, 503, "The page is busy: try again in a moment.", **{"Retry-After": "5"}
            )

    audits = Audits()
    app.state.page["audits"] = audits

    @app.get("/audit", response_class=HTMLResponse)
    async def audit_start(request: Request, author: str = "") -> Response:
        author = author.strip()
        if not is_hub_id(f"{author}/x"):
            return problem(request, 400, f"Not a Hub user or organisation: {author[:120]}")
        try:
            limiter.take(client(request))
        except RateLimited as exc:
            return problem(
                request,
                429,
                f"Too many checks from you: try again in {exc.retry_after} s.",
                **{"Retry-After": str(exc.retry_after)},
            )
        audit = audits.start(author)
        if audit is None:
            return problem(
                request,
                503,
                "Audits are running already: try again in a minute.",
                **{"Retry-After": "60"},
            )
        return RedirectResponse(f"/audit/{audit.id}", status_code=303, headers=HEADERS)

    @app.get("/audit/{audit_id}", response_class=HTMLResponse)
    async def audit_page(request: Request, audit_id: str) -> HTMLResponse:
        audit = audits.audits.get(audit_id)
        if audit is None:
            return problem(request, 404, "No such audit (audits are kept a while only).")
        return page(request, "audit.html", audit=audit, chart=audit.chart())

    @app.get("/audit/{audit_id}/progress")
    async def audit_progress(audit_id: str) -> Response:
        audit = audits.audits.get(audit_id)
        if audit is None:
            return JSONResponse({"error": "no such audit"}, status_code=404, headers=HEADERS)
        return JSONResponse(audit.progress(), headers=HEADERS)

    @app.get("/audit/{audit_id}/{kind}")
    async def audit_download(audit_id: str, kind: str) -> Response:
        audit = audits.audits.get(audit_id)
        if audit is None or not audit.finished or kind not in ("csv", "json"):
            return PlainTextResponse("not found", status_code=404, headers=HEADERS)
        body, media = (audit.csv, "text/csv") if kind == "csv" else (audit.json, "application/json")
        name = f"eosfix-{audit.author}.{kind}"
        headers = {**HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
        return Response(body, media_type=media, headers=headers)

    @app.get("/", response_class=HTMLResponse)
    async def index(request: Request) -> HTMLResponse:
        return page(request, "index.html", files=FILES, file_cap=FILE_CAP)

    @app.get("/codes", response_class=HTMLResponse)
    async def codes(request: Request) -> HTMLResponse:
        return page(request, "codes.html", codes=list(CODES.values()))

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:
            return PlainTextResponse("not found", status_code=404, headers=HEADERS)
        data = resources.files("eosfix.serve").joinpath("static", name).read_bytes()
        headers = {**HEADERS, "Cache-Control": "public, max-age=3600"}
        return Response(data, media_type=STATIC[name], headers=headers)

    @app.get("/check", response_class=HTMLResponse)
    async def check(request: Request, repo: str = "") -> HTMLResponse:
        try:
            target = parse_hub(repo[:2000])  # the Hub only: never the server's files
        except NotChecked as exc:
            shown = (exc.path or "")[:120]
            return problem(request, 400, f"{shown}: not checked: {exc.message}")
        user = user_of(request)
        # a visitor reads public repos only: never the bot's token (HF_TOKEN on a Space)
        session = HubSession(token=user.token if user else False)
        done = await guarded(request, lambda: _check_with_pr(session, target))
        if isinstance(done, HTMLResponse):
            return done
        checked, prs = done
        shown_views = [_view(r, pr, hub=True) for r, pr in zip(checked.results, prs, strict=True)]
        notes = list(checked.lines)
        return page(request, "result.html", views=shown_views, notes=notes, message=None)

    @app.post("/check/files", response_class=HTMLResponse)
    async def check_files(request: Request) -> HTMLResponse:
        try:
            given = await _read_files(request)
        except _Refused as exc:
            return problem(request, exc.status, exc.message)
        if not given:
            return problem(request, 400, "No file given: choose the model's small files.")
        done = await guarded(request, lambda: _check_files(given))
        if isinstance(done, HTMLResponse):
            return done
        return page(
            request, "result.html", views=[_view(done, None, hub=False)], notes=[], message=None
        )

    @app.post("/pr", response_class=HTMLResponse)
    async def open_pull_request(request: Request) -> HTMLResponse:
        user = user_of(request)
        if user is None:
            return problem(request, 403, "Sign in with Hugging Face to open a pull request.")
        async with request.form(max_files=0, max_fields=4) as form:
            given, repo = form.get("csrf"), str(form.get("repo") or "")
        expected = request.session.get("csrf")
        if not (
            isinstance(expected, str)
            and isinstance(given, str)
            and hmac.compare_digest(expected.encode(), given.encode())
        ):
            return problem(request, 403, "The form expired (CSRF token): check the repo again.")
        if not is_hub_id(repo):
            return problem(request, 400, f"Not a Hub repo id (org/name): {repo[:120]}")
        session = HubSession(token=user.token, describe=pr_description)
        done = await guarded(request, lambda: _open(session, repo))
        if isinstance(done, HTMLResponse):
            return done
        result, pr, message = done
        log.info(
            "pull request", extra={"fields": {"repo": repo, "user": user.name, "outcome": message}}
        )
        return page(
            request, "result.html", views=[_view(result, pr, hub=True)], notes=[], message=message
        )


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


async def _read_files(request: Request) -> dict[str, bytes]:
    """The form's files by name (each one of ``FILES``, under ``FILE_CAP``); the form's
    spooled copies are closed (deleted) before this returns. A body that is not a form of
    files is a 400: starlette before 0.40 lets python-multipart's parse error through (it was
    a 500 with the declared floor, 0.36), later ones raise their own 400 (HTTPException)."""
    given: dict[str, bytes] = {}
    try:
        async with request.form(max_files=len(FILES), max_fields=4) as form:
            for item in form.getlist("files"):
                if not isinstance(item, UploadFile):
                    continue
                name = item.filename or ""
                if not name and not item.size:
                    continue  # the form sent with no file chosen
                if name not in FILES:
                    shown = name[:120] or "(no name)"
                    raise _Refused(
                        400, f"{shown}: not one of the files a check reads ({', '.join(FILES)})"
                    )
                data = await item.read(FILE_CAP + 1)
                if len(data) > FILE_CAP:
                    raise _Refused(413, f"{name}: larger than {FILE_CAP // 1024} KiB")
                given[name] = data
    except (MultiPartException, FormParserError, HTTPException) as exc:
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        raise _Refused(status, "The form could not be read: not a form of files.") from exc
    return given


class LocalTargets:
    """huggingface_hub's sign-in routes redirect to ``_target_url`` as given: only a path of
    this page is let through (400 otherwise: no open redirect to another site)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/oauth/"):
            request = Request(scope)
            target = request.query_params.get("_target_url")
            if target is not None and not _local(target, request.url.netloc):
                refusal = PlainTextResponse(
                    "_target_url: not a path of this page", 400, headers=HEADERS
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _local(target: str, host: str) -> bool:
    """A path of this site (``/...``, not ``//host`` or another site's URL), or the sign-in
    callback's own URL on this host (which the mocked login passes on) leading to one."""
    parts = urlsplit(target)
    if not parts.scheme and not parts.netloc:
        return target.startswith("/") and not target.startswith("//") and "\\" not in target
    if parts.netloc != host or not parts.path.startswith("/oauth/huggingface/callback"):
        return False
    return _local(dict(parse_qsl(parts.query)).get("_target_url", "/"), host)


def _target(request: Request) -> str:
    from urllib.parse import quote

    path = request.url.path if request.method == "GET" else "/"
    query = f"?{request.url.query}" if request.url.query and request.method == "GET" else ""
    return quote(path + query, safe="")


def _pr_dict(pr: PullRequest | None) -> dict[str, Any] | None:
    if pr is None:
        return None
    return {"url": pr.url, "num": pr.num, "words": pr.outcome.value, "left": pr.left}


def _view(result: RepoResult, pr: PullRequest | None, *, hub: bool) -> views.View:
    v = views.build(result, hub=hub)
    v.pr = _pr_dict(pr)
    return v


def _check_with_pr(
    session: HubSession, target: HubTarget
) -> tuple[Checked, list[PullRequest | None]]:
    """The check (one result, or one per group of alike GGUF files), and the repo's open
    eosfix PR for a result whose fix is a generation_config.json (the page opens no PR for a
    GGUF file: its header is no PR's to change)."""
    checked = check_hub_target(target, reader=session.reader)
    prs: list[PullRequest | None] = []
    for result in checked.results:
        new = None if result.error is not None or is_hub_gguf(result) else fix_bytes(result)
        pr = None
        if new is not None:
            try:
                pr = find_open_pr(session.api, session.reader, target.repo_id, new)
            except hub_errors():
                pr = None  # the PR list is a courtesy: the check stands without it
        prs.append(pr)
    return checked, prs


def _check_files(given: dict[str, bytes]) -> RepoResult:
    with tempfile.TemporaryDirectory(prefix="eosfix-page-") as folder:
        for name, data in given.items():
            (Path(folder) / name).write_bytes(data)
        result = pipeline.check_folder(Path(folder), label="your files")
        error = result.error
        if error is not None and error.path is not None:  # name the file, not the folder
            inside = Path(error.path)
            named = inside.name if inside.parent == Path(folder) else "your files"
            result = dataclasses.replace(result, error=error.but(path=named))
    return result


def _open(session: HubSession, repo: str) -> tuple[RepoResult, PullRequest | None, str]:
    result = session.check(repo)
    if result.error is not None:
        return result, None, "The check failed: no pull request."
    try:
        pr = session.open_pr(result)
    except HubError as exc:
        return result, None, f"The Hub refused the pull request: {exc.message}"
    if pr is None:
        return result, None, "Nothing to fix: no pull request."
    words = {
        PrOutcome.OPENED: "Pull request opened.",
        PrOutcome.UPDATED: "The open eosfix pull request was updated with the fix.",
        PrOutcome.UNCHANGED: "An eosfix pull request with this fix is already open.",
    }.get(pr.outcome, f"The open eosfix pull request was left as it is: {pr.left}")
    return result, pr, words
