"""The bot's journal: what a restart finds pending, and a file that stays small."""

from __future__ import annotations

import json

from eosfix.serve import journal as journal_module
from eosfix.serve.journal import KEEP, Journal, Outcome, new_push


def _lines(journal: Journal) -> list[dict]:
    return [json.loads(line) for line in journal.path.read_text().splitlines()]


def test_a_push_older_than_one_handled_is_not_pending(tmp_path):
    """A journal written by a bot that never recorded superseded pushes: push A handled, B
    replaced by C while it waited, C handled. Only C's outcome counts; nothing is pending."""
    journal = Journal(tmp_path)
    a, b, c = (new_push("org/x", s * 40, "refs/heads/main") for s in "abc")
    for push in (a, b, c):
        journal.accept(push)
    journal.finish(a, Outcome("pr_opened", pr="u"))
    journal.finish(c, Outcome("pr_updated", pr="u"))
    journal.close()
    again = Journal(tmp_path)
    assert again.pending == {}
    again.close()


def test_only_the_newest_pending_push_of_a_repo_is_pending(tmp_path):
    journal = Journal(tmp_path)
    pushes = [new_push("org/x", s * 40, "refs/heads/main") for s in "abc"]
    other = new_push("org/y", "d" * 40, "refs/heads/main")
    for push in [*pushes, other]:
        journal.accept(push)
    journal.close()
    again = Journal(tmp_path)
    assert again.pending == {"org/x": pushes[-1], "org/y": other}
    again.close()


def test_the_file_is_compacted_to_pending_pushes_and_recent_outcomes_as_it_grows(
    tmp_path, monkeypatch
):
    """Many pushes over two repos: whenever the file has grown to four times what it must keep
    (at least ``COMPACT_AT`` lines), it is rewritten to what is pending and each repo's last
    ``KEEP`` outcomes. ``COMPACT_AT`` is lowered so a few hundred fsynced writes cross the
    threshold several times."""
    monkeypatch.setattr(journal_module, "COMPACT_AT", 16)
    most = 4 * (2 * KEEP + 1)  # two repos' outcomes and the one push in flight
    journal = Journal(tmp_path)
    longest = 0
    for n in range(100):
        push = new_push(f"org/m{n % 2}", f"{n:040x}", "refs/heads/main")
        journal.accept(push)
        journal.finish(push, Outcome("checked"))
        longest = max(longest, len(_lines(journal)))
    assert most < 2 * 100  # the writes would outgrow the bound without compaction
    assert longest <= most
    last = new_push("org/m0", "f" * 40, "refs/heads/main")
    journal.accept(last)
    journal.close()
    again = Journal(tmp_path)
    assert again.pending == {"org/m0": last}
    assert again.last_outcome("org/m1", f"{99:040x}") == Outcome("checked")
    assert again.last_outcome("org/m1", f"{99 - 2 * KEEP:040x}") is None  # older than KEEP
    assert len(_lines(again)) == 2 * KEEP + 1  # each repo's last outcomes, the pending push
    again.close()


def test_a_torn_last_line_is_ignored(tmp_path):
    journal = Journal(tmp_path)
    push = new_push("org/x", "a" * 40, "refs/heads/main")
    journal.accept(push)
    journal.close()
    with journal.path.open("a") as f:
        f.write('{"op": "push", "id": "x", "repo"')
    again = Journal(tmp_path)
    assert again.pending == {"org/x": push}
    again.close()
