"""The body of a fix pull request, in Markdown: what ends a turn (with the rendered evidence),
what the configuration said, what is removed and why, the diff, and the runtimes before and
after. ``eosfix.sources.hubwrite`` sends it as it is given.
"""

from __future__ import annotations

from eosfix.core.repo import GENERATION_CONFIG
from eosfix.decide.check import RepoCheck
from eosfix.decide.stopids import IN_TURN_KIND, ORDINARY
from eosfix.decide.verdicts import RuntimeTable
from eosfix.pipeline import RepoResult
from eosfix.render.report import placement_text, runtimes_line


def pr_description(result: RepoResult) -> str:
    """The PR body: what ends a turn (evidence), what the config said, what is removed and
    why (evidence), the diff, the runtimes before and after."""
    check = result.check
    assert check is not None
    lines = [
        (
            "This pull request was opened by [eosfix](https://pypi.org/project/eosfix/). It "
            "changes only `eos_token_id` in `generation_config.json`, so that generation stops "
            "where the chat template ends an assistant turn, and nowhere inside one."
        ),
        "",
        "### What ends an assistant turn",
        "",
    ]
    have = set(check.stop.ids or ())
    for t in check.terminators.terminators:
        templates = ", ".join(t.templates)
        added = " **Added by this PR.**" if t.id is not None and t.id not in have else ""
        lines.append(
            f"- `{t.content}` ({t.id_str}): {placement_text(t)} "
            f"(template {templates}, probe `{t.probe}`).{added} Rendered:"
        )
        lines += _fenced(t.evidence)
    lines += [
        "",
        "### What the configuration said",
        "",
        f"`eos_token_id` = `{check.stop.raw}` (from `{check.stop.source}`).",
        "",
    ]
    lines += [f"- **{f.code}** `{f.file}`: `{f.message}`" for f in check.findings]
    lines += _removed_lines(check)
    lines += ["", "### What changes", "", "```diff"]
    lines += [p.diff().rstrip("\n") for p in result.patches if p.file == GENERATION_CONFIG]
    lines += ["```", "", "### Which runtimes this affects", ""]
    if result.runtimes is not None:
        lines += _runtime_lines(result.runtimes)
    return "\n".join(lines)


def _fenced(text: str) -> list[str]:
    if not text:
        return []
    return ["", "  ```text", *(f"  {line}" for line in text.splitlines()), "  ```"]


def _removed_lines(check: RepoCheck) -> list[str]:
    """Each id the PR takes out of the list: which token it is, and why it must go."""
    kept = set(check.proposed or ())
    removed = [i for i in dict.fromkeys(check.stop.ids or ()) if check.proposed and i not in kept]
    if not removed:
        return []
    lines = ["", "### What is removed, and why", ""]
    for token_id in removed:
        s = check.review.by_id(token_id)
        if s is None:
            continue
        if s.kind == IN_TURN_KIND:
            lines.append(
                f"- `{s.token}` (id {s.id}): the chat template writes it *inside* an assistant "
                f"turn ({s.reason}), so generation that stops there ends the reply before it "
                "is complete. Rendered:"
            )
            lines += _fenced(s.evidence)
        elif s.kind == ORDINARY:
            lines.append(
                f"- `{s.text}` (id {s.id}): an ordinary text token, not a special or added "
                f"token: {s.reason}."
            )
        else:
            lines.append(f"- `{s.id}`: no token has this id ({s.reason}); it never fires.")
    lines.append("")
    lines.append("The other ids keep their order; the tokenizer's `eos_token` is never removed.")
    return lines


def _runtime_lines(table: RuntimeTable) -> list[str]:
    head = "| runtime | reads | stops at every turn end now | stops inside a reply now |"
    lines = [f"{head} after this PR |", "| --- | --- | --- | --- | --- |"]
    for row in table.rows:
        if row.runtime in table.not_applicable:
            lines.append(f"| {row.runtime} | {row.reads} | n/a (no config.json) | | |")
            continue
        # a pipe splits a table cell even inside a code span unless escaped
        early = ", ".join(f"`{text}`".replace("|", "\\|") for text in row.early_before) or "no"
        stops = _yes(not row.misses_before)
        lines.append(f"| {row.runtime} | {row.reads} | {stops} | {early} | {_yes(row.ok_after)} |")
    return [*lines, "", runtimes_line(table), ""]


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"
