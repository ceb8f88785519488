"""One file of a Hub repo read by byte ranges, never whole: what a GGUF's header is read with.

``HubFile.read(start, end)`` sends ``GET .../resolve/{commit}/{path}`` with ``Range:
bytes=start-(end-1)`` and ``Accept-Encoding: identity`` through the batch's polite HTTP client
(``eosfix.sources.hub.http``: retries, the token, rate limits). The Hub redirects a large
(LFS/Xet) file to a signed URL on its CDN, valid for an hour (huggingface_hub
``file_download.py`` ``get_hf_file_metadata`` reads the target from ``Location``); the first
read follows it, and the later reads of the same file go to that URL directly, without the
token (httpx drops it on a redirect to another host; so does this module). Each hop is a
request. The file's size comes from the answer's ``Content-Range: bytes a-b/SIZE``.
``HubFile.read_into(buf, end)`` appends the next bytes to the caller's buffer as they arrive:
a header of up to 128 MiB is held once, not also as the answer's pieces and their join.

A ``200`` to a ranged request means the server ignored the range: only the bytes asked for
are read from it (the stream is closed there), and only a read from byte 0 can use them.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from typing import IO, Any, cast
from urllib.parse import quote, urlsplit

from huggingface_hub.errors import HfHubHTTPError

from eosfix.core.errors import RepoLoadError
from eosfix.sources.hub.http import HubHttp

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_UNSATISFIABLE = re.compile(r"bytes \*/(\d+)")


def resolve_url(endpoint: str, repo_id: str, revision: str, path: str) -> str:
    return f"{endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"


class HubFile:
    """A file read by ranges (``eosfix.containers.gguf.remote.ByteRanges``): ``size`` once
    the first read is done; ``tally``: its requests (and redirects followed); ``fetched``:
    the bytes received."""

    def __init__(self, http: HubHttp, url: str, name: str) -> None:
        self.http = http
        self.url = url  # the resolve URL; then, once redirected, the URL it led to
        self.name = name  # how errors name it: org/repo/file.gguf
        self.size: int | None = None
        self.tally: Counter[str] = Counter()
        self.fetched = 0
        self._token = True
        self._hub = _origin(url)

    @property
    def requests(self) -> int:
        return self.tally["requests"]

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the file (fewer at its end)."""
        out = bytearray()
        self._append(out, start, end)
        return bytes(out)

    def read_into(self, buf: bytearray, end: int) -> None:
        """Append to ``buf`` the file's bytes [len(buf), end) (fewer at its end), as they
        arrive: never a second copy of them (a GGUF header may be 128 MiB)."""
        self._append(buf, len(buf), end)

    def _append(self, buf: bytearray, start: int, end: int) -> None:
        """Bytes [start, end) appended to ``buf``; on any failure ``buf`` is as it was."""
        if self.size is not None:
            end = min(end, self.size)
        if start >= end and self.size is not None:
            return
        base = len(buf)
        try:
            self._fetch(buf, start, end)
        except BaseException:
            del buf[base:]
            raise

    def _fetch(self, buf: bytearray, start: int, end: int) -> None:
        base = len(buf)
        try:
            response = self.http.get_range(
                self.url, start, end, send_token=self._token, tally=self.tally,
                sink=cast(IO[bytes], _Appending(buf)),  # written, sought and truncated only
            )  # fmt: skip
        except HfHubHTTPError as exc:
            if exc.response is not None and exc.response.status_code == 416 and start == 0:
                m = _UNSATISFIABLE.fullmatch(exc.response.headers.get("content-range", ""))
                self.size = int(m[1]) if m else 0  # an empty file: the reader says so
                return
            raise
        if response.history:  # redirected (a CDN's signed URL): read there from now on
            self.url = str(response.url)
            self._token = _origin(self.url) == self._hub
        got = len(buf) - base  # at most end - start: the answer is cut there
        self.fetched += got
        if response.headers.get("content-encoding", "identity") != "identity":
            raise self._fail("the server compressed a range answer: its offsets are not the file's")
        if response.status_code == 206:
            self._sized(response.headers.get("content-range", ""), start, got)
        elif start == 0:  # the range was ignored: the file from its first byte (capped)
            length = response.headers.get("content-length")
            self.size = int(length) if length and length.isdigit() else None
        else:
            raise self._fail(
                "the server ignores Range requests; eosfix does not download GGUF files whole"
            )

    def _sized(self, header: str, start: int, got: int) -> None:
        m = _CONTENT_RANGE.fullmatch(header.strip())
        if m is None or int(m[1]) != start:
            raise self._fail(f"unexpected Content-Range {header!r} for a range from {start}")
        if int(m[2]) - int(m[1]) + 1 != got:
            raise self._fail(f"the server sent {got} bytes of the range {header!r}")
        if m[3] != "*":
            self.size = int(m[3])

    def _fail(self, message: str) -> RepoLoadError:
        return RepoLoadError(message, path=self.name)


class _Appending(io.RawIOBase):
    """What a range answer is written to: the end of ``buf``. A request tried again starts
    over (``truncate``): what the failed try wrote is taken back."""

    def __init__(self, buf: bytearray) -> None:
        super().__init__()
        self.buf, self.base = buf, len(buf)

    def writable(self) -> bool:
        return True

    def write(self, chunk: Any) -> int:
        self.buf += chunk
        return len(chunk)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return len(self.buf) - self.base

    def truncate(self, size: int | None = None) -> int:
        del self.buf[self.base :]
        return 0


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
