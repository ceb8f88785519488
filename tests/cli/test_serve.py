"""``eosfix serve`` stops on SIGTERM even while a page check waits on a Hub that says nothing:
the page's Hub requests give up at once (the bot's get their grace)."""
# ruff: noqa: F811  (fixtures are imported, then requested by name)

from __future__ import annotations

import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request

import pytest

from tests.conftest import ROOT
from tests.support.cachebuilder import chatml_files
from tests.support.hostilehub import hostile_hub  # noqa: F401

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.service import free_port, serve_process, wait_healthy


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=120) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_sigterm_ends_a_page_check_waiting_on_a_silent_hub(hostile_hub, tmp_path):
    hostile_hub.add_repo("org/silent", chatml_files())
    hold = hostile_hub.hold(r"^/api/models/org/silent/")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EOSFIX_WEBHOOK_SECRET": "s3cret",
        "EOSFIX_STATE_DIR": str(tmp_path / "state"),
    }
    env.pop("HF_TOKEN", None)
    proc = serve_process(env, port, tmp_path / "serve.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        check = threading.Thread(target=_get, args=(f"{url}/check?repo=org/silent",))
        check.start()
        assert hold.arrived.wait(30)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("eosfix serve ignored SIGTERM while a check waited on the Hub")
        assert code == 0, (tmp_path / "serve.log").read_text()
        check.join(30)
    finally:
        hold.release()
        proc.kill()
        proc.wait()
