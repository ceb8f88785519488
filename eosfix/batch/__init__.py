"""One batch engine for many repos (the HF cache, a Hub organisation, later GGUF folders).

- ``eosfix.batch.run``: units, stages, the shared-analysis LRU and the ``Run``;
- ``eosfix.batch.verdict``: the compact result of one analysis;
- ``eosfix.batch.pool``: worker processes;
- ``eosfix.batch.state``: the state file of a resumable audit;
- ``eosfix.batch.cache``, ``eosfix.batch.hub``: the HF cache and a Hub organisation as
  batches (fix a snapshot; ``eosfix.batch.prs``: open pull requests); ``eosfix.batch.session``:
  a few Hub repos from Python, and the checked upload; ``eosfix.batch.gguf_hub``: a Hub GGUF
  repo by its files' headers, ``eosfix.batch.gguf_audit``: such a repo as one audit row.

Where repos come from and how they are written lives in ``eosfix.sources`` and the
containers; how they go through the pipeline in numbers lives here. The renderers
(``eosfix.render.batch``) are passed in, never imported.
"""

from __future__ import annotations

from eosfix.batch.run import Progress, Result, Row, Run, Source, Unit
from eosfix.batch.verdict import Verdict

__all__ = ["Progress", "Result", "Row", "Run", "Source", "Unit", "Verdict"]
