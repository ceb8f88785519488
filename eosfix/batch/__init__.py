"""One batch engine for many repos (the HF cache, a Hub organisation, later GGUF folders).

- ``eosfix.batch.run``: units, stages, the shared-analysis LRU and the ``Run``;
- ``eosfix.batch.verdict``: the compact result of one analysis;
- ``eosfix.batch.pool``: worker processes;
- ``eosfix.batch.state``: the state file of a resumable audit;
- ``eosfix.batch.cache``, ``eosfix.batch.hub``: the HF cache and a Hub organisation as
  batches (fix a snapshot; ``eosfix.batch.prs``: open pull requests);
  ``eosfix.batch.gguf_audit``: a Hub GGUF repo as one audit row.

One repo is checked in ``eosfix.targets``; only what many repos need is here.

Where repos come from and how they are written lives in ``eosfix.sources`` and the
containers; how they go through the pipeline in numbers lives here. The renderers
(``eosfix.render.batch``) are passed in, never imported.
"""

from __future__ import annotations

from eosfix.batch.run import Progress, Result, Row, Run, Source, Unit
from eosfix.batch.verdict import Verdict

__all__ = ["Progress", "Result", "Row", "Run", "Source", "Unit", "Verdict"]
