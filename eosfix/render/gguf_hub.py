"""What a GGUF file on the Hub adds to its text block: which files it stands for, why no pull
request can fix its header (and what works today), and what ``ollama run hf.co/...`` gets.

Everything comes from the result's typed fields (``hub``, ``gguf``, ``ollama_hub``: made by
``eosfix.targets.gguf_hub``): this module formats.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from eosfix.result import RepoResult

SHOWN = 6  # alike files named in the title before "and N more"


def is_hub_gguf(r: RepoResult) -> bool:
    """A GGUF file read on the Hub (``eosfix.targets.gguf_hub``)."""
    return r.container == "gguf" and r.gguf is not None and r.hub is not None


def _short(path: str) -> str:
    return path.rpartition("/")[2]


def _files(paths: Sequence[str]) -> str:
    shown = ", ".join(_short(p) for p in paths[:SHOWN])
    more = len(paths) - SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def title_suffix(r: RepoResult) -> str:
    """``  (and Q5_K_M.gguf, Q8_0.gguf: the same stop keys)`` or ``  (differs from X in:
    keys)``: what the block stands for."""
    group = r.gguf
    assert group is not None
    alike = group.alike
    parts = []
    if group.default_for:
        who = {"llama.cpp": "llama.cpp -hf", "ollama": "ollama run hf.co"}
        parts.append(f"what {' and '.join(who[p] for p in group.default_for)} load without a tag")
    if alike:
        parts.append(f"and {_files(alike)}: the same stop keys")
    if group.differs_from:
        keys = ", ".join(group.differs_in)
        parts.append(f"differs from {_short(group.differs_from)} in {keys}")
    return f"  ({'; '.join(parts)})" if parts else ""


def override_kv(r: RepoResult) -> list[str]:
    """``--override-kv KEY=int:VALUE`` for each planned key edit llama.cpp can take that way
    (an id key; ollama's eos_token_ids list is no scalar)."""
    out = []
    for p in r.patches:
        data = p.as_json()
        if isinstance(data.get("new"), int) and str(data.get("key", "")).endswith("_token_id"):
            out.append(f"--override-kv {data['key']}=int:{data['new']}")
    return out


def header_lines(r: RepoResult) -> list[str]:
    """Why a pull request cannot fix the planned keys, and what works today."""
    if not r.patches:
        return []
    assert r.gguf is not None
    assert r.hub is not None
    name = _short(r.gguf.file)
    fixed = name.removesuffix(".gguf") + ".fixed.gguf"
    lines = [
        (
            "  header        no pull request can change a GGUF header (llama.cpp and LM Studio "
            "read it): the repo needs a new file, made from a downloaded copy with "
            f"eosfix fix {shlex.quote(name)} --output {shlex.quote(fixed)}"
        )
    ]
    flags = override_kv(r)
    if flags:
        tag = r.gguf.quant or name
        repo = f"{r.hub.repo_id}:{tag}"
        lines.append(f"  until then    llama-server -hf {repo} {' '.join(flags)}")
    return lines


def _json(items: Sequence[str]) -> str:
    return json.dumps(list(items), ensure_ascii=False)


def ollama_lines(r: RepoResult) -> list[str]:
    """What ``ollama run hf.co/...`` gets, and the params file a pull request would write."""
    ollama = r.ollama_hub
    if ollama is None:
        return []
    params = ollama.params
    conversion = params.conversion.path if params.conversion is not None else None
    source = (
        "the repo's params file"
        if params.from_file
        else f"the Hub's conversion of the chat template ({conversion})"
    )
    line = f"  ollama hf.co  stop {_json(params.stop)} from {source}"
    if params.problem:
        line += f"; ollama refuses that file: {params.problem}"
    lines = [line]
    planned = ollama.plan
    if planned:
        what = []
        if planned.removed:
            when = " in ollama before 0.30" if planned.removed == ollama.removed_control else ""
            what.append(f"dropping {_json(planned.removed)}, which cut replies{when}")
        if planned.added:
            what.append(f"adding {_json(planned.added)}")
        lines.append(
            f"  params        a pull request can set the repo's params file to stop "
            f"{_json(planned.after)} ({'; '.join(what)}; every other key kept)"
        )
        hidden = ollama.control
        if hidden:
            lines.append(
                f"                ollama 0.30 and later never match {_json(hidden)} as a stop "
                "string (llama-server drops a control token's text): only the header's keys "
                "make it stop there"
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
