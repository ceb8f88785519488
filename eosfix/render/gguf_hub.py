"""What a GGUF file on the Hub adds to its text block: which files it stands for, why no pull
request can fix its header (and what works today), and what ``ollama run hf.co/...`` gets.

Everything comes from the result's typed fields (``hub``, ``gguf``, ``ollama_hub``: made by
``eosfix.targets.gguf_hub``): this module formats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from eosfix.render.hubrows import GgufRows, OllamaHubRow, is_hub_gguf, override_kv
from eosfix.render.rows import RepoRows
from eosfix.result import RepoResult

__all__ = [
    "header_lines", "is_hub_gguf", "ollama_lines", "override_kv", "params_pr_description",
    "title_suffix",
]  # fmt: skip

SHOWN = 6  # alike files named in the title before "and N more"


def _short(path: str) -> str:
    return path.rpartition("/")[2]


def _files(paths: Sequence[str]) -> str:
    shown = ", ".join(_short(p) for p in paths[:SHOWN])
    more = len(paths) - SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def group_parts(group: GgufRows) -> list[str]:
    """What a block stands for: whose default download it is, the files alike, the file it
    differs from."""
    parts = []
    if group.default_for:
        who = {"llama.cpp": "llama.cpp -hf", "ollama": "ollama run hf.co"}
        parts.append(f"what {' and '.join(who[p] for p in group.default_for)} load without a tag")
    if group.alike:
        parts.append(f"and {_files(group.alike)}: the same stop keys")
    if group.differs_from:
        keys = ", ".join(group.differs_in)
        parts.append(f"differs from {_short(group.differs_from)} in {keys}")
    return parts


def title_suffix(group: GgufRows) -> str:
    """``  (and Q5_K_M.gguf, Q8_0.gguf: the same stop keys)`` or ``  (differs from X in:
    keys)``: what the block stands for."""
    parts = group_parts(group)
    return f"  ({'; '.join(parts)})" if parts else ""


def header_lines(rows: RepoRows) -> list[str]:
    """Why a pull request cannot fix the planned keys, and what works today."""
    group = rows.gguf
    if not rows.changes or group is None or group.new_file is None:
        return []
    lines = [
        (
            "  header        no pull request can change a GGUF header (llama.cpp and LM Studio "
            "read it): the repo needs a new file, made from a downloaded copy with "
            f"{group.new_file}"
        )
    ]
    if group.until_fixed is not None:
        lines.append(f"  until then    {group.until_fixed}")
    return lines


def _json(items: Sequence[str]) -> str:
    return json.dumps(list(items), ensure_ascii=False)


def params_source(ollama: OllamaHubRow) -> str:
    """Where ``ollama run hf.co/...`` takes its stop list from, in words."""
    if ollama.from_file:
        return "the repo's params file"
    return f"the Hub's conversion of the chat template ({ollama.conversion})"


def params_change(ollama: OllamaHubRow) -> str:
    """What the planned params file changes: ``dropping [...], which cut replies; adding
    [...]``."""
    what = []
    if ollama.removed:
        when = " in ollama before 0.30" if ollama.removed_only_before_030 else ""
        what.append(f"dropping {_json(ollama.removed)}, which cut replies{when}")
    if ollama.added:
        what.append(f"adding {_json(ollama.added)}")
    return "; ".join(what)


def ollama_lines(ollama: OllamaHubRow | None) -> list[str]:
    """What ``ollama run hf.co/...`` gets, and the params file a pull request would write."""
    if ollama is None:
        return []
    line = f"  ollama hf.co  stop {_json(ollama.stop)} from {params_source(ollama)}"
    if ollama.problem:
        line += f"; ollama refuses that file: {ollama.problem}"
    lines = [line]
    if ollama.after is not None:
        lines.append(
            f"  params        a pull request can set the repo's params file to stop "
            f"{_json(ollama.after)} ({params_change(ollama)}; every other key kept)"
        )
        if ollama.control:
            lines.append(
                f"                ollama 0.30 and later never match {_json(ollama.control)} as "
                "a stop string (llama-server drops a control token's text): only the header's "
                "keys make it stop there"
            )
    return lines


def params_pr_description(r: RepoResult) -> str:
    """The body of the pull request that sets a GGUF repo's ``params`` file (what ``ollama
    run hf.co/...`` stops on): what was wrong, the file before and after, what the PR cannot
    change (the header) and what works for it today, how to verify. Every text from the repo
    goes through ``eosfix.render.markdown``."""
    from eosfix.render.markdown import code, fenced

    ollama, group, hub = r.ollama_hub, r.gguf, r.hub
    assert ollama is not None
    assert group is not None
    assert hub is not None
    planned = ollama.plan
    assert planned is not None
    repo = hub.repo_id
    tag = group.quant or _short(group.file)

    def listed(items: Sequence[str]) -> str:
        return ", ".join(code(s) for s in items)

    source = (
        "the repo's `params` file"
        if ollama.params.from_file
        else "the Hub's conversion of the GGUF's chat template (`@huggingface/ollama-utils`)"
    )
    wrong = [f"`ollama run hf.co/{repo}` takes its stop list from {source}"]
    if planned.removed:
        wrong.append(
            f"that list holds {listed(planned.removed)}, which the chat template writes "
            "inside a reply, so ollama cuts replies there"
        )
    if planned.added:
        wrong.append(
            f"nothing in it or in the file's end-of-generation set stops at "
            f"{listed(planned.added)}, which ends every assistant turn, so generation runs "
            "on into the next turn"
        )
    lines = ["; ".join(wrong) + ".", ""]
    lines.append(
        f"This pull request {'updates' if planned.old is not None else 'adds'} the repo's "
        f"`params` file (ollama's parameters for `hf.co/` models): its `stop` list becomes "
        f"{listed(planned.after)}; every other key is kept."
    )
    lines.append("")
    if planned.old is not None:
        lines += ["Before:", "", *fenced(planned.old.rstrip("\n"), "json"), ""]
    lines += ["After:", "", *fenced(planned.new.rstrip("\n"), "json"), ""]
    if ollama.control:
        lines += [
            (
                f"ollama 0.30 and later never match {listed(ollama.control)} as a stop string "
                "(llama-server drops a control token's text): for them only the GGUF header's keys "
                "make it stop there."
            ),
            "",
        ]
    flags = override_kv(r)
    if r.patches:
        lines += [
            (
                "The GGUF header (what llama.cpp and LM Studio read) is not changed by a pull "
                "request: that takes a new file. Until then, llama.cpp stops there with:"
            ),
            "",
            *fenced(f"llama-server -hf {repo}:{tag} {' '.join(flags)}".rstrip(), "sh"),
            "",
        ]
    lines += [
        "### Check it",
        "",
        "After merging, pull the model again and look at the parameters ollama got:",
        "",
        *fenced(
            f"ollama pull hf.co/{repo}:{tag}\nollama show --parameters hf.co/{repo}:{tag}", "sh"
        ),
        "",
        (
            "<sub>Prepared with eosfix, which reads a repo's chat template and tokenizer "
            "and changes nothing but the stop list.</sub>"
        ),
    ]
    return "\n".join(lines)
