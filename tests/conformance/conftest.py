"""Fixtures shared by the conformance tests: the shapes' weights, and the matrix of every
shape in every state that the runtimes run in their own virtualenvs answer for at once."""

from __future__ import annotations

import pytest

from tests.conformance import external
from tests.conformance.harness import Matrix, build_matrix
from tests.conformance.shapes import write_models


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    pytest.importorskip("torch", reason="the shapes' weights need torch (eosfix[verify])")
    pytest.importorskip("transformers", reason="the shapes' weights need transformers")
    return write_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def matrix(models, tmp_path_factory) -> Matrix:
    return build_matrix(tmp_path_factory.mktemp("matrix"), models)


@pytest.fixture(scope="session")
def answers():
    """runtime -> its runner's Answer, one runner process per runtime for the session, each
    folder asked when a test first reads it; skipped (failed, with
    $EOSFIX_REQUIRE_RUNTIME_VENVS set) when its virtualenv is absent."""
    cache: dict[str, external.Answer] = {}
    running: list[external.Served] = []

    def answer(runtime: str) -> external.Answer:
        if runtime not in cache:
            try:
                cache[runtime], served = external.serve(runtime)
            except LookupError as exc:
                if external.required():
                    pytest.fail(str(exc))
                pytest.skip(str(exc))
            running.append(served)
        return cache[runtime]

    yield answer
    for served in running:
        served.close()
