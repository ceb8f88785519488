"""What users read is true and reads right: summaries, the state after fix, runtime
caveats, suggested commands, explain's evidence, exit codes, colour, --quiet, pipes."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from eosfix import api
from eosfix.analysis.positions import SpecialScanner
from eosfix.analysis.terminators import _evidence
from eosfix.cli import cli, main
from tests.conftest import CORPUS, ROOT, SAMPLES, corpus_cases, sample_names
from tests.support.cachebuilder import CacheBuilder, chatml_files


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _line(out: str, label: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(f"  {label}")]


# --- summaries --------------------------------------------------------------------------------


def test_summaries_agree_in_number(sample_repo, capsys):
    one = sample_repo("llama3-healthy")
    _, out, _ = _run(capsys, "check", one)
    assert out.splitlines()[-1] == "1 repo stops correctly (runtime caveats above)"
    two = sample_repo("chatml-missing-im-end")
    (two / "generation_config.json").write_text('{"eos_token_id": [248044, 248046]}\n')
    _, out, _ = _run(capsys, "check", one, two)
    assert out.splitlines()[-1] == "2 repos stop correctly (runtime caveats above)"
    _, out, _ = _run(capsys, "fix", one)
    assert out.splitlines()[-1] == "1 repo already stops correctly (runtime caveats above)"


def test_cache_summary_agrees_in_number(tmp_path, capsys):
    b = CacheBuilder(tmp_path)
    b.add_revision("o/good", chatml_files(10, healthy=True))
    _, out, _ = _run(capsys, "cache", "--cache-dir", tmp_path)
    assert out.splitlines()[-1] == "1 snapshot of 1 repo: 1 stops correctly"
    b.add_revision("o/good2", chatml_files(20, healthy=True))
    _, out, _ = _run(capsys, "cache", "--cache-dir", tmp_path)
    assert out.splitlines()[-1] == "2 snapshots of 2 repos: 2 stop correctly"


def test_cache_table_says_not_set_never_from_none(tmp_path, capsys):
    b = CacheBuilder(tmp_path)
    files = chatml_files(10, generation_config=False)
    files["config.json"] = '{"model_type": "qwen2"}\n'
    b.add_revision("o/none", files)
    _, out, _ = _run(capsys, "cache", "--cache-dir", tmp_path)
    assert "(not set)" in out
    assert "(from none)" not in out


# --- fix reports the state after writing ------------------------------------------------------


def test_fix_text_tells_before_written_and_now(sample_repo, capsys):
    repo = sample_repo("chatml-missing-im-end")
    code, out, _ = _run(capsys, "fix", repo, "--config-json")
    assert code == 1
    assert out.splitlines() == [
        str(repo),
        "  ends a turn   <|im_end|>  id 248046, written after every reply (template default)",
        "  stopped on    248044  (from generation_config.json, before the fix)",
        (
            f"  fixed         {repo}/generation_config.json: EOS001 eos_token_id 248044 does not "
            "include <|im_end|> (248046): generation runs past the turn end"
        ),
        (
            "  wrote         eos_token_id -> [248044, 248046]; config.json: eos_token_id -> "
            "[248044, 248046]"
        ),
        "  stops on      [248044, 248046]  (from generation_config.json)",
        "  runtimes      10 of 11 stop at every terminator and never inside a reply; caveats below",
        (
            "  caveat        ExLlamaV2 keeps only config.json's first id, 248044, so it misses "
            "<|im_end|> (248046) (eosfix keeps that id first: transformers pads with it)"
        ),
        "",
        "1 repo fixed",
    ]


def test_fix_json_status_is_after_writing(sample_repo, capsys):
    repo = sample_repo("no-generation-config")
    _, out, _ = _run(capsys, "fix", repo, "--format", "json")
    (entry,) = json.loads(out)["repos"]
    assert (entry["status"], entry["written"]) == ("ok", ["generation_config.json"])
    assert entry["eos_token_id_source"] == "generation_config.json"
    assert entry["before"]["status"] == "fixable"
    assert entry["before"]["eos_token_id_source"] == "config.json"
    assert [f["code"] for f in entry["findings"]] == []
    (tf,) = [r for r in entry["runtimes"] if r["runtime"] == "transformers"]
    assert tf["ok_before"]
    assert tf["ok_after"]


# --- runtime caveats, runtimes that cannot load the folder ------------------------------------


def test_healthy_repo_has_caveats_not_a_failing_verdict(capsys):
    _, out, _ = _run(capsys, "check", SAMPLES / "llama3-healthy")
    assert "would not stop" not in out
    assert _line(out, "runtimes") == [
        "  runtimes      10 of 11 stop at every terminator and never inside a reply; caveats below"
    ]
    assert _line(out, "caveat") == [
        (
            "  caveat        ExLlamaV2 keeps only config.json's first id, 128001, so it misses "
            "<|eot_id|> (128009) (eosfix keeps that id first: transformers pads with it)"
        )
    ]
    assert out.splitlines()[-1] == "1 repo stops correctly (runtime caveats above)"


def test_runtimes_without_config_json_are_not_applicable(sample_repo, capsys):
    repo = sample_repo("glm-next-turn-opener")  # no config.json
    _, out, _ = _run(capsys, "check", repo)
    (line,) = _line(out, "runtimes")
    assert line.endswith("not applicable without config.json: candle, ExLlamaV2)")
    assert "no config.json here" not in line
    _, out, _ = _run(capsys, "check", repo, "--format", "json")
    rows = {r["runtime"]: r["applicable"] for r in json.loads(out)["repos"][0]["runtimes"]}
    assert [n for n, ok in rows.items() if not ok] == ["candle", "ExLlamaV2"]
    _, out, _ = _run(capsys, "explain", repo)
    (candle,) = [ln for ln in out.splitlines() if ln.startswith("  candle ")]
    assert candle.count("n/a (no config.json)") == 3  # now, after fix, with --config-json


# --- suggested commands and --help ------------------------------------------------------------


def test_suggested_command_keeps_flags_and_is_shell_quoted(tmp_path, capsys):
    repo = tmp_path / "my model"
    import shutil

    shutil.copytree(SAMPLES / "chatml-missing-im-end", repo, ignore=shutil.ignore_patterns("fixed"))
    _, out, _ = _run(capsys, "check", repo, "--config-json", "--runtime", "mlx-lm==0.31.3")
    (fix,) = _line(out, "fix ")
    assert fix.endswith(f"(run: eosfix fix '{repo}' --config-json --runtime mlx-lm==0.31.3)")
    assert "config.json: eos_token_id -> [248044, 248046]" in fix


def test_check_help_never_says_config_json_writes(run_eosfix):
    text = run_eosfix("check", "--help").stdout
    options = text[text.index("Options:") :]
    option = " ".join(options[options.index("--config-json") : options.index("--keep-id")].split())
    assert option.endswith("nothing is written.")
    assert "writes" not in option
    assert "Also write" in " ".join(run_eosfix("fix", "--help").stdout.split())


@pytest.mark.parametrize("command", ["check", "fix", "cache", "hub"])
def test_help_states_the_exit_code_rule(command, run_eosfix):
    text = " ".join(run_eosfix(command, "--help").stdout.split())
    assert "warnings alone too, unless --strict" in text
    assert "--strict" in text
    assert "--quiet" in text
    assert "--color" in text


# --- warnings: exit 0, --strict: exit 1 ---------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "fix"])
def test_warnings_only_exit_0_unless_strict(command, sample_repo, capsys):
    repo = sample_repo("plain-text-turns")  # EOS005: a stop string is needed
    code, out, _ = _run(capsys, command, repo)
    assert code == 0
    assert out.splitlines()[-1] == "1 repo with warnings only"
    code, _, _ = _run(capsys, command, repo, "--strict")
    assert code == 1


def test_strict_in_cache(tmp_path, capsys):
    b = CacheBuilder(tmp_path)
    files = chatml_files(10, healthy=True)
    files["chat_template.jinja"] = "{% for m in messages %}### {{ m.content }}\n{% endfor %}"
    b.add_revision("o/plain", files)
    code, out, _ = _run(capsys, "cache", "--cache-dir", tmp_path)
    assert (code, out.splitlines()[-1]) == (0, "1 snapshot of 1 repo: 1 with warnings only")
    assert _run(capsys, "cache", "--cache-dir", tmp_path, "--strict")[0] == 1


# --- --quiet ----------------------------------------------------------------------------------


def test_quiet_prints_only_problems_and_the_summary(capsys):
    code, out, _ = _run(
        capsys, "check", "--quiet", SAMPLES / "llama3-healthy", SAMPLES / "base-model",
        SAMPLES / "chatml-missing-im-end",
    )  # fmt: skip
    assert code == 1
    assert "llama3-healthy" not in out
    assert "base-model" not in out
    assert out.startswith(f"{SAMPLES}/chatml-missing-im-end\n")
    assert out.splitlines()[-1] == (
        "1 repo would be fixed, 1 repo stops correctly, 1 repo without a chat template"
    )


# --- explain ----------------------------------------------------------------------------------


def test_evidence_is_cut_at_lines_never_inside_a_token_or_word():
    text = "<|im_start|>user\nEosfixuser1<|im_end|>\n<|im_start|>assistant\nEosfixassistant1<|im_end|>\n"
    scanner = SpecialScanner(["<|im_start|>", "<|im_end|>"])
    start = text.rindex("<|im_end|>")
    ev = _evidence(text, start, start + len("<|im_end|>"), scanner.find(text))
    assert ev == "…<|im_start|>assistant\nEosfixassistant1<|im_end|>\n"
    one_line = "x" * 30 + "<|a|>" + "Wordy" * 12 + "<|b|>" + "tail" * 20
    scanner = SpecialScanner(["<|a|>", "<|b|>"])
    start = one_line.index("<|b|>")
    ev = _evidence(one_line, start, start + 5, scanner.find(one_line))
    assert ev.startswith("…")
    assert ev.endswith("…")
    assert "<|b|>" in ev
    assert not ev.startswith("…|")
    assert "ordy" not in ev[:5]


def _special_fragment(text: str, tokens: list[str]) -> bool:
    """A control token cut at either end of ``text``."""
    body = text.strip("…")
    return any(
        (tok[k:] and body.startswith(tok[k:]) and k > 0)
        or (body.endswith(tok[:k]) and 0 < k < len(tok))
        for tok in tokens
        for k in range(1, len(tok))
    )


@pytest.mark.parametrize(
    "folder",
    [SAMPLES / n for n in sample_names()] + [CORPUS / n for n in corpus_cases()],
    ids=lambda p: p.name,
)
def test_every_evidence_holds_whole_tokens(folder, capsys):
    result = api.check(folder)
    assert result.check is not None
    tokens = [t for t in result.check.repo.iter_special_strings() if len(t) > 2]
    for t in (*result.check.terminators.terminators, *result.check.terminators.additional):
        assert not _special_fragment(t.evidence, tokens), t.evidence


def test_explain_layout(capsys):
    _, out, _ = _run(capsys, "explain", SAMPLES / "chatml-missing-im-end")
    lines = out.splitlines()
    assert "  15 probes (message shapes eosfix tries): 10 rendered, 5 refused" in lines
    assert (
        "  same text as an earlier probe (folded): final+tools = final, final+documents = final, "
        "final+reasoning = final, history+tools = history"
    ) in lines
    assert (
        "  not shown (--format json has every text): final+functions, history+system, "
        "tool_call+empty_content"
    ) in lines
    assert (
        "  refused (expected: a template accepts only some message shapes; each refusal is "
        "evidence, not an error):"
    ) in lines
    i = lines.index(
        "<|im_end|> ends a turn (turn end): written after every reply; seen in probe default/final:"
    )
    assert lines[i + 1 : i + 4] == [
        "  | …<|im_start|>assistant\\n",
        "  | Eosfixassistant1<|im_end|>\\n",
        "  id 248046 from tokenizer_config.json",
    ]
    assert "  --- generation prompt (what add_generation_prompt=True appends) ---" in lines
    # one convention: every rendered line is quoted, its newline shown as \n at its end
    quoted = [ln for ln in lines if ln.startswith("  | ")]
    assert quoted
    assert all("\\n" not in ln[:-2] for ln in quoted)
    payload = json.loads(
        _run(capsys, "explain", SAMPLES / "chatml-missing-im-end", "--format", "json")[1]
    )
    (term,) = payload["terminators"]
    assert term["evidence"] == "…<|im_start|>assistant\nEosfixassistant1<|im_end|>\n"


def test_explain_base_model_says_so_plainly(capsys):
    code, out, _ = _run(capsys, "explain", SAMPLES / "base-model")
    assert code == 0
    assert out == (
        f"{SAMPLES}/base-model: no chat template: nothing to check (fine for a base model; a "
        "chat model without one has lost its template)\n\n"
    )


# --- colour, progress bars, pipes -------------------------------------------------------------


def _colored(args, env=None, color=True):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env, color=color)
    return "\x1b[" in result.output


CHATML = SAMPLES / "chatml-missing-im-end"


def test_color_follows_the_terminal_unless_told():
    assert _colored(["check", CHATML])  # a terminal: styled
    assert not _colored(["check", CHATML], color=False)  # piped: plain
    assert not _colored(["check", CHATML], env={"NO_COLOR": "1"})
    assert _colored(["check", CHATML], env={"NO_COLOR": ""})  # empty: not set
    assert not _colored(["check", CHATML], env={"TERM": "dumb"})
    assert not _colored(["check", CHATML, "--color", "never"])
    assert not _colored(["--color", "never", "check", CHATML])
    assert _colored(["check", CHATML, "--color", "always"], color=False)
    assert _colored(["check", CHATML, "--color", "always"], env={"NO_COLOR": "1"})


def test_no_progress_bar_with_no_color_or_a_dumb_terminal(monkeypatch):
    from eosfix.cli import batch, term

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert batch.wants_progress("text")
    assert term.progress_allowed()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not batch.wants_progress("text")
    assert not term.progress_allowed()
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not batch.wants_progress("json")
    assert not term.progress_allowed()


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_exit_code_survives_a_closed_pipe(fmt):
    args = [sys.executable, "-m", "eosfix", "check", "--format", fmt]
    args += [str(SAMPLES / n) for n in sample_names()] * 40  # far more than a pipe holds
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()  # the reader goes away, as `head` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 1
    assert "BrokenPipeError" not in err
    assert "internal error" not in err


def test_exit_code_survives_head_in_a_shell():
    script = (
        f"{sys.executable} -m eosfix check {' '.join(str(SAMPLES / n) for n in sample_names())} "
        '| head -1; echo "status=${PIPESTATUS[0]}"'
    )
    out = subprocess.run(
        ["bash", "-c", script], check=False, capture_output=True, text=True, env=_env(), timeout=120
    )
    assert out.stdout.splitlines()[-1] == "status=1"
    assert "Traceback" not in out.stderr
    assert "Broken" not in out.stderr


# --- the cache table --------------------------------------------------------------------------


def test_cache_table_never_breaks_repo_ids_mid_word():
    from rich.console import Console

    from eosfix.batch.run import Row
    from eosfix.cli.batch import fit_repo_id, print_table

    long_id = "Qwen/Qwen3-VeryLongModelName-Instruct-2507-FP8-dynamic"
    assert fit_repo_id("org/m", 10) == "org/m"
    assert fit_repo_id(long_id, 30) == "Qwen/\nQwen3-VeryLongModelName-Instr…"
    rows = [
        Row(long_id, "98ad1746 (main)", "<|im_end|> 151645", "151643", "fixable", " -> [1, 2]"),
        Row("mistralai/Mistral-7B-Instruct-v0.3", "293b9bbc (main)", "-", "2", "ok", ""),
    ]
    ids = [r.repo_id for r in rows]
    allowed = {*ids, *(p for rid in ids for p in (rid.split("/")[0] + "/", rid.split("/")[1]))}
    for width in (60, 80, 100, 200):
        sink = io.StringIO()
        console = Console(width=width, color_system=None, file=sink)
        print_table(rows, console)
        lines = sink.getvalue().splitlines()
        assert all(len(line) <= width and not line.endswith(" ") for line in lines)
        body = lines[next(i for i, ln in enumerate(lines) if "━" in ln) + 1 :]
        cells = [c for c in (ln.split("│")[0].strip() for ln in body) if c]
        assert cells, width
        for cell in cells:  # whole, or an org/name piece, or a piece's start with an ellipsis
            ok = cell in allowed or (
                cell.endswith("…") and any(p.startswith(cell[:-1]) for p in allowed)
            )
            assert ok, (width, cell)


def _table_rows(seed: int, n: int) -> list:
    """Rows of every verdict with ids, revisions and notes of varied widths: CJK and emoji
    (two cells each), combining marks, and now and then a tab or a long id."""
    import random

    from eosfix.batch.run import Row
    from eosfix.cli.batch import STYLE
    from eosfix.core.outcome import PROBLEMS

    rnd = random.Random(seed)
    words = ["org", "Qwen", "模型", "llama-3", "e\u0301t\u00e9", "🦙", "x" * 45, "a\tb", "mistral"]
    rows = []
    for i in range(n):
        verdict = rnd.choice(sorted(STYLE))
        problem = rnd.choice(sorted(PROBLEMS)) if verdict in ("fixable", "problems") else ""
        repo = f"{rnd.choice(words)}/{rnd.choice(words)}-{i}"
        terms = rnd.choice(["-", "<|im_end|> 151645", "<|im_end|> 7\n<|endoftext|> 2", "結束 9"])
        note = rnd.choice(["", " -> [1, 2]", ": config.json: not JSON", " -> [151643, 151645]"])
        pr = rnd.choice(["", "opened (#3)", "left open: someone else's (#12)"])
        rows.append(
            Row(repo, rnd.choice(["98ad1746 (main)", "d"]), terms, "2", verdict, note, pr, problem)
        )
    return rows


@pytest.mark.parametrize("styled", [False, True])
def test_cache_table_by_hand_is_what_rich_prints(styled, monkeypatch):
    """print_table writes the lines of a chunk whose cells all fit by hand (rich's layout
    costs ~0.25 ms a row): byte-equal to rich's table for every width, style, wide or
    combining character and pull-request column; chunks that do not fit go to rich."""
    from rich.console import Console

    from eosfix.cli import batch

    by_hand = batch._lines_by_hand
    taken = []

    def spy(*args):
        found = by_hand(*args)
        taken.append(found is not None)
        return found

    def printed(rows, width, hand):
        sink = io.StringIO()
        console = Console(
            file=sink, width=width, highlight=False, force_terminal=styled,
            color_system="truecolor" if styled else None, no_color=not styled,
        )  # fmt: skip
        monkeypatch.setattr(batch, "_lines_by_hand", spy if hand else lambda *a: None)
        batch.print_table(rows, console)
        return sink.getvalue()

    monkeypatch.setattr(batch, "CHUNK", 7)  # several chunks: the header only on the first
    for seed in range(12):
        rows = _table_rows(seed, 30)
        if seed % 3 == 0:  # every cell of some tables fits: no tab, no pull-request column
            rows = [
                dataclasses.replace(r, repo_id=r.repo_id.replace("\t", " "), terminators="-", pr="")
                for r in rows
            ]
        for width in (60, 100, 200, 300):
            assert printed(rows, width, True) == printed(rows, width, False), (seed, width)
    assert any(taken)  # chunks that fit were written by hand...
    assert not all(taken)  # ...and the others by rich


# --- wording ----------------------------------------------------------------


def test_keep_id_not_in_the_list_is_said(sample_repo, run_eosfix):
    repo = sample_repo("ordinary-stop-id")
    out = run_eosfix("check", repo, "--keep-id", "2", "--keep-id", "999").stdout
    assert (
        "  keep          --keep-id 999: 999 is not a stop id of this repo, so it keeps nothing"
        in (out)
    )
    assert "--keep-id 2:" not in out  # 2 is listed: it is kept, as the finding says


def test_runtimes_cut_alike_share_one_caveat_line(sample_repo, run_eosfix):
    """--keep-id an in-turn id: six runtimes stop inside the turn, one line says so (there
    were six near-identical lines)."""
    out = run_eosfix("check", sample_repo("stop-inside-turn"), "--keep-id", "200007").stdout
    caveats = [ln.strip() for ln in out.splitlines() if ln.startswith("  caveat")]
    # the two runtimes that keep one id miss <|call|> (their own lines, by their rules); the
    # six that stop inside the turn share one
    assert caveats == [
        (
            "caveat        TGI-transformers would not stop on <|call|> (200012): it stops only "
            "on the tokenizer's eos_token"
        ),
        (
            "caveat        ExLlamaV2 would not stop on <|call|> (200012) (config.json (first "
            "id), else tokenizer eos, else 2)"
        ),
        "caveat        transformers, vLLM, SGLang, TGI, mlx-lm, mlx-vlm stop inside a turn at <|end|>",
    ]


def test_runtimes_a_fix_cannot_reach_are_told_why_and_what_would(sample_repo, run_eosfix):
    """The VLM sample: candle and ExLlamaV2 read config.json's top level, where no id is (the
    ids are under text_config), and fix --config-json edits only ids already there: say so,
    and what would make them stop (it said "after fix: candle, ExLlamaV2" and nothing more)."""
    repo = sample_repo("vlm-text-config-eos")
    why = (
        "candle, ExLlamaV2 read only config.json's top-level eos_token_id, which is not set (its "
        "ids are under text_config), so they miss <|im_end|> (151645); fix --config-json edits "
        'only ids already there: add "eos_token_id": [151645] at config.json\'s top level to '
        "make them stop"
    )
    tgi = "TGI-transformers: it stops only on the tokenizer's eos_token"  # its rule
    after = f"still run on after fix: TGI-transformers, candle, ExLlamaV2 ({why}; {tgi})"
    assert after in run_eosfix("check", repo).stdout
    before = (repo / "config.json").read_bytes()
    fixed = run_eosfix("fix", "--config-json", repo)
    assert (repo / "config.json").read_bytes() == before  # left alone...
    assert f"  caveat        {why}" in fixed.stdout  # ...and the output says why


def test_every_format_option_has_help():
    import click

    from eosfix.cli import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        for param in cmd.params:
            if isinstance(param, click.Option) and "--format" in param.opts:
                assert param.help, name
