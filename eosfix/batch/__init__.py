"""One batch engine for many repos (the HF cache, a Hub organisation, later GGUF folders).

- ``eosfix.batch.run``: units, stages, the shared-analysis LRU and the ``Run``;
- ``eosfix.batch.verdict``: the compact result of one analysis;
- ``eosfix.batch.pool``: worker processes;
- ``eosfix.render.batch``: JSON, CSV and Markdown, streamed.

Where repos come from lives in ``eosfix.sources``; how a batch runs lives here.
"""

from __future__ import annotations

from eosfix.batch.run import Progress, Result, Row, Run, Source, Unit
from eosfix.batch.verdict import Verdict

__all__ = ["Progress", "Result", "Row", "Run", "Source", "Unit", "Verdict"]
