"""One target, one answer: every spelling of a target, asked on every surface that takes it,
gives the same verdict, the same terminators and the same error line.

Targets: a model folder, a GGUF file, a split GGUF, a cache snapshot folder and a cached GGUF,
an ollama model, a Hub repo of small files, a Hub GGUF repo and one of its files, a
tokenizer-only repo, a gated repo and a missing one (the stand-in Hub, tests/support/hubserver.py).
Surfaces: ``check`` (text and JSON), ``explain``, ``render``, ``hub``, ``cache``, ``ollama``,
the page over HTTP and the bot's check (``HubSession.check``), each where it applies.

An answer is what a surface says of a target: its verdict (the worst of a GGUF repo's
groups), the exit code, the terminators (of every result), the error's reason (the words after
the name the user typed, which each surface repeats as it was typed; the note that no local
path has an ``org/name``'s name either belongs to that spelling alone). Each surface says what
it says: a field it does not say is None and is not compared.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from eosfix.cli import main
from tests.conftest import SAMPLES, copy_repo
from tests.support import ggufs
from tests.support.cachebuilder import CacheBuilder, chatml_files
from tests.support.hubserver import GGUF_ORG, add_gguf_org

WORST_FIRST = ("problems", "fixable", "fixed", "error", "warned", "ok", "no_template",
               "not_a_model")  # fmt: skip
FOLDER = "acme/chatml-missing-im-end"
GGUF_REPO = f"{GGUF_ORG}/Chat-7B-GGUF"
TOKENIZER_ONLY = "acme/tokenizer"
GATED = "acme/gated"
MISSING = "acme/missing"


@dataclass(frozen=True)
class Answer:
    verdict: str | None = None
    exit: int | None = None
    terminators: frozenset[tuple[str, int | None]] | None = None
    error: str | None = None


def _reason(line: str) -> str:
    """The words of an error after the name it repeats as typed."""
    line = line.strip().removeprefix("error: ")
    line = re.sub(r"; no local folder or file .* exists either$", "", line)
    m = re.match(r"\S*?:\s", line)
    rest = line[m.end() :] if m else line
    return rest.removeprefix("not checked: ")


def _worst(verdicts: list[str]) -> str:
    return min(verdicts, key=WORST_FIRST.index)


def _from_entries(entries: list[dict], code: int | None) -> Answer:
    errors = [_reason(e["error"]) for e in entries if e.get("error")]
    terms = frozenset((t["content"], t["id"]) for e in entries for t in e.get("terminators", ()))
    return Answer(
        _worst([e["verdict"] for e in entries]), code, terms, errors[0] if errors else None
    )


class World:
    """Every target, and a way to ask each surface about a string."""

    def __init__(self, capsys: pytest.CaptureFixture[str], tmp_path: Path, hub) -> None:
        self.capsys, self.tmp, self.hub = capsys, tmp_path, hub

    def run(self, *args: object) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = self.capsys.readouterr()
        return code, out, err

    # --- surfaces ---------------------------------------------------------------------------
    def check_json(self, given: str) -> Answer:
        code, out, _ = self.run("check", "--format", "json", given)
        return _from_entries(json.loads(out)["repos"], code)

    def check_text(self, given: str) -> Answer:
        code, out, err = self.run("check", given)
        terms = frozenset(
            (m["content"], int(m["id"]) if m["id"].isdigit() else None)
            for m in re.finditer(
                r"^  ends a turn +(?P<content>\S+)  id (?P<id>\S+?)[,:]", out, re.MULTILINE
            )
        )
        errors = [_reason(line) for line in err.splitlines() if "error" in line or "not checked" in line]  # fmt: skip
        # a block without terminators (no template, no model, an error) says nothing of them
        return Answer(None, code, terms or None, errors[0] if errors else None)

    def explain_json(self, given: str) -> Answer:
        code, out, _ = self.run("explain", "--format", "json", given)
        entry = json.loads(out)
        return Answer(entry["verdict"], code, None, _reason(entry["error"]) if entry.get("error") else None)  # fmt: skip

    def render_json(self, given: str) -> Answer:
        code, _, err = self.run("render", "--format", "json", given)
        return Answer(None, None, None, _reason(err) if code else None)

    def hub_json(self, given: str) -> Answer:
        code, out, _ = self.run("hub", "--format", "json", given)
        (entry,) = json.loads(out)["repos"]
        terms = frozenset((t["content"], t["id"]) for t in entry.get("terminators", ()))
        return Answer(entry["verdict"], code, terms, entry.get("error"))

    def cache_json(self, repo: str, path: Path) -> Answer:
        """``eosfix cache --repo REPO`` (a glob, or a repo's URL): the entry of ``path`` (a
        snapshot, or a GGUF file in one)."""
        _, out, _ = self.run("cache", "--format", "json", "--cache-dir", self.cache,
                             "--repo", repo)  # fmt: skip
        entries = [e for e in json.loads(out)["repos"] if e["path"] == str(path)]
        assert len(entries) == 1, (repo, path, out)
        return _from_entries(entries, None)

    def ollama_json(self, given: str) -> Answer:
        _, out, _ = self.run("ollama", "--format", "json", "--models", self.store)
        (entry,) = [m for m in json.loads(out)["models"] if m["manifest"] == given]
        terms = frozenset((t["content"], t["id"]) for t in entry.get("terminators", ()))
        return Answer(entry["verdict"], None, terms, entry.get("error"))

    def page(self, given: str) -> Answer:
        reply = self.page_client.check(given)
        text = reply.text
        verdicts = re.findall(r'id="verdict[-\d]*" data-verdict="(\w+)"', text)
        terms = frozenset(
            (html.unescape(c), int(i) if i else None)
            for c, i in re.findall(
                r'<p><code class="special">([^<]*)</code> (?:id (\d+)|no id):', text
            )
        )
        errors = re.findall(
            r'<p class="where problem" id="error[-\d]*" role="alert">([^<]*)</p>', text
        )
        error = _reason(html.unescape(errors[0])) if errors else None
        return Answer(_worst(verdicts), None, terms, error)

    def bot(self, given: str) -> Answer:
        """What the bot checks of a pushed repo (it is given the repo id, never a spelling)."""
        from eosfix.render.report import result_to_dict
        from eosfix.targets.parse import parse_hub
        from eosfix.targets.session import HubSession

        entry = result_to_dict(HubSession(token=False).check(parse_hub(given).repo_id))
        return _from_entries([entry], None)

    # --- targets ----------------------------------------------------------------------------
    def local(self) -> None:
        self.folder = copy_repo(SAMPLES / "chatml-missing-im-end", self.tmp / "folder")
        self.gguf = ggufs.command_r(self.tmp / "cmdr.gguf")
        (self.tmp / "split").mkdir()
        self.split = ggufs.chatml(self.tmp / "split" / "m.gguf", shards=3)
        b = CacheBuilder(self.tmp / "hf-cache")
        b.add_revision("org/chat", chatml_files(1000))
        data = ggufs.command_r(self.tmp / "src.gguf").read_bytes()
        b.add_revision("org/Chat-GGUF", {"Chat-Q4_K_M.gguf": data, "README.md": "x\n"})
        self.cache = b.root
        self.snapshot = next((b.root / "models--org--chat" / "snapshots").iterdir())
        self.cached_gguf = next((b.root / "models--org--Chat-GGUF" / "snapshots").iterdir()) / (
            "Chat-Q4_K_M.gguf"
        )
        from tests.support.ollama import add_model

        self.store = self.tmp / "ollama"
        add_model(self.store, "cmdr:latest", self.gguf, {"stop": ["<|START_OF_TURN_TOKEN|>"]})
        self.manifest = next(p for p in (self.store / "manifests").rglob("*") if p.is_file())

    def hub_repos(self) -> None:
        files = {p.name: p.read_bytes() for p in (SAMPLES / "chatml-missing-im-end").iterdir()
                 if p.is_file() and not p.name.startswith("expected")}  # fmt: skip
        self.hub.add_repo(FOLDER, files)
        chat = chatml_files(1000)
        self.hub.add_repo(TOKENIZER_ONLY, {k: v for k, v in chat.items()
                                           if k in ("tokenizer_config.json", "chat_template.jinja")})  # fmt: skip
        self.hub.add_repo(GATED, chat, gated=True)
        add_gguf_org(self.hub, self.tmp / "written")
        self.hub.cdn = True


# --- the table --------------------------------------------------------------------------------

HUB_SPELLINGS = ("{r}", " {r} ", "hf://{r}", "hf.co/{r}", "huggingface.co/{r}",
                 "https://huggingface.co/{r}", "https://www.huggingface.co/{r}/", "https://hf.co/{r}",
                 "https://huggingface.co/{r}/tree/main", "{r}@main")  # fmt: skip
GGUF_FILE_SPELLINGS = (f"{GGUF_REPO}:Q2_K", f"hf.co/{GGUF_REPO}:q2_k",
                       f"{GGUF_REPO}/Chat-7B-Q2_K.gguf", f"hf://{GGUF_REPO}/Chat-7B-Q2_K.gguf",
                       f"https://huggingface.co/{GGUF_REPO}/blob/main/Chat-7B-Q2_K.gguf",
                       f"https://huggingface.co/{GGUF_REPO}/resolve/main/Chat-7B-Q2_K.gguf?download=true")  # fmt: skip
LOCAL = ("check_text", "check_json", "explain_json")
HUB = (*LOCAL, "hub_json", "page", "bot")


def _spelled(repo: str) -> tuple[str, ...]:
    return tuple(s.format(r=repo) for s in HUB_SPELLINGS)


# target -> (its spellings, the surfaces that take it, the verdict, whether render applies)
TARGETS: dict[str, Callable[[World], tuple[tuple[str, ...], tuple[str, ...], str]]] = {
    "folder": lambda w: ((str(w.folder), f"{w.folder}/", f"{w.folder}/tokenizer_config.json",
                          f" {w.folder} "), (*LOCAL, "render_json"), "fixable"),
    "gguf file": lambda w: ((str(w.gguf), f" {w.gguf}"), (*LOCAL, "render_json"), "fixable"),
    "split": lambda w: ((str(w.split.with_name("m-00001-of-00003.gguf")),
                         str(w.split.with_name("m-00003-of-00003.gguf"))),
                        (*LOCAL, "render_json"), "ok"),
    "cache snapshot": lambda w: ((str(w.snapshot), f"{w.snapshot}/config.json"),
                                 (*LOCAL, "cache:org/chat",
                                  "cache:https://huggingface.co/org/chat"), "fixable"),
    "cached gguf": lambda w: ((str(w.cached_gguf),), (*LOCAL, "cache:org/*"), "fixable"),
    "ollama model": lambda w: ((str(w.manifest),), (*LOCAL, "ollama_json"), "fixable"),
    "hub folder repo": lambda w: (_spelled(FOLDER), (*HUB, "render_json"), "fixable"),
    "hub gguf repo": lambda w: (_spelled(GGUF_REPO), (*HUB, "render_json"), "fixable"),
    "hub gguf file": lambda w: (GGUF_FILE_SPELLINGS, (*HUB, "render_json"), "fixable"),
    "tokenizer-only": lambda w: (_spelled(TOKENIZER_ONLY), HUB, "not_a_model"),
    "gated": lambda w: (_spelled(GATED), (*HUB, "render_json"), "error"),
    "missing": lambda w: (_spelled(MISSING), (*HUB, "render_json"), "error"),
}  # fmt: skip


@pytest.fixture
def world(fake_hub, capsys, tmp_path, monkeypatch):
    from eosfix.serve.config import ServeConfig
    from tests.support.service import Page

    monkeypatch.chdir(tmp_path)  # no local folder named like the Hub repos
    w = World(capsys, tmp_path, fake_hub)
    w.local()
    w.hub_repos()
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=10_000)
    with Page(config) as page:
        w.page_client = page.client()
        yield w


def _ask(w: World, target: str, surface: str, given: str) -> Answer:
    if surface.startswith("cache:"):
        path = w.snapshot if target == "cache snapshot" else w.cached_gguf
        return w.cache_json(surface.removeprefix("cache:"), path)
    return getattr(w, surface)(given)


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_spelling_on_every_surface_gives_one_answer(world, target):
    spellings, surfaces, verdict = TARGETS[target](world)
    answers: dict[tuple[str, str], Answer] = {}
    for surface in surfaces:
        for given in spellings:
            if surface in ("bot",) and given != spellings[0]:
                continue  # the bot is given a repo id, never a spelling
            answers[(surface, given)] = _ask(world, target, surface, given)
    for field in ("verdict", "exit", "terminators", "error"):
        seen = {k: getattr(a, field) for k, a in answers.items() if getattr(a, field) is not None}
        assert len(set(seen.values())) <= 1, (target, field, seen)
    verdicts = {a.verdict for a in answers.values() if a.verdict is not None}
    assert verdicts == {verdict}, (target, answers)
    if verdict == "error":
        assert all(a.error for a in answers.values()), answers
        assert all(a.terminators in (None, frozenset()) for a in answers.values())
    else:
        assert all(a.error is None for a in answers.values()), answers
        terms = {a.terminators for a in answers.values() if a.terminators is not None}
        assert (terms and frozenset() not in terms) or verdict == "no_template", terms
