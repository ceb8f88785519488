"""What the bot's and the page's tests share: the webhook secret and a push's payload as the
Hub sends it, the signed-in user's token, a repo whose turn end is spelled as markup, the
eosfix pull requests of a stand-in Hub repo and the temperature one proposes, a broken commit
pushed, a request sent as raw bytes; and for ``eosfix serve`` run as a process of its own (the
tests that watch its memory, the benchmarks) its environment against a stand-in Hub, its
stop, and its memory after page checks of one repo (``page_checks_memory``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosfix.sources.hub.write import PR_TITLE_PREFIX
from tests.support.hubrepos import BROKEN_SAMPLE, repo_files

SECRET = "s3cret-webhook"
USER_TOKEN = "hf_page_user_token_0123456789"  # the signed-in user's (the `signed` fixture)
XSS = '<img src=x onerror="alert(1)">'


def payload(repo_id: str, sha: str, *, ref: str = "refs/heads/main", **event: Any) -> dict:
    """A ``repo.content`` update as the Hub sends it
    (https://huggingface.co/docs/hub/webhooks; huggingface_hub's ``WebhookPayload``)."""
    return {
        "event": {
            "action": event.get("action", "update"),
            "scope": event.get("scope", "repo.content"),
        },
        "repo": {
            "type": event.get("type", "model"),
            "name": repo_id,
            "id": "6" + "0" * 23,
            "private": False,
            "url": {
                "web": f"https://huggingface.co/{repo_id}",
                "api": f"https://huggingface.co/api/models/{repo_id}",
            },
            "headSha": sha,
            "owner": {"id": "6" + "1" * 23},
        },
        "webhook": {"id": "6" + "2" * 23, "version": 3},
        "updatedRefs": [{"ref": ref, "oldSha": "0" * 40, "newSha": sha}],
    }


def eosfix_prs(repo: Any) -> list:
    """The stand-in Hub repo's pull requests that eosfix opened (by their title)."""
    return [
        d for d in repo.discussions if d.is_pull_request and d.title.startswith(PR_TITLE_PREFIX)
    ]


def push_broken_commit(fake_hub: Any, repo_id: str, temperature: float) -> str:
    """Push to the stand-in Hub repo a commit still missing <|im_end|> (the broken sample's
    generation_config.json), whose fix differs by ``temperature``: its sha."""
    gen = json.loads(repo_files(BROKEN_SAMPLE)["generation_config.json"])
    gen["temperature"] = temperature
    return str(fake_hub.push(repo_id, {"generation_config.json": json.dumps(gen, indent=2) + "\n"}))


def pr_temperature(repo: Any, num: int) -> float:
    """The temperature of the generation_config.json pull request ``num`` proposes."""
    return float(json.loads(repo.pr_files(num)["generation_config.json"])["temperature"])


def xss_repo() -> dict[str, bytes]:
    """A ChatML-like template whose turn end is a special token spelled as markup."""
    template = (
        "{% for m in messages %}<|start|>{{ m.role }}\n{{ m.content }}" + XSS + "\n{% endfor %}"
        "{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
    )
    tok = {
        "eos_token": XSS,
        "added_tokens_decoder": {
            "5": {"content": "<|start|>", "special": True},
            "6": {"content": XSS, "special": True},
        },
    }
    return {
        "chat_template.jinja": template.encode(),
        "tokenizer_config.json": json.dumps(tok).encode(),
        "generation_config.json": b'{\n  "eos_token_id": 5\n}\n',
        "config.json": b'{"eos_token_id": 5}\n',
    }


def raw_request(url: str, request: bytes, *, read: bool = True) -> bytes:
    """Send ``request``, bytes as they are, to the server at ``url`` over a socket; what it
    answers until it closes the connection (nothing read when ``read`` is false)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        if not read:
            return b""
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def hub_env(code: Path, hub_url: str, home: Path) -> dict[str, str]:
    """The environment of an eosfix process running ``code`` (on PYTHONPATH) against the
    stand-in Hub at ``hub_url``, its caches under ``home``, with no token of the machine's."""
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "HF_ENDPOINT": hub_url,
        "HF_HOME": str(home / "hf"),
        "HF_HUB_CACHE": str(home / "hf" / "hub"),
        "EOSFIX_CACHE": str(home / "eosfix"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "0",
    }
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        env.pop(var, None)
    return env


def stop_server(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited within ``grace`` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --- the page's memory after checks of one large GGUF header ------------------------------------


def settled_mb(pid: int, quiet: float = 2.0, longest: float = 20.0) -> float:
    """``pid``'s resident memory (MiB) once it has not fallen for ``quiet`` seconds (what a
    check held is freed once its answer is sent)."""
    from tests.support import memory

    low, since, end = memory.resident_mib(pid), time.monotonic(), time.monotonic() + longest
    while time.monotonic() - since < quiet and time.monotonic() < end:
        time.sleep(0.25)
        now = memory.resident_mib(pid)
        if now < low:
            low, since = now, time.monotonic()
    return low


@dataclass(frozen=True)
class PageMemory:
    """``eosfix serve``'s resident memory (MiB) before the checks, at its peak and settled
    after them; the checks' wall time; how many answers were a verdict naming the id."""

    start: float
    peak: float
    after: float
    wall: float
    verdicts: int


def page_checks_memory(
    code: Path, hub_url: str, home: Path, repo: str, *, checks: int, at_once: int, id_text: bytes
) -> PageMemory:
    """``code``'s ``eosfix serve`` against the stand-in Hub at ``hub_url``: ``checks`` page
    checks of ``repo``, ``at_once`` at a time as visitors send them; its own figures (/proc)."""
    from tests.support import memory
    from tests.support.service import free_port, http, serve_process, wait_healthy

    env = {
        **hub_env(code, hub_url, home),
        "EOSFIX_WEBHOOK_SECRET": "memory",
        "EOSFIX_STATE_DIR": str(home / "state"),
        "EOSFIX_PAGE_RATE": "100000",
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve_process(env, port, home / "serve.log", cwd=code)
    try:
        wait_healthy(url, proc)
        # Nothing is being freed yet: a short look for the start, the full quiet spell after.
        start = settled_mb(proc.pid, quiet=0.5)
        answers: list[tuple[int, bytes]] = []

        def visitor(k: int) -> None:
            for _ in range(k, checks, at_once):
                reply = http("GET", f"{url}/check?repo={repo}", timeout=600)
                answers.append((reply.status_code, reply.body))

        began = time.monotonic()
        visitors = [threading.Thread(target=visitor, args=(k,)) for k in range(at_once)]
        for v in visitors:
            v.start()
        for v in visitors:
            v.join()
        wall = time.monotonic() - began
        after, peak = settled_mb(proc.pid), memory.peak_mib(proc.pid)
    finally:
        stop_server(proc)
    verdicts = sum(status == 200 and id_text in body for status, body in answers)
    return PageMemory(start, peak, after, wall, verdicts)
