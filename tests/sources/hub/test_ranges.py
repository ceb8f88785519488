"""A Hub file read by byte ranges (eosfix.sources.hub.ranges) against the stand-in Hub: 206
answers, the file's size from Content-Range, the CDN redirect followed once and never sent
the token, a server that ignores ranges read no further than asked."""

from __future__ import annotations

import pytest

from eosfix.core.errors import RepoLoadError
from eosfix.sources.hub import ranges
from eosfix.sources.hub.http import HubHttp
from eosfix.sources.hub.ranges import HubFile, resolve_url

DATA = bytes(range(256)) * 64  # 16 kB


@pytest.fixture
def served(fake_hub):
    repo = fake_hub.add_repo("org/files", {"m.gguf": DATA, "empty.gguf": b""})
    fake_hub.declared_sizes[("org/files", "m.gguf")] = 10**10  # 10 GB: zeros after DATA
    return fake_hub, repo.head


def _file(hub, sha, path, token=None):
    http = HubHttp(token=token, workers=4)
    return HubFile(http, resolve_url(hub.url, "org/files", sha, path), f"org/files/{path}")


def test_ranges_are_answered_and_the_size_comes_from_content_range(served):
    hub, sha = served
    f = _file(hub, sha, "m.gguf")
    assert f.read(0, 100) == DATA[:100]
    assert f.size == 10**10
    assert f.read(16_000, 16_500) == DATA[16_000:] + bytes(116)  # past the bytes held: zeros
    assert f.read(10**10 - 4, 10**10 + 100) == bytes(4)  # clipped at the end of the file
    assert (f.requests, f.fetched) == (3, 604)
    ranged = [r for r in hub.request_log if r.headers.get("range")]
    assert [r.headers["range"] for r in ranged] == [
        "bytes=0-99",
        "bytes=16000-16499",
        f"bytes={10**10 - 4}-{10**10 - 1}",
    ]
    assert all(r.headers.get("accept-encoding") == "identity" for r in ranged)
    assert all(r.status == 206 for r in ranged)


@pytest.mark.parametrize("fake_hub", [{"token": "hf_secret"}], indirect=True)
def test_the_cdn_redirect_is_followed_once_and_never_gets_the_token(served):
    hub, sha = served
    hub.cdn = True
    f = _file(hub, sha, "m.gguf", token="hf_secret")
    assert f.read(0, 10) == DATA[:10]
    assert f.read(10, 20) == DATA[10:20]
    assert f.requests == 3  # the redirect, the first range at the CDN, the second there
    resolve = [r for r in hub.request_log if "/resolve/" in r.path]
    assert [r.status for r in resolve] == [302]
    assert resolve[0].headers.get("authorization") == "Bearer hf_secret"
    assert len(hub.cdn_requests) == 2
    assert all(r.headers.get("authorization") is None for r in hub.cdn_requests)
    assert f.url.startswith(f"http://localhost:{hub.url.rsplit(':', 1)[1]}/cdn/")


def test_a_server_that_ignores_ranges_is_read_no_further_than_asked(served):
    hub, sha = served
    hub.ignore_ranges = True
    f = _file(hub, sha, "m.gguf")
    assert f.read(0, 1000) == DATA[:1000]
    assert f.fetched == 1000
    with pytest.raises(RepoLoadError, match="ignores Range requests"):
        f.read(1000, 2000)


def test_an_empty_file_has_size_zero(served):
    hub, sha = served
    f = _file(hub, sha, "empty.gguf")
    assert f.read(0, 1 << 20) == b""
    assert f.size == 0


def test_a_range_is_appended_to_the_callers_buffer_as_it_arrives(served, monkeypatch):
    """``read_into`` writes each piece of the answer to the end of the buffer it is given (a
    GGUF header of up to 128 MiB is held once, not also as the answer's pieces and their
    join), and a read that fails leaves the buffer as it was."""
    hub, sha = served
    pieces: list[int] = []
    write = ranges._Appending.write

    def counted(self, chunk):
        pieces.append(len(chunk))
        return write(self, chunk)

    monkeypatch.setattr(ranges._Appending, "write", counted)
    big = 3 << 20
    hub.declared_sizes[("org/files", "m.gguf")] = big  # zeros after DATA, up to 3 MiB
    f = _file(hub, sha, "m.gguf")
    buf = bytearray(b"kept")
    f.read_into(buf, 4 + 100)  # bytes [4, 104)
    assert bytes(buf) == b"kept" + DATA[4:104]
    f.read_into(buf, big)
    assert bytes(buf) == b"kept" + DATA[4:] + bytes(big - len(DATA))
    assert len(pieces) > 2  # the answer came in pieces, each appended as it came
    assert sum(pieces) == big - 4 == f.fetched
    hub.ignore_ranges = True
    part = bytearray(DATA[:10])
    with pytest.raises(RepoLoadError, match="ignores Range requests"):
        f.read_into(part, 20)
    assert part == DATA[:10]  # what the refused answer brought is taken back
