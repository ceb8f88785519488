"""The page: a person checks a Hub repo (or the small files of a private model), sees where it
stops in each runtime, and opens the fix PR as themselves. One module: its routes share the
dependencies and the one problem page below. Routes of the same app as the bot
(``eosfix.serve.app``), as one FastAPI ``APIRouter`` (``router``), under the same limits
(``eosfix.serve.limits``: body bound, request deadline, connection cap) and headers
(``eosfix.serve.headers``), server-rendered from Jinja2 templates; a single check works
without JavaScript.

- ``GET /``: the forms. ``GET /check?repo=org/name``: one check of a public Hub repo, named
  in any spelling ``eosfix check`` takes of one (``eosfix.targets.parse.parse_hub``: a repo
  id, ``org/name:QUANT``, a huggingface.co URL; never a path, never another site: the
  configured Hub is the only host ever asked), read without the bot's token (an
  anonymous visitor never sees a private repo through the bot), or with the signed-in user's
  own token. A GGUF repo is checked by its files' headers: one result per group of alike
  files, shown without a PR button (a PR cannot change a header).
- ``POST /check/files``: the small files of a model (``FILES``), each under ``FILE_CAP``
  bytes, checked in a temporary folder deleted before the answer is sent.
- ``POST /pr``: signed in with Hugging Face (huggingface_hub's ``attach_huggingface_oauth``;
  its mocked routes when ``page_mock_sign_in`` is set for local tests, served on the
  loopback only), with the session's CSRF token: the fix PR made with the user's token
  through the same code as ``eosfix hub --pr`` (an open eosfix PR is updated, never
  doubled). The session is held by the server (``eosfix.serve.sessions``): the cookie is an
  opaque id, and the token is never in a cookie, a page, a log line or the journal.
- ``GET /audit?author=org``: an audit of a user or organisation (``eosfix.serve.audit``).
- ``GET /codes``: every finding code and its title (the result's code links point here).

What a route needs comes from dependencies: the signed-in user (``signed_in``,
``signed_in_user``: 403 without one), the CSRF-checked form of ``POST /pr`` (``pr_repo``) and
a token of the client's ``page_rate`` per minute (``rate_limit``). Every check takes a slot of
``page_workers`` (more wait; 503 once 32 times that many wait). A refusal is an exception
(``Problem``, the limiter's ``RateLimited``, the slots' ``Busy``) turned into the problem page
in one place (``_refused``: 429 and 503 with ``Retry-After``). Every text from a repo is
escaped by the templates.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlsplit

import anyio
import jinja2
from fastapi import APIRouter, Depends, FastAPI, Request
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
from eosfix.core.repo import READ_FILES, TEMPLATE_DIR
from eosfix.render.pr import pr_description
from eosfix.render.rows import repo_rows
from eosfix.render.words import STOP_ID_TEXT
from eosfix.result import RepoResult
from eosfix.serve import view as views_
from eosfix.serve.audit import Audits
from eosfix.serve.config import ServeConfig, ServeConfigError
from eosfix.serve.headers import CSP
from eosfix.serve.limits import Busy, Limiter, RateLimited, Slots
from eosfix.serve.sessions import keep_sessions_here
from eosfix.sources.hub import bounds
from eosfix.sources.hub.http import GATED_REPO, describe_error, hub_errors
from eosfix.sources.hub.read import HubError
from eosfix.sources.hub.write import PrOutcome, PullRequest, find_open_pr
from eosfix.targets.checked import Checked
from eosfix.targets.hub import check_hub_target
from eosfix.targets.parse import HubTarget, parse_hub
from eosfix.targets.pr import fix_of, pr_carrier
from eosfix.targets.session import HubSession

__all__ = ["CSP", "FILES", "FILE_CAP", "MAX_FILES", "attach_page", "router", "sign_in_mode"]

log = logging.getLogger("eosfix.serve.page")
router = APIRouter()

# A dropped-files check takes every file a check reads (``eosfix.core.repo.READ_FILES``, and
# ``additional_chat_templates/NAME.jinja`` from a dropped folder), each under the Hub reader's
# cap for it (``eosfix.sources.hub.bounds``: tokenizer.json's 64 MiB); it ignores any other
# file and says which. The whole form is bounded (``page_files_bytes``), and so is its number
# of files (``MAX_FILES``, the ignored ones too).
FILES = tuple(sorted(READ_FILES))
MAX_FILES = 32
FILE_CAP = bounds.FILE.bytes  # a config file's; tokenizer.json's is bounds.TOKENIZER
# A person waits for a check: a 429 asking for more than this fails it ("rate limited")
# rather than holding a check slot through a quota window.
PAGE_LONGEST_WAIT = 30.0
STATIC = {"page.css": "text/css", "page.js": "text/javascript"}


@dataclass
class User:
    name: str
    token: str


@dataclass
class PageState:
    """What the routes share (``app.state.page``)."""

    templates: jinja2.Environment
    limiter: Limiter
    slots: Slots
    sign_in: str | None  # ``sign_in_mode``
    audits: Audits


class Problem(Exception):
    """A request the page refuses: the problem page with ``status`` and one line."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.message = message
        self.headers = headers or {}


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
    """Add the page's routes (and, when sign-in is on, huggingface_hub's OAuth routes with a
    session held by the server) to ``app``."""
    mode = sign_in_mode(config)
    if mode is not None:
        _attach_sign_in(app, mode)
    limiter, slots = Limiter(config.page_rate), Slots(config.page_workers)
    app.state.page = PageState(_environment(), limiter, slots, mode, Audits())
    app.state.guard.uploads["/check/files"] = config.page_files_bytes
    app.add_middleware(LocalTargets)  # pure ASGI: the body bound's exceptions pass through
    app.include_router(router)
    for refusal in (Problem, RateLimited, Busy):
        app.add_exception_handler(refusal, _refused)


def _attach_sign_in(app: FastAPI, mode: str) -> None:
    """huggingface_hub's sign-in routes, their cookie session replaced by one the server
    holds. Mocked sign-in signs anyone who reaches the page in as the server's ``HF_TOKEN``:
    the app may then listen on the loopback only (``eosfix.serve.limits.server``)."""
    from huggingface_hub import attach_huggingface_oauth

    with warnings.catch_warnings():  # the mocked routes warn that they are mocked
        warnings.simplefilter("ignore")
        try:
            attach_huggingface_oauth(app)
        except (ValueError, KeyError, OSError) as exc:  # mocked: no token, no user
            raise ServeConfigError(f"sign-in ({mode}): {exc}") from None
        except hub_errors() as exc:  # mocked: the token's user cannot be asked
            raise ServeConfigError(f"sign-in ({mode}): {describe_error(exc)[0]}") from None
    # On a Space the page is framed by huggingface.co: its cookie must be SameSite=None
    # (and so Secure); mocked sign-in runs over plain http on this machine.
    space = mode == "space"
    same_site = "none" if space else "lax"
    if not keep_sessions_here(app.user_middleware, https_only=space, same_site=same_site):
        raise ServeConfigError(f"sign-in ({mode}): huggingface_hub added no session to replace")
    if mode == "mock":
        app.state.loopback_only = "mock sign-in (EOSFIX_PAGE_MOCK_SIGN_IN)"


# --- dependencies ---------------------------------------------------------------------------


def page_state(request: Request) -> PageState:
    state: PageState = request.app.state.page
    return state


State = Annotated[PageState, Depends(page_state)]


def signed_in(request: Request) -> User | None:
    """The visitor signed in with Hugging Face, with their token, or None."""
    if page_state(request).sign_in is None:
        return None
    from huggingface_hub import parse_huggingface_oauth

    info = parse_huggingface_oauth(request)
    if info is None or not info.access_token:
        return None
    return User(info.user_info.preferred_username, info.access_token)


SignedIn = Annotated[User | None, Depends(signed_in)]


def signed_in_user(user: SignedIn) -> User:
    if user is None:
        raise Problem(403, "Sign in with Hugging Face to open a pull request.")
    return user


def csrf_token(request: Request) -> str | None:
    """The session's CSRF token (made on first use), for the forms of a signed-in page."""
    if page_state(request).sign_in is None:
        return None
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return token


async def pr_repo(request: Request, user: Annotated[User, Depends(signed_in_user)]) -> str:
    """The repo id of ``POST /pr``'s form, once its CSRF token is the session's (compared in
    constant time): 403 otherwise, 400 for a repo id outside the Hub's grammar."""
    async with request.form(max_files=0, max_fields=4) as form:
        given, repo = form.get("csrf"), str(form.get("repo") or "")
    expected = request.session.get("csrf")
    if not (
        isinstance(expected, str)
        and isinstance(given, str)
        and hmac.compare_digest(expected.encode(), given.encode())
    ):
        raise Problem(403, "The form expired (CSRF token): check the repo again.")
    if not is_hub_id(repo):
        raise Problem(400, f"Not a Hub repo id (org/name): {repo[:120]}")
    return repo


def client_address(request: Request) -> str:
    """Whom the rate is counted for. On a Space every request comes through the platform's
    proxy, which appends the address it was reached from to ``X-Forwarded-For``: the last
    hop is the one a client cannot choose (anything before it, the client may have sent)."""
    if os.environ.get("SPACE_ID"):
        hops = ",".join(request.headers.getlist("x-forwarded-for")).split(",")
        if hops[-1].strip():
            return hops[-1].strip()
    return request.client.host if request.client else "?"


def rate_limit(request: Request, state: State) -> None:
    """One of the client's ``page_rate`` checks a minute (``RateLimited``: 429)."""
    state.limiter.take(client_address(request))


RateLimit = Annotated[None, Depends(rate_limit)]


def check_target(repo: str = "") -> HubTarget:
    """What the box names, in any spelling ``eosfix check`` takes of a Hub repo
    (``eosfix.targets.parse``, the filesystem never read); a refusal is check's line."""
    try:
        return parse_hub(repo[:2000])  # the Hub only: never the server's files
    except NotChecked as exc:
        shown = (exc.path or "")[:120]
        raise Problem(400, f"{shown}: not checked: {exc.message}") from None


def audit_author(author: str = "") -> str:
    author = author.strip()
    if not is_hub_id(f"{author}/x"):
        raise Problem(400, f"Not a Hub user or organisation: {author[:120]}")
    return author


def _place(filename: str) -> str | None:
    """Where a chosen file goes in the model's folder: a file a check reads, by its name (a
    dropped folder's files come with their path in it), or an additional chat template; None
    for any other file."""
    parts = [p for p in filename.replace("\\", "/").split("/") if p]
    if not parts:
        return None
    name = parts[-1]
    if name in READ_FILES:
        return name
    in_dir = len(parts) > 1 and parts[-2] == TEMPLATE_DIR
    if in_dir and name.endswith(".jinja") and len(name) <= 200 and name.isprintable():
        return f"{TEMPLATE_DIR}/{name}"
    return None


@dataclass
class Dropped:
    """A model's files, written into ``folder`` (deleted once checked), and the names of the
    files chosen that no check reads (``ignored``)."""

    folder: Path
    ignored: list[str]

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


async def _copy(item: UploadFile, to: Path, name: str) -> None:
    """``item`` into ``to``, a chunk at a time, under the Hub reader's cap for ``name``."""
    cap, written = bounds.file_cap(name).bytes, 0
    async with await anyio.open_file(to, "wb") as out:
        while chunk := await item.read(bounds.MiB):
            written += len(chunk)
            if written > cap:
                raise Problem(413, f"{name}: larger than {cap // bounds.MiB} MiB")
            await out.write(chunk)


async def dropped_files(request: Request) -> AsyncIterator[Dropped]:
    """The form's files in a folder of their own: each file a check reads (``_place``) under
    its cap, the others named as ignored; the folder is deleted when the request is done (and
    by the route once checked), the form's spooled copies before this yields. A body that is
    not a form of files is a 400: starlette before 0.40 lets python-multipart's parse error
    through (it was a 500 with the declared floor, 0.36), later ones raise their own 400
    (HTTPException); more than ``MAX_FILES`` files too."""
    dropped = Dropped(Path(tempfile.mkdtemp(prefix="eosfix-page-")), [])
    try:
        async with request.form(max_files=MAX_FILES, max_fields=4) as form:
            for item in form.getlist("files"):
                if not isinstance(item, UploadFile):
                    continue
                name = item.filename or ""
                if not name and not item.size:
                    continue  # the form sent with no file chosen
                place = _place(name)
                to = dropped.folder / place if place is not None else None
                if to is None or to.exists():  # not read by a check, or given twice
                    dropped.ignored.append(name[:120] or "(no name)")
                    continue
                to.parent.mkdir(exist_ok=True)
                await _copy(item, to, place or "")
        if not any(dropped.folder.iterdir()):
            if dropped.ignored:
                raise Problem(
                    400, f"No file a check reads ({', '.join(FILES)}); ignored: "
                    f"{', '.join(dropped.ignored)}"
                )  # fmt: skip
            raise Problem(400, "No file given: choose the model's small files.")
    except (MultiPartException, FormParserError, HTTPException) as exc:
        dropped.remove()
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        raise Problem(status, "The form could not be read: not a form of files.") from exc
    except BaseException:
        dropped.remove()
        raise
    try:
        yield dropped
    finally:
        dropped.remove()


# --- answers --------------------------------------------------------------------------------


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template ``name`` with the page's header (who is signed in, the sign-in link) and
    the words of each kind of stop id."""
    state = page_state(request)
    user = signed_in(request)
    template = state.templates.get_template(name)
    scope = template.new_context(
        {
            "stop_words": STOP_ID_TEXT,
            "user": user.name if user else None,
            "sign_in": state.sign_in is not None,
            "csrf": csrf_token(request) if user else None,
            "login": f"/oauth/huggingface/login?_target_url={_target(request)}",
            **context,
        }
    )
    try:  # what Template.render does, then the context emptied: the template's macros keep
        # it in a reference cycle, and it holds the views down to a check's GGUF vocabulary,
        # which must go now, not at the collector's next full pass
        body = template.environment.concat(template.root_render_func(scope))
    finally:
        scope.vars.clear()
        scope.parent.clear()
    return HTMLResponse(body, status_code=status)


async def _refused(request: Request, exc: Exception) -> HTMLResponse:
    """The one place a refusal becomes the problem page (429 and 503 say when to retry)."""
    if isinstance(exc, RateLimited):
        wait = str(exc.retry_after)
        exc = Problem(
            429, f"Too many checks from you: try again in {wait} s.", {"Retry-After": wait}
        )
    elif isinstance(exc, Busy):
        exc = Problem(503, "The page is busy: try again in a moment.", {"Retry-After": "5"})
    assert isinstance(exc, Problem)
    response = render(request, "problem.html", exc.status, message=exc.message)
    response.headers.update(exc.headers)
    return response


# --- routes ---------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
async def index(request: Request) -> HTMLResponse:
    return render(request, "index.html", files=FILES, templates=TEMPLATE_DIR)


@router.get("/codes", response_class=HTMLResponse)
async def codes(request: Request) -> HTMLResponse:
    return render(request, "codes.html", codes=list(CODES.values()))


@router.get("/static/{name}")
async def static(name: str) -> Response:
    if name not in STATIC:
        return PlainTextResponse("not found", status_code=404)
    data = resources.files("eosfix.serve").joinpath("static", name).read_bytes()
    return Response(
        data, media_type=STATIC[name], headers={"Cache-Control": "public, max-age=3600"}
    )


@router.get("/check", response_class=HTMLResponse)
async def check(
    request: Request,
    target: Annotated[HubTarget, Depends(check_target)],
    user: SignedIn,
    state: State,
    _: RateLimit,
) -> HTMLResponse:
    # a visitor reads public repos only: never the bot's token (HF_TOKEN on a Space)
    session = HubSession(token=user.token if user else False, longest=PAGE_LONGEST_WAIT)
    checked, pr = await state.slots.run(lambda: _check_with_pr(session, target))
    return _result_page(request, checked, pr, None)


@router.post("/check/files", response_class=HTMLResponse)
async def check_files(
    request: Request,
    _: RateLimit,
    state: State,
    dropped: Annotated[Dropped, Depends(dropped_files)],
) -> HTMLResponse:
    try:
        result = await state.slots.run(lambda: _check_files(dropped.folder))
    finally:
        dropped.remove()  # gone before the answer is sent
    rows = repo_rows(result._replace(path=Path(".")))
    views = [views_.build(rows, name=result.name, hub=False)]
    notes = (
        [f"Ignored (no check reads them): {', '.join(dropped.ignored)}"] if dropped.ignored else []
    )
    return render(request, "result.html", views=views, notes=notes, message=None)


@router.post("/pr", response_class=HTMLResponse)
async def open_pull_request(
    request: Request,
    user: Annotated[User, Depends(signed_in_user)],
    repo: Annotated[str, Depends(pr_repo)],
    state: State,
    _: RateLimit,
) -> HTMLResponse:
    session = HubSession(token=user.token, describe=pr_description, longest=PAGE_LONGEST_WAIT)
    checked, pr, message = await state.slots.run(lambda: _open(session, repo))
    log.info(
        "pull request", extra={"fields": {"repo": repo, "user": user.name, "outcome": message}}
    )
    return _result_page(request, checked, pr, message)


@router.get("/audit", response_class=HTMLResponse)
async def audit_start(
    author: Annotated[str, Depends(audit_author)], state: State, _: RateLimit
) -> Response:
    audit = state.audits.start(author)
    if audit is None:
        message = "Audits are running already: try again in a minute."
        raise Problem(503, message, {"Retry-After": "60"})
    return RedirectResponse(f"/audit/{audit.id}", status_code=303)


@router.get("/audit/{audit_id}", response_class=HTMLResponse)
async def audit_page(request: Request, audit_id: str, state: State) -> HTMLResponse:
    audit = state.audits.audits.get(audit_id)
    if audit is None:
        raise Problem(404, "No such audit (audits are kept a while only).")
    status = 404 if audit.empty else 200  # no model repo under that author: nothing found
    return render(
        request, "audit.html", status, audit=audit, chart=audit.chart(), tones=views_.TONES
    )


@router.get("/audit/{audit_id}/progress")
async def audit_progress(audit_id: str, state: State) -> Response:
    audit = state.audits.audits.get(audit_id)
    if audit is None:
        return JSONResponse({"error": "no such audit"}, status_code=404)
    return JSONResponse(audit.progress())


@router.get("/audit/{audit_id}/{kind}")
async def audit_download(audit_id: str, kind: str, state: State) -> Response:
    audit = state.audits.audits.get(audit_id)
    if audit is None or not audit.finished or kind not in ("csv", "json"):
        return PlainTextResponse("not found", status_code=404)
    body, media = (audit.csv, "text/csv") if kind == "csv" else (audit.json, "application/json")
    disposition = f'attachment; filename="eosfix-{audit.author}.{kind}"'
    return Response(body, media_type=media, headers={"Content-Disposition": disposition})


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
                refusal = PlainTextResponse("_target_url: not a path of this page", 400)
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
    path = request.url.path if request.method == "GET" else "/"
    query = f"?{request.url.query}" if request.url.query and request.method == "GET" else ""
    return quote(path + query, safe="")


def _pr_dict(pr: PullRequest | None) -> dict[str, Any] | None:
    if pr is None:
        return None
    return {"url": pr.url, "num": pr.num, "words": pr.outcome.value, "left": pr.left}


def http_status(checked: Checked) -> int:
    """A target the Hub could not give: 404 when it names no repo the visitor can read
    (the Hub answers 401 for a private one as for a missing one), 403 for a gated one, 502
    when the Hub failed or could not be reached; else 200 (the check is the answer, a file
    that cannot be read included)."""
    if len(checked.results) != 1 or not isinstance(checked.results[0].error, HubError):
        return 200
    error = checked.results[0].error
    if error.message.startswith(GATED_REPO):
        return 403
    if error.status in (401, 404):
        return 404
    if error.status == 400:
        return 400
    return 502 if error.status is None or error.status >= 429 else 200


def _result_page(
    request: Request, checked: Checked, pr: PullRequest | None, message: str | None
) -> HTMLResponse:
    """Every result of a Hub target, the one whose fix the repo's pull request carries
    marked, with the open eosfix pull request."""
    carrier = pr_carrier(checked.results)
    shown = []
    for result in checked.results:
        origin, group = result.hub, result.gguf
        name = result.name
        if origin is not None:
            name = f"{origin.repo_id}/{group.file}" if group is not None else origin.repo_id
        view = views_.build(repo_rows(result), name=name, hub=True)
        view.carries_pr = result is carrier and result.error is None
        view.pr = _pr_dict(pr) if view.carries_pr else None
        shown.append(view)
    status = http_status(checked)
    notes = list(checked.lines)
    return render(request, "result.html", status, views=shown, notes=notes, message=message)


def _open_pr_of(session: HubSession, result: RepoResult | None) -> PullRequest | None:
    """The repo's open eosfix pull request carrying ``result``'s fix, if any (a courtesy:
    the check stands without it)."""
    fix = fix_of(result) if result is not None else None
    if fix is None:
        return None
    repo_id, file, new = fix
    try:
        return find_open_pr(session.api, session.reader, repo_id, new, file=file)
    except hub_errors():
        return None


def _check_with_pr(session: HubSession, target: HubTarget) -> tuple[Checked, PullRequest | None]:
    """The check (one result, or one per group of alike GGUF files), and the repo's open
    eosfix pull request for the result whose fix a pull request carries (a repo's
    generation_config.json, a GGUF repo's ``params`` file: ``pr_carrier``)."""
    checked = check_hub_target(target, reader=session.reader)
    return checked, _open_pr_of(session, pr_carrier(checked.results))


def _check_files(folder: Path) -> RepoResult:
    result = pipeline.check_folder(folder, label="your files")
    error = result.error
    if error is not None and error.path is not None:  # name the file, not the folder
        try:
            named = Path(error.path).relative_to(folder).as_posix()
        except ValueError:
            named = ""
        result = result._replace(error=error.but(path=named or "your files"))
    return result


def _open(session: HubSession, repo: str) -> tuple[Checked, PullRequest | None, str]:
    """The fix pull request of ``repo`` as ``eosfix hub REPO --pr`` opens it: a repo's
    generation_config.json, or a GGUF repo's ``params`` file (``pr_carrier``)."""
    checked = check_hub_target(HubTarget(repo), reader=session.reader)
    carrier = pr_carrier(checked.results)
    if carrier is None:
        failed = checked.main.error is not None
        return checked, None, ("The check failed: no pull request." if failed else
                               "Nothing to fix: no pull request.")  # fmt: skip
    try:
        pr = session.open_pr(carrier)
    except HubError as exc:
        return checked, None, f"The Hub refused the pull request: {exc.message}"
    if pr is None:
        return checked, None, "Nothing to fix: no pull request."
    words = {
        PrOutcome.OPENED: "Pull request opened.",
        PrOutcome.UPDATED: "The open eosfix pull request was updated with the fix.",
        PrOutcome.UNCHANGED: "An eosfix pull request with this fix is already open.",
    }.get(pr.outcome, f"The open eosfix pull request was left as it is: {pr.left}")
    return checked, pr, words
