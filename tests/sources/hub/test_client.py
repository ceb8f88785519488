"""One request to a hostile Hub or CDN, bounded: an answer over its cap is refused on its
length or while it streams (compressed too) and never kept nor retried; a body dripped a
byte at a time ends at the request's deadline; a redirect's body is never read; no cookie
one identity was given goes out with another's requests."""
# ruff: noqa: F811  (fixtures are imported, then requested by name)

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eosfix.sources.hub.client import TooLarge, TooSlow
from eosfix.sources.hub.read import HubEntry, HubReader
from eosfix.targets.session import HubSession
from tests.conftest import ROOT
from tests.support import memory
from tests.support.cachebuilder import chatml_files
from tests.support.hostilehub import (  # noqa: F401
    MiB,
    drip,
    hostile_hub,
    redirect,
    stream,
    with_headers,
)

CONFIG = r"^/evil/big/resolve/[^/]+/tokenizer_config\.json$"


def _store_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.mark.parametrize(
    ("declare", "said"),
    [("true", f"{40 * MiB:,} bytes"), (None, "more bytes than that")],
    ids=["true-length", "no-length"],
)
def test_a_file_over_its_cap_is_refused_not_kept_not_retried(
    hostile_hub, run_eosfix, tmp_path, declare, said
):
    hostile_hub.add_repo("evil/big", chatml_files())
    rule = hostile_hub.on(CONFIG, stream(40 * MiB, declare=declare))
    result = run_eosfix("hub", "evil/big")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"evil/big: error: tokenizer_config.json: larger than the 16 MiB for a config file "
        f"eosfix reads ({said}): not downloaded"
    )
    assert rule.hits == 1  # not retried
    # the client stopped reading at the cap (on its length: before any of the body)
    assert hostile_hub.sent[rule.name] < 32 * MiB
    store = tmp_path / "hf_home" / "eosfix"
    assert all(p.stat().st_size <= 1 * MiB for p in _store_files(store))  # nothing of it kept
    assert not _store_files(store / "incoming")


def test_a_compressed_answer_is_bounded_by_what_it_inflates_to(hostile_hub):
    hostile_hub.add_repo("evil/bomb", chatml_files())
    # 64 MiB of zeros in ~64 kB of gzip, as the repo's info
    rule = hostile_hub.on(r"^/api/models/evil/bomb/revision/", stream(64 * MiB, gzip=True))
    with pytest.raises(TooLarge, match="16 MiB for a Hub API answer"):
        HubReader().resolve(HubEntry("evil/bomb"))
    assert rule.hits == 1


def test_a_redirects_body_is_never_read(hostile_hub):
    repo = hostile_hub.add_repo("evil/redirect", chatml_files())
    target = f"{hostile_hub.url}/evil/redirect/resolve/{repo.head}/config.json"
    rule = hostile_hub.on(r"^/evil/redirect/resolve/main/", redirect(target, 40 * MiB))
    data = HubReader().read_file("evil/redirect", "main", "config.json")
    assert data == chatml_files()["config.json"].encode()
    assert hostile_hub.sent[rule.name] < 32 * MiB  # closed after its head


def test_a_dripped_body_ends_at_the_requests_deadline(hostile_hub):
    hostile_hub.add_repo("evil/drip", chatml_files())
    body = b'{"eos_token_id": 2}' + b" " * 62  # 81 bytes, a byte every 50 ms: 4 s
    rule = hostile_hub.on(r"^/evil/drip/resolve/", drip(body, 0.05))
    reader = HubReader(timeout=0.3)  # the head at once, the body by 0.3 s (+ its size's time)
    with pytest.raises(TooSlow, match="took over 0 s"):
        reader.read_file("evil/drip", "main", "config.json")
    assert rule.hits == 1  # not retried: the answer came, too slowly
    assert hostile_hub.sent[rule.name] < len(body)


@pytest.mark.parametrize("hostile_hub", [{"token": "hf_signed_in"}], indirect=True)
def test_a_cookie_set_for_one_identity_goes_out_with_no_other(hostile_hub):
    """The page's sessions: a signed-in user's and a visitor's, in one process; eosfix's reads
    and huggingface_hub's (HfApi: pull requests) alike."""
    hostile_hub.add_repo("org/m", chatml_files())
    hostile_hub.on(r".", with_headers({"Set-Cookie": "session=signed-in-user; Path=/"}))
    signed_in, visitor = HubSession(token="hf_signed_in"), HubSession(token=False)
    signed_in.reader.resolve(HubEntry("org/m"))
    visitor.reader.resolve(HubEntry("org/m"))
    signed_in.api.model_info("org/m")
    visitor.api.model_info("org/m")
    signed_in.reader.resolve(HubEntry("org/m"))
    assert len(hostile_hub.request_log) == 5
    assert [r.headers.get("cookie") for r in hostile_hub.request_log] == [None] * 5
    anonymous = [r for r in hostile_hub.request_log if "authorization" not in r.headers]
    assert len(anonymous) == 2


def test_a_huge_config_does_not_grow_the_process(hostile_hub, tmp_path):
    """``eosfix check`` of a repo whose tokenizer_config.json is 200 MiB without a length (a
    stream to the end of the connection): its peak memory is a small repo's, give or take."""
    hostile_hub.add_repo("evil/big", chatml_files())
    hostile_hub.add_repo("org/small", chatml_files(1000))  # another commit
    hostile_hub.on(CONFIG, stream(200 * MiB, declare=None))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_ENDPOINT": hostile_hub.url,
        "EOSFIX_CACHE": str(tmp_path / "store"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
    }
    env.pop("HF_TOKEN", None)

    def peak_of_check(repo: str) -> tuple[float, str]:
        """``eosfix check REPO`` in a process of its own: its own peak (not its parent's)."""
        peak_file = tmp_path / "peak"
        proc = subprocess.run(
            [sys.executable, "-c", memory.LAUNCH, "check", repo],
            env={**env, "EOSFIX_TEST_PEAK_FILE": str(peak_file)}, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        return float(peak_file.read_text()), proc.stderr.decode()

    small, _ = peak_of_check("org/small")
    big, err = peak_of_check("evil/big")
    assert big < small + 24, (small, big)
    assert "tokenizer_config.json: larger than the 16 MiB for a config file" in err, err
