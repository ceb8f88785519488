"""Stop ids that cut a reply (EOS011, EOS012), that are no token (EOS013), duplicate keys
(EOS014), and runtimes a written generation_config.json list would fix (EOS015)."""

from __future__ import annotations

import json
import shlex

import pytest

from eosfix import api
from eosfix.containers.folder.read import load_repo
from eosfix.decide.check import Severity
from eosfix.decide.tokentext import cut_clause, decode_piece
from tests.conftest import CORPUS, SAMPLES, check_repo, copy_repo, corpus_cases

GEN = "generation_config.json"
QWEN = "ordinary-stop-id"  # a Qwen-like repo: '#' is 2, <|endoftext|> 151643, <|im_end|> 151645
HARMONY = "stop-inside-turn"  # gpt-oss's template; <|end|> 200007 ends the reasoning message


def _write_gen(repo, value, extra: str = "") -> None:
    (repo / GEN).write_text('{\n  "eos_token_id": ' + json.dumps(value) + extra + "\n}\n")


def _corpus_copy(case: str, dst):
    """A writable copy of one corpus case; skipped, like every corpus test, when the corpus
    (``EOSFIX_CORPUS``, else ``../shared/corpus``) does not hold it."""
    if not (CORPUS / case).is_dir():
        pytest.skip(f"corpus case {case} not found under {CORPUS} (set EOSFIX_CORPUS)")
    return copy_repo(CORPUS / case, dst)


def _codes(result) -> list[str]:
    assert result.check is not None, result.error
    return [f.code for f in result.check.findings]


def _finding(result, code):
    (f,) = [f for f in result.check.findings if f.code == code]
    return f


# --- the three cases of the issue ---------------------------------------------------------


def test_gpt_oss_end_inside_the_turn_is_eos011_and_fix_removes_it(sample_repo, run_eosfix):
    repo = sample_repo(HARMONY)
    result = api.check(repo)
    f = _finding(result, "EOS011")
    assert (f.file, f.severity, f.fixable) == (GEN, Severity.ERROR, True)
    assert f.message.startswith("eos_token_id holds <|end|> (200007), which the template writes")
    assert "between the reasoning and the answer" in f.message
    assert "Eosfixthink1<|end|><|start|>assistant" in f.message  # the rendered evidence
    assert result.check.proposed == (200002, 199999, 200012)
    assert run_eosfix("fix", repo).exit_code == 1
    assert json.loads((repo / GEN).read_text())["eos_token_id"] == [200002, 199999, 200012]
    assert run_eosfix("fix", repo).exit_code == 0
    assert run_eosfix("check", repo).exit_code == 0


def test_qwen_hash_is_an_ordinary_token_eos012(sample_repo):
    result = api.check(sample_repo(QWEN))
    f = _finding(result, "EOS012")
    assert f.message == (
        "eos_token_id holds '#' (2), an ordinary text token, not a special or added token: a "
        "reply is cut wherever the model writes it ('#' starts markdown headers and code "
        "comments)"
    )
    assert (f.severity, f.fixable) == (Severity.ERROR, True)
    assert result.check.status.value == "fixable"
    assert result.check.proposed == (151645, 151643)


def test_ids_of_another_tokenizer_are_eos013_warnings_fix_removes(sample_repo, run_eosfix):
    repo = sample_repo("foreign-stop-ids")
    result = api.check(repo)
    padded, beyond = [f for f in result.check.findings if f.code == "EOS013"]
    assert "151700, which is no token: tokenizer.json has 259 tokens" in padded.message
    assert "vocab_size 151936 only pads the embedding" in padded.message
    assert "200002, which is no token: it is beyond config.json's vocab_size 151936" in (
        beyond.message
    )
    assert {f.severity for f in (padded, beyond)} == {Severity.WARNING}
    assert all(f.fixable for f in (padded, beyond))
    assert result.check.status.value == "fixable"  # JSON agrees with the summary below
    # Warnings (these ids never fire), but fix would change the file: check fails as fix would.
    assert run_eosfix("check", repo).exit_code == 1
    assert run_eosfix("check", repo).stdout.endswith("1 repo would be fixed\n")
    assert run_eosfix("fix", repo).exit_code == 1
    assert json.loads((repo / GEN).read_text())["eos_token_id"] == [151645, 151643]


# --- what is removed, and how --------------------------------------------------------------


def test_a_list_left_with_one_id_stays_a_list(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    _write_gen(repo, [2, 151645])
    assert run_eosfix("fix", repo).exit_code == 1
    assert (repo / GEN).read_text() == '{\n  "eos_token_id": [151645]\n}\n'


def test_an_ordinary_int_is_replaced_by_the_terminator(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    _write_gen(repo, 2)
    result = api.check(repo)
    assert set(_codes(result)) >= {"EOS001", "EOS012"}
    assert result.check.proposed == (151645,)


def test_removal_is_byte_minimal_crlf_and_idempotent(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    text = '{\r\n\t"eos_token_id": [151645, 2, 151643],\r\n\t"top_k": 20\r\n}'
    (repo / GEN).write_bytes(text.encode())
    assert run_eosfix("fix", repo).exit_code == 1
    assert (repo / GEN).read_bytes() == (
        b'{\r\n\t"eos_token_id": [151645, 151643],\r\n\t"top_k": 20\r\n}'
    )
    assert run_eosfix("fix", repo).exit_code == 0


def test_keep_id_keeps_an_id_the_user_insists_on(sample_repo, run_eosfix):
    repo = sample_repo(HARMONY)
    before = (repo / GEN).read_bytes()
    result = run_eosfix("check", repo, "--keep-id", "200007")
    assert result.exit_code == 0  # a warning now
    assert "EOS011" in result.stdout
    assert "; kept: --keep-id 200007" in result.stdout
    assert run_eosfix("fix", repo, "--keep-id", "200007").exit_code == 0
    assert (repo / GEN).read_bytes() == before
    assert run_eosfix("fix", repo).exit_code == 1  # without it, removed


def test_keep_id_refuses_a_negative_id(sample_repo, run_eosfix):
    result = run_eosfix("check", sample_repo(HARMONY), "--keep-id", "-1")
    assert result.exit_code == 2
    assert result.stderr == "error: --keep-id: -1 is not a token id (from 0 to 4294967295)\n"


def test_the_tokenizer_eos_is_never_removed_and_says_why(tmp_path, run_eosfix):
    """A tokenizer whose eos_token is the in-turn <|end|>: reported, not fixable (runtimes
    that add the tokenizer's eos stop there whatever the config says), never removed, and
    never added to the list."""
    repo = copy_repo(SAMPLES / HARMONY, tmp_path / "r")
    tok = json.loads((repo / "tokenizer_config.json").read_text())
    tok["eos_token"] = "<|end|>"
    (repo / "tokenizer_config.json").write_text(json.dumps(tok))
    result = api.check(repo)
    f = _finding(result, "EOS011")
    assert not f.fixable
    assert "it is the tokenizer's eos_token, which eosfix never removes" in f.message
    assert result.check.proposed is None  # nothing else to change, and 200007 stays
    assert result.check.status.value == "problems"
    assert "EOS004" not in _codes(result)  # eosfix does not ask to add an eos that cuts
    out = run_eosfix("check", repo).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("  runtimes"))
    assert "<|end|> is the tokenizer's eos_token, which they add whatever" in line


def test_qwen3_plain_added_tokens_inside_the_turn(tmp_path):
    """<think>, </think>, <tool_call> and </tool_call> are added tokens the tokenizer treats
    as text (special: false): still written inside the turn, so they cut a reply.

    </tool_call> closes one call, but Qwen3 writes every call of a message in one
    turn (``</tool_call>\n<tool_call>`` between two), so stopping there cuts the second."""
    repo = _corpus_copy("Qwen--Qwen3-4B", tmp_path / "q")
    _write_gen(repo, [151645, 151668, 151657, 151667, 151658, 151643])
    result = api.check(repo)
    cut = {f.message.split(" (")[0].removeprefix("eos_token_id holds "): f.message
           for f in result.check.findings if f.code == "EOS011"}  # fmt: skip
    assert set(cut) == {"</think>", "<tool_call>", "<think>", "</tool_call>"}
    assert "between the reasoning and the answer" in cut["</think>"]
    assert "in a reply that makes a tool call" in cut["<tool_call>"]
    assert "where the reply opens, before its reasoning" in cut["<think>"]
    assert "between two tool calls of one reply" in cut["</tool_call>"]
    assert "</tool_call>\\n<tool_call>" in cut["</tool_call>"]
    assert result.check.proposed == (151645, 151643)


def test_a_token_written_before_the_reply_without_generation_prompt_is_not_counted(tmp_path):
    """Mistral templates write no generation prompt: [/INST] ends the user's turn, and
    stopping on it cuts nothing; [TOOL_CALLS] opens the model's own call."""
    repo = _corpus_copy("nbeerbower--mistral-nemo-wissenschaft-12B", tmp_path / "m")
    _write_gen(repo, [2, 4, 9])
    result = api.check(repo)
    assert [f.message.split(",")[0] for f in result.check.findings if f.code == "EOS011"] == [
        "eos_token_id holds [TOOL_CALLS] (9)"
    ]


def test_config_json_ids_are_a_warning_without_config_json_and_removed_with_it(
    sample_repo, run_eosfix
):
    repo = sample_repo(QWEN)
    _write_gen(repo, [151645, 151643])
    cfg = repo / "config.json"
    cfg.write_text(cfg.read_text().replace('"eos_token_id": 151645', '"eos_token_id": [151645, 2]'))
    result = api.check(repo)
    f = _finding(result, "EOS012")
    assert (f.file, f.severity, f.fixable) == ("config.json", Severity.WARNING, False)
    assert "runtimes that read config.json stop there: eosfix fix --config-json removes it" in (
        f.message
    )
    assert result.patches == ()
    out = run_eosfix("check", repo).stdout
    caveats = [ln.strip() for ln in out.splitlines() if ln.startswith("  caveat")]
    assert caveats == [  # one line for the runtimes cut alike, with the command that helps
        (
            "caveat        SGLang, candle stop mid-reply at '#' (2) (they read config.json; "
            f"run: eosfix fix {shlex.quote(str(repo))} --config-json)"
        )
    ]
    fixed = api.check(repo, config_json=True)
    assert _finding(fixed, "EOS012").fixable
    assert run_eosfix("fix", "--config-json", repo).exit_code == 1
    assert json.loads(cfg.read_text())["eos_token_id"] == [151645]
    assert run_eosfix("check", repo).exit_code == 0


def test_text_config_ids_are_removed_with_config_json(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    (repo / GEN).unlink()
    (repo / "config.json").write_text(
        '{\n  "text_config": {\n    "eos_token_id": [151645, 2],\n    "vocab_size": 151936\n  }\n}\n'
    )
    result = api.check(repo)
    f = _finding(result, "EOS012")
    assert (f.file, f.fixable) == ("config.json", True)  # transformers reads it: no gen config
    assert f.message.startswith("text_config.eos_token_id holds '#' (2)")
    assert run_eosfix("fix", "--config-json", repo).exit_code == 1
    assert json.loads((repo / GEN).read_text())["eos_token_id"] == [151645]
    sub = json.loads((repo / "config.json").read_text())["text_config"]
    assert sub["eos_token_id"] == [151645]


def test_unchecked_without_tokenizer_json_no_false_alarm(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    (repo / "tokenizer.json").unlink()
    result = api.check(repo)
    assert not {"EOS011", "EOS012", "EOS013"} & set(_codes(result))
    assert result.check.status.value == "ok"
    out = run_eosfix("check", repo).stdout
    assert "unchecked     stop id 2: no tokenizer file names it (no tokenizer.json here)" in out
    payload = json.loads(run_eosfix("check", repo, "--format", "json").stdout)
    assert {"id": 2, "kind": "unchecked"}.items() <= payload["repos"][0]["stop_ids"][2].items()


def test_beyond_vocab_size_is_known_without_tokenizer_json(sample_repo):
    repo = sample_repo("foreign-stop-ids")
    (repo / "tokenizer.json").unlink()
    result = api.check(repo)
    (f,) = [f for f in result.check.findings if f.code == "EOS013"]
    assert "200002, which is no token: it is beyond config.json's vocab_size" in f.message
    kinds = {s.id: s.kind for s in result.check.review.stop_ids}
    assert kinds[151700] == "unchecked"  # below vocab_size: cannot tell


def test_an_unloadable_tokenizer_json_leaves_the_id_unchecked(sample_repo):
    repo = sample_repo(QWEN)
    (repo / "tokenizer.json").write_text('{"version": "1.0", "added_tokens": []}')
    result = api.check(repo)
    assert result.error is None
    (s,) = [s for s in result.check.review.stop_ids if s.id == 2]
    assert s.kind == "unchecked"
    assert s.reason.startswith("tokenizer.json: cannot load tokenizer")


# --- duplicate keys ------------------------------------------------------------------------


def test_duplicate_eos_token_id_keys_warn_and_the_last_is_edited(sample_repo, run_eosfix):
    repo = sample_repo(QWEN)
    text = '{\n  "eos_token_id": 151645,\n  "top_p": 0.8,\n  "eos_token_id": [151643, 2]\n}\n'
    (repo / GEN).write_text(text)
    result = api.check(repo)
    f = _finding(result, "EOS014")
    assert f.severity is Severity.WARNING
    assert f.message == (
        "eos_token_id is written 2 times in one object: json.loads, and so transformers, keeps "
        "only the last, [151643, 2] (line 4), and ignores 151645 (line 2); eosfix reads and "
        "edits only the last one"
    )
    assert run_eosfix("fix", repo).exit_code == 1
    assert (repo / GEN).read_text() == (
        '{\n  "eos_token_id": 151645,\n  "top_p": 0.8,\n  "eos_token_id": [151643, 151645]\n}\n'
    )
    assert "EOS014" in run_eosfix("check", repo).stdout  # still a warning: not eosfix's to drop


def test_a_repeat_json_decodes_to_the_key_is_found_and_one_elsewhere_is_not(sample_repo):
    """The pre-check (json's own parser: does any object repeat the key?) must not hide an
    escaped repeat ("eos\\u005ftoken_id" is eos_token_id to json.loads), nor report a key
    repeated in an object other than the one the key path names."""
    repo = sample_repo(QWEN)
    escaped = '{"eos_token_id": 151645, "eos\\u005ftoken_id": [151643, 2]}\n'
    (repo / GEN).write_text(escaped)
    f = _finding(api.check(repo), "EOS014")
    assert f.file == GEN
    assert "keeps only the last, [151643, 2] (line 1), and ignores 151645 (line 1)" in f.message
    elsewhere = '{"eos_token_id": 151645, "x": {"eos_token_id": 1, "eos_token_id": 2}}\n'
    (repo / GEN).write_text(elsewhere)
    assert "EOS014" not in _codes(api.check(repo))


def test_duplicate_keys_in_config_json_name_serde_loaders(sample_repo):
    repo = sample_repo(QWEN)
    cfg = repo / "config.json"
    cfg.write_text('{"eos_token_id": 2, "vocab_size": 151936, "eos_token_id": 151645}')
    f = _finding(api.check(repo), "EOS014")
    assert f.file == "config.json"
    assert 'serde-based loaders such as candle\'s refuse the file ("duplicate field")' in (
        f.message
    )


# --- EOS015: runtimes that read generation_config.json -------------------------------------


def _chatml_repo(tmp_path, config: dict, gen: dict | None = None, eos="<|endoftext|>"):
    repo = copy_repo(SAMPLES / QWEN, tmp_path / "r")
    (repo / GEN).unlink()
    if gen is not None:
        (repo / GEN).write_text(json.dumps(gen, indent=2) + "\n")
    (repo / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tok = json.loads((repo / "tokenizer_config.json").read_text())
    tok["eos_token"] = eos
    (repo / "tokenizer_config.json").write_text(json.dumps(tok))
    return repo


def test_vlm_eos_only_under_text_config_is_fixable_not_healthy(tmp_path, run_eosfix):
    """transformers falls back to text_config and stops; mlx-lm >= 0.32 and mlx-vlm >= 0.7
    read only the top level, TGI only the tokenizer's eos (tests/conformance executes all
    three; SGLang takes text_config's eos where the parent config has none, so it stops)."""
    repo = _chatml_repo(tmp_path, {"text_config": {"eos_token_id": 151645}})
    result = api.check(repo)
    f = _finding(result, "EOS015")
    assert f.fixable
    assert f.message.startswith("TGI (reads tokenizer eos, or generation_config.json if a list)")
    assert "mlx-lm (reads config.json (generation_config.json if truthy) + tokenizer eos)" in (
        f.message
    )
    assert f.message.endswith(
        "do not stop on <|im_end|> (151645): generation_config.json with eos_token_id "
        "[151645, 151643] makes them stop"
    )
    assert run_eosfix("check", repo).exit_code == 1
    assert run_eosfix("fix", repo).exit_code == 1
    gen = json.loads((repo / GEN).read_text())
    assert gen["eos_token_id"] == [151645, 151643]
    assert run_eosfix("check", repo).exit_code == 0


def test_config_json_only_eos_tgi_misses(tmp_path):
    repo = _chatml_repo(tmp_path, {"eos_token_id": 151645}, eos=None)
    f = _finding(api.check(repo), "EOS015")
    assert f.message == (
        "TGI (reads tokenizer eos, or generation_config.json if a list) does not stop on "
        "<|im_end|> (151645): generation_config.json with eos_token_id [151645] makes it stop"
    )


def test_runtimes_that_never_read_generation_config_stay_a_caveat(tmp_path):
    """candle and ExLlamaV2 read config.json only: --config-json, not a finding."""
    repo = _chatml_repo(tmp_path, {"eos_token_id": 151643}, {"eos_token_id": [151643, 151645]})
    result = api.check(repo)
    assert "EOS015" not in _codes(result)
    assert result.check.status.value == "ok"


# --- pieces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clause"),
    [
        ("#", "('#' starts markdown headers and code comments)"),
        (" Paris", "(the word or word piece 'Paris')"),
        ("\n", "(a line break)"),
        (" ", "(whitespace)"),
        ("42", "(the number piece '42')"),
        ("§", "('§' (section sign))"),
        ("```", "('`' opens inline code and code blocks)"),
    ],
)
def test_cut_clause_is_derived_from_the_text(text, clause):
    assert cut_clause(text) == f"a reply is cut wherever the model writes it {clause}"


@pytest.mark.parametrize(
    ("piece", "model", "text"),
    [
        ("\u0120Paris", "gpt2", " Paris"),
        ("\u010a", "gpt2", "\n"),
        ("#", "gpt2", "#"),
        ("\u2581Paris", "llama", " Paris"),
        ("<0x0A>", "llama", "\n"),
    ],
)
def test_decode_piece(piece, model, text):
    assert decode_piece(piece, model) == text


# --- no false alarm on a real repo ---------------------------------------------------------


def _truth_ids(case: str) -> list[int]:
    truth = json.loads((CORPUS / case / "truth.json").read_text())
    upstream = truth.get("upstream_generation_config_eos")
    ids = [upstream] if isinstance(upstream, int) else list(upstream or [])
    ids += [t["id"] for t in truth.get("stop_tokens", []) if t.get("id") is not None]
    return list(dict.fromkeys(ids))


@pytest.mark.parametrize("case", corpus_cases())
def test_every_real_stop_id_of_the_corpus_stays_legitimate(case, tmp_path):
    """Every stop token the corpus's independent sources name (and the upstream
    generation_config value), as the stop list: no EOS011-EOS013. The only exception is
    gpt-oss's <|end|>, which truth.json records as cutting the reply."""
    repo = copy_repo(CORPUS / case, tmp_path / case)
    ids = _truth_ids(case)
    if not ids:
        pytest.skip("no stop id known for this case")
    _write_gen(repo, ids)
    result = api.check(repo)
    assert result.check is not None, result.error
    flagged = {
        s.token or str(s.id): s.kind
        for s in result.check.review.stop_ids
        if s.kind in ("in_turn", "ordinary", "out_of_vocab")
    }
    assert flagged == {}, flagged
    as_is = api.check(CORPUS / case)
    assert not {"EOS011", "EOS012", "EOS013", "EOS014"} & set(_codes(as_is))


def test_gpt_oss_acceptable_end_is_the_one_flagged(tmp_path):
    repo = _corpus_copy("openai--gpt-oss-20b", tmp_path / "g")
    truth = json.loads((repo / "truth.json").read_text())
    (end,) = truth["also_acceptable_stop_tokens"]
    assert "cuts the reply" in end["why"]
    _write_gen(repo, [*_truth_ids("openai--gpt-oss-20b"), end["id"]])
    assert _codes(api.check(repo)).count("EOS011") == 1


@pytest.mark.parametrize("case", corpus_cases())
def test_every_special_token_of_the_corpus_is_judged_only_by_the_template(case, tmp_path):
    """Every added token of each corpus tokenizer as a stop id: only tokens the template
    writes inside an assistant turn are flagged, never a turn opener, a closer, the eos."""
    repo = load_repo(CORPUS / case)
    ids = [i.id for i in repo.added_tokens.values() if i.id is not None][:400]
    if not ids:
        pytest.skip("no added tokens")
    copy = copy_repo(CORPUS / case, tmp_path / case)
    _write_gen(copy, ids)
    check = check_repo(load_repo(copy))
    closers = {t.content for t in (*check.terminators.terminators, *check.terminators.additional)}
    for s in check.review.stop_ids:
        if s.kind == "in_turn":
            assert s.token not in closers
            assert s.token != repo.eos_token
        assert s.kind not in ("ordinary", "out_of_vocab"), s


# --- what the other views say ------------------------------------------------------------


def test_explain_table_and_render_say_where_runtimes_stop_early(run_eosfix):
    out = run_eosfix("explain", SAMPLES / HARMONY).stdout
    table = out[out.index("Runtimes: does generation stop at every terminator, and never") :]
    (tf,) = [ln for ln in table.splitlines() if ln.startswith("  transformers ")]
    assert tf.split()[1:6] == ["stops", "early", "at", "<|end|>", "stops"]
    rendered = run_eosfix("render", SAMPLES / QWEN).stdout
    assert (
        f"this repo needs `eosfix fix {SAMPLES / QWEN}`: today it stops on [151645, 151643, 2] "
        "(generation_config.json), with 2, which eosfix fix removes"
    ) in rendered


def test_json_runtimes_carry_early_stops_before_and_after(run_eosfix):
    payload = json.loads(run_eosfix("check", SAMPLES / QWEN, "--format", "json").stdout)
    rows = {r["runtime"]: r for r in payload["repos"][0]["runtimes"]}
    assert rows["transformers"]["stops_early_before"] == {"#": 2}
    assert rows["transformers"]["stops_early_after"] == {}
    assert (rows["transformers"]["ok_before"], rows["transformers"]["ok_after"]) == (False, True)
    assert rows["candle"]["stops_early_before"] == {}  # reads config.json: 151645 only
    kinds = {s["id"]: s["kind"] for s in payload["repos"][0]["stop_ids"]}
    assert kinds == {151645: "terminator", 151643: "special", 2: "ordinary"}
