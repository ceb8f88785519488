"""The bot's journal: what a restart finds pending, and a file that stays small."""

from __future__ import annotations

import json

from eosfix.serve.journal import Journal, Outcome, new_push


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


def test_the_file_stays_small_while_the_bot_runs(tmp_path):
    """Thousands of pushes over a few repos: the file is compacted as it grows, to what is
    pending and each repo's last outcomes."""
    journal = Journal(tmp_path)
    for n in range(1500):
        push = new_push(f"org/m{n % 10}", f"{n:040x}", "refs/heads/main")
        journal.accept(push)
        journal.finish(push, Outcome("checked"))
    assert len(_lines(journal)) <= 512
    last = new_push("org/m0", "f" * 40, "refs/heads/main")
    journal.accept(last)
    journal.close()
    again = Journal(tmp_path)
    assert again.pending == {"org/m0": last}
    assert again.last_outcome("org/m9", f"{1499:040x}") == Outcome("checked")
    assert len(_lines(again)) <= 10 * 8 + 1  # a few outcomes per repo, and the pending push
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
