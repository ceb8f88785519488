"""The page's memory: what a check held is freed as its answer goes out. (Ten checks of a
120 MB GGUF header through ``eosfix serve``, and the server's memory after them, are measured by
benchmarks/bench_page_memory.py: within 100 MB of its start.)"""

from __future__ import annotations

import gc
import weakref

from eosfix.serve.config import ServeConfig
from tests.support.hubrepos import BROKEN_SAMPLE, repo_files
from tests.support.service import Page


def test_a_page_answer_leaves_no_reference_cycle_holding_its_check(fake_hub, tmp_path, monkeypatch):
    """A template's macros keep their context in a reference cycle, and the context holds the
    page's views, their rows and the check (a GGUF's 4M-token vocabulary): the check is freed
    as the answer goes out, not at the collector's next full pass (which a quiet server may
    not run for a long time)."""
    from eosfix.serve import page as page_module

    checks: list[weakref.ref[object]] = []
    real = page_module._result_page

    def keep_refs(request, checked, pr, message):  # type: ignore[no-untyped-def]
        checks.extend(weakref.ref(r.check) for r in checked.results if r.check is not None)
        return real(request, checked, pr, message)

    monkeypatch.setattr(page_module, "_result_page", keep_refs)
    fake_hub.add_repo("org/broken", repo_files(BROKEN_SAMPLE))
    config = ServeConfig(secret="s", state_dir=tmp_path / "state", page_rate=1000)
    gc.collect()
    gc.disable()
    try:
        with Page(config) as page:
            reply = page.client().get("/check?repo=org/broken")
        assert reply.status == 200
        assert checks
        assert [ref() for ref in checks] == [None] * len(checks)
    finally:
        gc.enable()
