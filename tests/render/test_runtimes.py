"""Per-runtime verdicts in `check` (one line, JSON "runtimes") and `explain` (the full table)."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from eosfix import api
from eosfix.containers.folder.plan import plan_config
from eosfix.containers.folder.runtime_table import runtime_table, stop_inputs
from eosfix.ports.loop import split_probe, tokenize_probe
from eosfix.render.report import runtimes_line
from eosfix.runtimes import RUNTIMES, apply_generation_config_eos, describe
from tests.conftest import CORPUS, SAMPLES, corpus_cases, sample_names
from tests.support.tiny_lm import save_tokenizer, word_level_tokenizer

NAMES = [rt.name for rt in RUNTIMES]
WITH_TEMPLATE = [n for n in sample_names() if n != "base-model"]


def _check(path, **kw):
    result = api.check(path, **kw)
    assert result.check is not None
    return result


def test_chatml_missing_im_end_line():
    r = _check(SAMPLES / "chatml-missing-im-end")
    line = runtimes_line(runtime_table(r.check, r.patches))
    # mlx-lm >= 0.32.0 and mlx-vlm >= 0.7.0 add the tokenizer's eos (<|im_end|> here)
    assert line == (
        "run on now: transformers, candle, ExLlamaV2; "
        "still run on after fix: candle, ExLlamaV2 (candle: use --config-json; "
        "ExLlamaV2 stops only on config.json's first id, 248044)"
    )


def test_the_line_says_when_each_list_holds():
    """Every list of runtimes on the line says whether it holds now or after the fix: what
    the fix leaves never reads as what it repairs ("after fix: candle, ExLlamaV2" did)."""
    cases = ["chatml-missing-im-end", "stop-inside-turn", "ordinary-stop-id", "eos-token-variable"]
    for name in cases:
        r = _check(SAMPLES / name)
        line = runtimes_line(runtime_table(r.check, r.patches))
        lists = re.sub(r" \((?:[^()]|\([^()]*\))*\)$", "", line).split("; ")  # the why apart
        for part in lists:
            when, _, names = part.rpartition(": ")
            assert when.endswith((" now", " after fix")) or when == "after fix", (name, part)
            if when == "after fix":
                assert names in ("all stop", f"{names.split()[0]} stops"), (name, part)
        assert any(x.rpartition(": ")[0].endswith("after fix") for x in lists), line


def test_pr_description_table_says_what_its_last_column_means():
    from eosfix.render.pr import pr_description

    r = _check(SAMPLES / "chatml-missing-im-end")
    body = pr_description(r)
    table = body[body.index("| runtime |") :].splitlines()
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert head[-1] == ("after this pull request: stops at every turn end and never inside a reply")
    (candle,) = [ln for ln in table if ln.startswith("| candle |")]
    assert candle.rstrip(" |").endswith("**no**")  # the fix to generation_config.json only


def test_pinned_versions_name_the_version_in_the_line():
    r = _check(SAMPLES / "chatml-missing-im-end")
    pins = {"mlx-lm": "0.31.3", "mlx-vlm": "0.3.9"}
    line = runtimes_line(runtime_table(r.check, r.patches, pins))
    assert line == (
        "run on now: transformers, mlx-lm==0.31.3, mlx-vlm==0.3.9, candle, ExLlamaV2; "
        "still run on after fix: mlx-vlm==0.3.9, candle, ExLlamaV2 (mlx-vlm==0.3.9, candle: use "
        "--config-json; ExLlamaV2 stops only on config.json's first id, 248044)"
    )


def test_config_json_fixes_candle_and_warns_exllamav2_keeps_first_id():
    r = _check(SAMPLES / "chatml-missing-im-end", config_json=True)
    table = runtime_table(r.check, r.patches)
    assert table.config_json_written
    assert table.failing_after() == ["ExLlamaV2"]
    (exl,) = [row for row in table.rows if row.runtime == "ExLlamaV2"]
    assert exl.stops_after == {"<|im_end|>": False}
    assert "first id (248044)" in exl.note
    line = runtimes_line(table)
    assert line.endswith(
        "still run on after fix: ExLlamaV2 (ExLlamaV2 stops only on config.json's first id, 248044)"
    )


def test_after_inputs_are_the_planned_files():
    """``after`` reads the patched text; it agrees with the runtimes.py helpers."""
    r = _check(SAMPLES / "chatml-missing-im-end")
    before, after = stop_inputs(r.check), stop_inputs(r.check, r.patches)
    assert after == apply_generation_config_eos(before, r.check.proposed)
    cfg_patch = plan_config(r.check)
    assert cfg_patch is not None
    cfg_ids = json.loads(cfg_patch.new_text)["eos_token_id"]
    with_cfg = stop_inputs(r.check, [*r.patches, cfg_patch])
    assert with_cfg.config_eos == tuple(cfg_ids)
    assert with_cfg.config_eos[0] == 248044  # the original first id stays first
    assert with_cfg.generation_config_eos == tuple(r.check.proposed)


def test_no_generation_config_falls_back_to_config_json_before():
    r = _check(SAMPLES / "no-generation-config")
    table = runtime_table(r.check, r.patches)
    (tf,) = [row for row in table.rows if row.runtime == "transformers"]
    assert tf.stops_before == {"<|im_end|>": False}
    assert tf.stops_after == {"<|im_end|>": True}
    assert "transformers" not in table.failing_after()


def test_plain_text_turns_have_nothing_to_compare():
    r = _check(SAMPLES / "plain-text-turns")
    table = runtime_table(r.check, r.patches)
    assert all(v is None for row in table.rows for v in row.stops_before.values())
    assert runtimes_line(table).startswith("nothing to compare")


def test_healthy_repo_names_only_exllamav2():
    r = _check(SAMPLES / "llama3-healthy")
    assert runtimes_line(runtime_table(r.check, r.patches)) == (
        "run on now: ExLlamaV2 (ExLlamaV2 stops only on config.json's first id, 128001)"
    )


@pytest.mark.parametrize("name", WITH_TEMPLATE)
def test_check_text_has_runtimes_line(name, sample_repo, run_eosfix):
    out = run_eosfix("check", sample_repo(name)).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  runtimes      ")]
    assert "\x1b" not in line


@pytest.mark.parametrize("name", sample_names())
@pytest.mark.parametrize("flag", [(), ("--config-json",)], ids=["default", "config-json"])
def test_check_json_runtimes_key(name, flag, sample_repo, run_eosfix):
    payload = json.loads(run_eosfix("check", sample_repo(name), "--format", "json", *flag).stdout)
    (entry,) = payload["repos"]
    if entry["status"] == "no_template":
        assert entry["runtimes"] == []
        return
    assert [row["runtime"] for row in entry["runtimes"]] == NAMES
    contents = {t["content"] for t in entry["terminators"]}
    for row in entry["runtimes"]:
        assert set(row) == {
            "runtime",
            "version",
            "versions",
            "executed",
            "basis",
            "source",
            "reads",
            "stops_before",
            "stops_after",
            "stops_early_before",
            "stops_early_after",
            "ok_before",
            "ok_after",
            "note",
            "applicable",
        }
        assert row["version"] is None  # nothing pinned: each runtime's current rule
        cited = describe(row["runtime"]).cited
        if cited is not None:  # read at a commit, with lines: TGI's two paths
            assert row["executed"] is None
            assert row["basis"] == f"cited at {cited}"
        elif row["executed"] is None:
            assert row["basis"] == "modelled, not executed"
        else:
            assert row["basis"] == f"executed with {row['runtime']} {row['executed']}"
        assert set(row["stops_before"]) == set(row["stops_after"]) == contents
        assert row["ok_after"] == (
            all(v is not False for v in row["stops_after"].values())
            and not row["stops_early_after"]
        )
        # the fix only adds ids: a runtime that stops now still stops after
        assert all(row["stops_after"][c] for c, v in row["stops_before"].items() if v)
    tf = entry["runtimes"][0]
    assert (tf["versions"], tf["executed"]) == (">= 4.28.0", "5.24.0")
    vllm = entry["runtimes"][1]
    assert (vllm["versions"], vllm["basis"]) == ("not established", "executed with vLLM 0.33.0")
    tgi = entry["runtimes"][3]
    assert (tgi["runtime"], tgi["executed"]) == ("TGI", None)
    flash = "TGI db931fcf: flash_causal_lm.py:1232-1247, tokens.py:150-160,200"
    assert tgi["basis"] == f"cited at {flash}"
    if entry["status"] in ("fixable", "ok"):
        assert tf["ok_after"], "transformers must stop after the default fix"


@pytest.mark.parametrize("name", WITH_TEMPLATE)
def test_explain_shows_every_runtime(name, run_eosfix):
    out = run_eosfix("explain", SAMPLES / name).stdout
    table = out[out.index("Runtimes: does generation stop") :]
    for rt in NAMES:
        assert f"\n  {rt} " in table
    assert "fix --config-json" in table


@pytest.mark.parametrize("name", corpus_cases())
def test_corpus_check_and_explain_show_runtimes(name, run_eosfix):
    folder = CORPUS / name
    payload = json.loads(run_eosfix("check", folder, "--format", "json").stdout)
    (entry,) = payload["repos"]
    if entry["status"] == "no_template":
        return
    assert [row["runtime"] for row in entry["runtimes"]] == NAMES
    assert "  runtimes      " in run_eosfix("check", folder).stdout
    assert "Runtimes: does generation stop" in run_eosfix("explain", folder).stdout


def _with_word_tokenizer(repo):
    r = _check(repo)
    texts = [p.text for ta in r.check.terminators.templates for p in ta.rendered if p.text]
    added = {c: i.id for c, i in r.check.repo.added_tokens.items() if i.id is not None}
    save_tokenizer(word_level_tokenizer(texts, added), repo)
    return _check(repo)


def test_explain_tokenizes_probe_and_shows_where_loop_stops(sample_repo, run_eosfix):
    repo = sample_repo("chatml-missing-im-end")
    r = _with_word_tokenizer(repo)
    tp = tokenize_probe(r.check, [248044, 248046])
    assert tp is not None
    assert tp.reply_ids[tp.stop_at] == 248046
    assert tp.decoded_reply.endswith("<|im_end|>")
    assert tokenize_probe(r.check, [248044]).stop_at is None  # the unfixed loop never stops
    out = run_eosfix("explain", repo).stdout
    assert "a correct loop stops at reply position" in out
    assert "<|im_end|>'" in out
    loop = json.loads(run_eosfix("explain", repo, "--format", "json").stdout)["loop"]
    assert loop["tokenized_probe"]["stop_at"] == tp.stop_at
    assert loop["tokenized_probe"]["prompt_ids"] == list(tp.prompt_ids)


def test_split_probe_prompt_is_the_generation_prompt():
    r = _check(SAMPLES / "chatml-missing-im-end")
    split = split_probe(r.check)
    assert split is not None
    assert split.prompt.endswith("<|im_start|>assistant\n")
    assert split.reply.startswith("Eosfixassistant1<|im_end|>")
    history = split_probe(r.check, "history")
    assert history is not None
    assert [m["role"] for m in history.messages] == ["user"]


def test_runtime_option_pins_a_version_in_check_explain_and_json(run_eosfix):
    repo = SAMPLES / "chatml-missing-im-end"
    out = run_eosfix("check", repo, "--runtime", "mlx-lm==0.31.3").stdout
    assert "run on now: transformers, mlx-lm==0.31.3, candle, ExLlamaV2;" in out
    payload = json.loads(
        run_eosfix("check", repo, "--format", "json", "--runtime", "mlx-lm==0.31.3").stdout
    )
    (mlx,) = [row for row in payload["repos"][0]["runtimes"] if row["runtime"] == "mlx-lm"]
    assert mlx["version"] == "0.31.3"
    assert mlx["versions"] == "0.30.2 to < 0.32.0"
    assert (mlx["executed"], mlx["basis"]) == (None, "modelled, not executed")
    assert mlx["stops_before"] == {"<|im_end|>": False}
    text = run_eosfix("explain", repo, "--runtime", "mlx-lm==0.31.3").stdout
    table = text[text.index("Runtimes: does generation stop") :]
    (line,) = [ln for ln in table.splitlines() if ln.startswith("  mlx-lm==0.31.3 ")]
    assert "misses <|im_end|>" in line
    assert "0.30.2 to < 0.32.0" in line
    assert "modelled, not executed" in line
    (tf,) = [ln for ln in table.splitlines() if ln.startswith("  transformers ")]
    assert ">= 4.28.0" in tf
    assert "executed with transformers 5.24.0" in tf
    explained = json.loads(
        run_eosfix("explain", repo, "--format", "json", "--runtime", "mlx-vlm==0.6.17").stdout
    )
    (vlm,) = [row for row in explained["runtimes"] if row["runtime"] == "mlx-vlm"]
    assert (vlm["version"], vlm["versions"]) == ("0.6.17", "0.6.3 to < 0.7.0")


def test_fix_with_a_pinned_version_shows_the_old_rule_after_the_fix(sample_repo, run_eosfix):
    repo = sample_repo("chatml-missing-im-end")
    result = run_eosfix("fix", repo, "--runtime", "mlx-lm==0.20.3")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    # after writing, the report is the state now: 0.20.3 reads config.json only, so the
    # default fix (generation_config.json) does not help it; --config-json would
    assert (
        "  runtimes      8 of 11 stop at every terminator and never inside a reply; caveats below"
        in lines
    )
    assert (
        "  caveat        mlx-lm==0.20.3 reads config.json, which lacks <|im_end|> (248046) "
        f"(run: eosfix fix {shlex.quote(str(repo))} --config-json)"
    ) in lines
    before = run_eosfix("check", SAMPLES / "chatml-missing-im-end", "--runtime", "mlx-lm==0.20.3")
    assert (
        "still run on after fix: mlx-lm==0.20.3, candle, ExLlamaV2 (mlx-lm==0.20.3, candle: use"
        in (before.stdout)
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mlx-lm", "expected NAME==VERSION"),
        ("llama==1", "unknown runtime 'llama'"),
        ("TGI==2.0", "TGI's rule is not versioned"),
        ("transformers==4.20", "eosfix models transformers 4.26.0 and later"),
    ],
)
def test_runtime_option_refuses_with_one_line(spec, message, capsys):
    from eosfix.cli import main

    assert main(["check", str(SAMPLES / "llama3-healthy"), "--runtime", spec]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"Invalid value for '--runtime': {spec!r}: {message}" in captured.err
    assert "Traceback" not in captured.err
