"""The README's "Auditing an organisation" transcripts: real eosfix processes against the
stand-in Hub (tests/hubserver.py). ``python -m tests.readme_audit`` prints them, to paste;
tests/test_readme_audit.py checks the README shows what this prints.

One organisation, audited three ways: interrupted with Ctrl-C while its listing is read (a
real SIGINT, sent once the stand-in Hub holds the second listing page and the first page's
repos are fetched: no wall-clock window), resumed from the state file, and from an empty
store under a quota of 10 file requests per 2 seconds (fixed window, as the Hub counts).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.hubserver import FakeHub
from tests.test_hub import sample_files

ROOT = Path(__file__).resolve().parents[1]
ORG = "my-org"
REPOS = {  # repo -> sample (a README that tells repos with the same files apart)
    "base-7b": "base-model",
    "chat-7b": "llama3-healthy",
    "chat-7b-mlx-4bit": "chatml-missing-im-end",
    "chat-7b-mlx-8bit": "chatml-missing-im-end",
    "glm-chat": "glm-next-turn-opener",
    "reasoner-20b": "stop-inside-turn",
    "tokenizer": "",
    "vl-chat": "vlm-text-config-eos",
}
PAGE = 4  # repos per listing page: the Ctrl-C comes while page 2 is held
QUOTA, WINDOW = 10, 2.0  # file requests per window in the rate-limited audit
# What differs between runs of the rate-limited audit (how long the pauses were, how many
# requests got a 429 and were sent again): masked when the README is compared.
VOLATILE = re.compile(r"\d+(?= requests? for)|\d+(?= rate-limited)|\d+(?= s paused)|"
                      r"(?<=concurrency down to )\d+|(?<=now )\d+(?= of)")  # fmt: skip


def organisation(hub: FakeHub) -> None:
    for name, sample in REPOS.items():
        if sample:
            files = sample_files(sample, **{"README.md": f"# {name}\n".encode()})
        else:  # a tokenizer on its own: no config, no weights
            files = sample_files("llama3-healthy")
            files = {k: v for k, v in files.items() if k in ("tokenizer_config.json",
                                                             "chat_template.jinja")}  # fmt: skip
        hub.add_repo(f"{ORG}/{name}", files)


@contextmanager
def stand_in_hub() -> Iterator[tuple[FakeHub, dict[str, str], Path]]:
    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        organisation(hub)
        hub.page_size = PAGE
        home = Path(tmp)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(home / "hf"),
            "EOSFIX_CACHE": str(home / "store"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_OFFLINE": "0",
            "NO_COLOR": "1",
        }
        for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "COLUMNS"):
            env.pop(key, None)
        yield hub, env, home


def _start(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "eosfix", *args],
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _shown(args: list[str], out: str, err: str, note: str = "", tail: int = 0) -> str:
    command = "eosfix " + shlex.join(args)
    lines = (out + err).splitlines()
    if tail:
        command += f" | tail -{tail}"
        lines = out.splitlines()[-tail:]
    return "\n".join([f"$ {command}" + (f"      # {note}" if note else ""), *lines])


def run(args: list[str], env: Mapping[str, str], cwd: Path, **shown: object) -> str:
    proc = _start(args, env, cwd)
    out, err = proc.communicate(timeout=300)
    return _shown(args, out, err, **shown)  # type: ignore[arg-type]


def interrupted(hub: FakeHub, env: Mapping[str, str], cwd: Path) -> str:
    """Ctrl-C while the listing's second page is on its way."""
    args = ["hub", "--author", ORG, "--state", "audit.jsonl"]
    page2 = hub.hold(r"^/api/models$", query=f"cursor={PAGE}")
    proc = _start(args, env, cwd)
    assert page2.arrived.wait(120), "the second listing page was never asked for"
    first = [f"{ORG}/{name}" for name in list(REPOS)[:PAGE]]
    while any(len(hub.downloads(r)) < 4 for r in first if "base" not in r):
        assert proc.poll() is None, proc.communicate()
        threading.Event().wait(0.01)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    stopping = proc.stderr.readline()
    page2.release()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    hub._holds.clear()
    return _shown(args, out, stopping + err, note="Ctrl-C while the listing is read")


def rate_limited(hub: FakeHub, env: Mapping[str, str], cwd: Path) -> str:
    hub.rate_limit(QUOTA, WINDOW)
    fresh = {**env, "EOSFIX_CACHE": str(cwd / "fresh-store")}  # nothing kept: every file asked
    try:
        return run(["hub", "--author", ORG, "--format", "markdown"], fresh, cwd, tail=1)
    finally:
        hub._quotas.clear()


def transcripts() -> dict[str, str]:
    """name -> the transcript the README shows."""
    with stand_in_hub() as (hub, env, home):
        out = {"interrupted": interrupted(hub, env, home)}
        state = ["hub", "--author", ORG, "--state", "audit.jsonl"]
        out["resumed"] = "\n\n".join(
            [run(state, env, home), run([*state, "--format", "markdown"], env, home)]
        )
        out["rate_limited"] = rate_limited(hub, env, home)
        out["pull_requests"] = run(
            ["hub", "--author", ORG, "--pr", "--max-prs", "2", "--dry-run"], env, home, tail=6
        )
    return out


if __name__ == "__main__":
    for name, text in transcripts().items():
        print(f"<!-- {name} -->\n```text\n{text}\n```\n")
