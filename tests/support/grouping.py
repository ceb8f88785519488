"""``pytest -n``: the test modules that share a fixture too costly to build in every worker run
in one worker, as one unit of work; every other test goes to whichever worker is free.

xdist's own ``--dist loadgroup`` marks a group by rewriting a test's ``_nodeid``, which
pytest 9's nodes no longer read (their id is ``_id``): its groups are silently ignored. This
scheduler keys a group on the module path instead, as ``--dist loadscope`` keys a module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


class GroupScheduling(LoadScopeScheduling):
    """``--dist load``, but the tests of a module of ``groups`` (module path -> group name) are
    one unit with the other modules of its group."""

    def __init__(self, config: pytest.Config, log: Any, groups: Mapping[str, str]) -> None:
        super().__init__(config, log)
        self.groups = groups

    def _split_scope(self, nodeid: str) -> str:
        group = self.groups.get(nodeid.split("::", 1)[0])
        return f"group:{group}" if group is not None else nodeid


class Groups:
    """The plugin that gives xdist the scheduler (registered when xdist is installed)."""

    def __init__(self, groups: Mapping[str, str]) -> None:
        self.groups = groups

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":  # another mode asked for by name: that one
            return None
        return GroupScheduling(config, log, self.groups)
