"""Bringing a listed repo's files in: each content once, with the requests the quotas favour.

The Hub's listing names each repo's files but not their contents ("only the file names are
returned when listing repositories": huggingface_hub ``RepoSibling``). A content's id comes
one repo at a time, two ways, each from its own quota (hub-docs ``docs/hub/rate-limits.md``):

- **by download**: one Resolver request per file; the answer's ``ETag`` (``X-Linked-Etag`` for
  an LFS file) names the content, once it is here;
- **by paths-info**: one API request (``POST /api/models/{id}/paths-info/{commit}``) names
  every file's content (git blob sha1, or the sha256 of an LFS file); then only the contents
  the store lacks are downloaded.

The repos made from one base model (MLX conversions, quantisations, fine-tunes) mostly share
their tokenizer and template files byte for byte, so a repo identified by paths-info after
one of its family costs one API request and the downloads of what is its own (its
config.json, mostly). ``Plan`` decides, in listing order, which way each repo goes: by
paths-info when an earlier repo of the listing came from the same base model (the
``base_model:...`` tags; a repo without one is its own family's base) and the API bucket is
behind the Resolver bucket (each quota's share spent so far: both then run out together,
which is the least time the two allow); by download otherwise. A family resemblance only
decides which requests to send: a file is taken from the store only when its content id,
given by the Hub for this very commit, names a blob there, and every download is checked
against its id.

**The same audit sends the same requests, however the threads run.** Repos are numbered as
they start (``Sequence``); one identified by paths-info looks in the store only once every
earlier repo is done, and does not count a content a later repo happened to bring in first.
So which contents it downloads depends only on the repos before it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable

from eosfix.core.repo import TOKENIZER_JSON
from eosfix.sources.hub.http import API, RESOLVERS, Stopped
from eosfix.sources.hub.read import HubEntry, HubReader
from eosfix.sources.hub.store import Manifest

FAMILIES = 100_000  # base models remembered (LRU): memory stays flat on a million repos
FREE_API = 1000  # the quota assumed before the Hub has named it (a free account's)
RESOLVERS_PER_API = 5  # ... and the Resolver quota for each API request (5,000 / 1,000)


def family_of(entry: HubEntry) -> str:
    """The base model a repo was made from, as its ``base_model:[relation:]ORG/NAME`` tags
    name it (the first), else the repo itself."""
    for tag in entry.tags:
        if tag.startswith("base_model:"):
            base = tag.rsplit(":", 1)[-1]
            if "/" in base:
                return base.lower()
    return entry.repo_id.lower()


class Plan:
    """Which repos are identified by paths-info (see the module); used from one thread, in
    listing order. Counts the requests it planned, per bucket."""

    def __init__(self, reader: HubReader) -> None:
        self.reader = reader
        self.families: OrderedDict[str, None] = OrderedDict()
        self.api = 0  # paths-info requests planned
        self.resolvers = 0  # file downloads planned (one per file for a repo by download)
        self.identified = 0

    def quotas(self) -> tuple[float, float]:
        """(API, Resolver) requests per window: as the Hub says, else a free account's."""
        buckets = self.reader.http.gate.buckets
        api, res = buckets[API], buckets[RESOLVERS]
        res_quota = float(res.quota) if res.paced and res.quota else None
        if api.paced and api.quota:
            api_quota = float(api.quota)
        else:
            api_quota = res_quota / RESOLVERS_PER_API if res_quota else FREE_API
        return api_quota, res_quota or api_quota * RESOLVERS_PER_API

    def identify(self, entry: HubEntry) -> bool:
        """Whether ``entry``'s files are identified by paths-info (else downloaded)."""
        if entry.sha is None or not entry.files:  # a repo given by id: its info comes first
            return False
        family = family_of(entry)
        seen = family in self.families
        self.families[family] = None
        self.families.move_to_end(family)
        if len(self.families) > FAMILIES:
            self.families.popitem(last=False)
        if self.reader.store.manifest(entry.sha) is not None:  # here already: no request
            return False
        if (entry.listed or {}).get("gated"):
            # its files are downloaded, so a repo whose files cannot be read says so, as a
            # repo checked alone does (paths-info, metadata, is open to all)
            seen = False
        files = len(entry.files)
        qa, qr = self.quotas()
        a, r = self.reader.listing_pages + self.api, self.resolvers
        # one API request and (mostly) one file of its own, or every file downloaded: the
        # one that leaves the busier quota less busy
        if seen and files > 1 and max((a + 1) / qa, (r + 1) / qr) < max(a / qa, (r + files) / qr):
            self.api += 1
            self.resolvers += 1
            self.identified += 1
            return True
        self.resolvers += files
        return False


class Sequence:
    """Numbers repos in the order they start, and keeps what each may take from the store to
    what the repos before it brought in (see the module)."""

    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self._cond = threading.Lock()
        self._next = 0
        self._low = 0  # every number below it is finished
        self._finished: set[int] = set()
        self._ahead: dict[str, int] = {}  # content id -> the first repo that brought it in
        self._waiting: dict[int, threading.Event] = {}  # repo -> set once all before it are

    def number(self) -> int:
        with self._cond:
            self._next += 1
            return self._next - 1

    def finish(self, i: int) -> None:
        with self._cond:
            self._finished.add(i)
            low = self._low
            while low in self._finished:
                self._finished.discard(low)
                low += 1
                waiting = self._waiting.pop(low, None)
                if waiting is not None:
                    waiting.set()
            if low != self._low:
                self._low = low
                self._ahead = {c: n for c, n in self._ahead.items() if n >= low}

    def wait_before(self, i: int) -> None:
        """Until every repo numbered before ``i`` is finished."""
        with self._cond:
            if self._low >= i:
                return
            done = self._waiting.setdefault(i, threading.Event())
        while not done.wait(0.5):
            if self.stopping.is_set():
                raise Stopped

    def visible(self, i: int, content_id: str, blob_of: Callable[[str], str | None]) -> str | None:
        """The blob of ``content_id`` for repo ``i``: None when the store lacks it, or when
        only a repo after ``i`` brought it in."""
        with self._cond:
            if self._ahead.get(content_id, i) > i:
                return None
        return blob_of(content_id)

    def brought(self, i: int, content_id: str, blob_of: Callable[[str], str | None]) -> None:
        """Repo ``i`` downloaded ``content_id`` (before it is kept): noted if this run brought
        it in (the first repo that did, of those not finished)."""
        with self._cond:
            if content_id in self._ahead or blob_of(content_id) is None:
                self._ahead[content_id] = min(i, self._ahead.get(content_id, i))


class Fetcher:
    """Brings files into the store, for repos numbered by a ``Sequence`` (see the module)."""

    def __init__(self, reader: HubReader) -> None:
        self.reader = reader
        stopping = reader.http.gate.stopping
        self.files = Sequence(stopping)  # the stop-relevant files, before the analysis
        self.tokenizers = Sequence(stopping)  # tokenizer.json, after it (when an id needs it)

    def bring(self, entry: HubEntry, i: int, identify: bool) -> tuple[HubEntry, Manifest]:
        """Repo ``i``'s relevant files in the store (nothing to do for a commit already
        there); the entry, with tokenizer.json's content id when paths-info gave it."""
        sha, names = entry.sha, entry.files
        assert sha is not None
        assert names is not None
        kept = self.reader.store.manifest(sha)
        if kept is not None:
            return entry, kept
        if identify:
            paths = [*names, *([TOKENIZER_JSON] if entry.tokenizer_json else [])]
            ids = self.reader.identities(entry, paths)
            files = self._by_id(entry, i, {p: ids.get(p) for p in names}, self.files)
            entry = dataclasses.replace(entry, tokenizer_id=ids.get(TOKENIZER_JSON))
        else:
            files = {p: self._download(entry, i, p, self.files) for p in names}
        manifest = Manifest(files, entry.tokenizer_json, entry.model)
        self.reader.store.publish(sha, manifest)
        return entry, manifest

    def bring_tokenizer_json(self, entry: HubEntry, i: int) -> Manifest:
        """tokenizer.json into the repo's snapshot (repo ``i`` of the tokenizer sequence)."""
        assert entry.sha is not None
        if entry.tokenizer_id is not None:
            ids: dict[str, str | None] = {TOKENIZER_JSON: entry.tokenizer_id}
            sha = self._by_id(entry, i, ids, self.tokenizers)[TOKENIZER_JSON]
        else:
            sha = self._download(entry, i, TOKENIZER_JSON, self.tokenizers)
        return self.reader.store.add_file(entry.sha, TOKENIZER_JSON, sha)

    def _by_id(
        self, entry: HubEntry, i: int, ids: dict[str, str | None], seq: Sequence
    ) -> dict[str, str]:
        """Each path's blob: from the store when its content id names one there, else
        downloaded (checked against the id); the store is looked in again once every earlier
        repo is done."""
        blob_of = self.reader.store.blob_of
        found = {p: seq.visible(i, c, blob_of) if c else None for p, c in ids.items()}
        if any(sha is None for sha in found.values()):
            seq.wait_before(i)
        out: dict[str, str] = {}
        for path, content_id in ids.items():
            sha = found[path]
            if sha is None and content_id is not None:
                sha = seq.visible(i, content_id, blob_of)
            if sha is None:
                assert entry.sha is not None
                sha = self.reader.fetch(entry.repo_id, entry.sha, path, content_id).sha
            out[path] = sha
        return out

    def _download(self, entry: HubEntry, i: int, path: str, seq: Sequence) -> str:
        assert entry.sha is not None
        with self.reader.fetching(entry.repo_id, entry.sha, path) as got:
            seq.brought(i, got.content_id, self.reader.store.blob_of)
            return self.reader.keep(got)
