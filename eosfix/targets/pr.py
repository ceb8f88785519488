"""One repo's fix as a pull request: what it carries (a repo's generation_config.json, or a
GGUF repo's ``params`` file) and the pull request that carries it (``open_fix_pr``: an open
eosfix PR is reported, updated or left, never doubled: ``eosfix.sources.hub.write``). Many
repos' pull requests are ``eosfix.batch.prs``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from huggingface_hub import HfApi

from eosfix.containers.folder.plan import FilePatch
from eosfix.core.repo import GENERATION_CONFIG
from eosfix.result import RepoResult
from eosfix.sources.hub.read import HubReader
from eosfix.sources.hub.write import PullRequest, open_pr

Describe = Callable[[RepoResult], str]  # a fix PR's description (eosfix.render.pr)


def token_user(api: HfApi) -> str | None:
    """The user the token belongs to; None when the Hub does not say (no token, offline)."""
    try:
        return str(api.whoami()["name"])
    except Exception:  # noqa: BLE001 - no token, offline...: the author is not checked
        return None


def fix_bytes(result: RepoResult) -> bytes | None:
    """The generation_config.json a fix PR carries, or None when there is nothing to fix."""
    patch = next(
        (p for p in result.patches if isinstance(p, FilePatch) and p.file == GENERATION_CONFIG),
        None,
    )
    return None if result.check is None or patch is None else patch.new_text.encode("utf-8")


def params_bytes(result: RepoResult) -> bytes | None:
    """The ``params`` file a GGUF repo's PR carries (what ``ollama run hf.co/...`` stops
    on, planned by ``eosfix.targets.gguf_hub``), or None when it needs none."""
    ollama = result.ollama_hub
    if result.check is None or ollama is None or ollama.plan is None:
        return None
    return ollama.plan.new.encode("utf-8")


def params_result(results: Sequence[RepoResult]) -> RepoResult | None:
    """Of a GGUF repo's groups, the result whose ``params`` file a pull request carries (what
    ``ollama run hf.co/...`` stops on, for every tag of the repo): the group of the file
    ollama picks by default (a plan of another group would change the stop list of that
    default unseen), else, when ollama picks none of them, the first group that plans one;
    None: no PR."""
    read = [r for r in results if r.check is not None]
    default = [r for r in read if r.gguf is not None and "ollama" in r.gguf.default_for]
    for result in default or read:
        if result.ollama_hub is not None and result.ollama_hub.plan is not None:
            return result
    return None


def pr_carrier(results: Sequence[RepoResult]) -> RepoResult | None:
    """Of one target's results, the one whose fix a pull request carries, as ``eosfix hub
    --pr`` opens it: a repo's generation_config.json fix, or of a GGUF repo's groups the one
    whose ``params`` file it carries (``params_result``); None: no pull request."""
    if any(r.container == "gguf" and r.gguf is not None for r in results):
        return params_result(results)
    return next((r for r in results if fix_bytes(r) is not None), None)


def fix_of(result: RepoResult) -> tuple[str, str, bytes] | None:
    """What a fix PR carries: (repo id, file, its new bytes): a repo's generation_config.json,
    or a GGUF repo's ``params``; None when there is nothing a PR can fix."""
    new_bytes = fix_bytes(result)
    if new_bytes is not None:
        return result.name, GENERATION_CONFIG, new_bytes
    if result.ollama_hub is not None and result.hub is not None:
        new_bytes = params_bytes(result)
        if new_bytes is not None:
            return result.hub.repo_id, result.ollama_hub.file, new_bytes
    return None


def open_fix_pr(
    hf_api: HfApi, reader: HubReader, result: RepoResult, describe: Describe, me: str | None = None
) -> PullRequest | None:
    """Open one PR with the fix, unless the repo has an open eosfix PR (then it is reported,
    updated with the new bytes, or left: ``eosfix.sources.hub.write``): a repo's
    generation_config.json, or, for a GGUF on the Hub (a result of
    ``eosfix.targets.gguf_hub``), the repo's ``params`` file (its header no PR can change).

    ``result.hub`` says the repo's commit and revision (and, for a GGUF, its id). Returns None when there is nothing to fix; raises PrError when the Hub
    refuses.
    """
    fix = fix_of(result)
    if fix is None:
        return None
    repo_id, file, new_bytes = fix
    return open_pr(
        hf_api,
        reader,
        repo_id,
        new_bytes,
        revision=result.hub.revision if result.hub is not None else "main",
        parent_commit=str(result.hub.sha if result.hub is not None else None),
        description=describe(result),
        me=me,
        file=file,
    )
