"""GGUF eos/eot/eom pointing at a token that cuts a reply: EOS011/EOS012, and the fix."""

from __future__ import annotations

import json

import pytest

from eosfix import api
from eosfix.cli import main
from eosfix.containers.gguf.read import load_gguf
from tests.support.ggufs import BASE, CHATML, harmony, reasoning

N = len(BASE)
ENDOFTEXT, TURN, THINK_END, TURN_END = (
    N,
    N + 1,
    N + 2,
    N + 3,
)  # tests.support.ggufs.REASONING_SPECIALS
HASH = BASE.index("#")
EOT = "tokenizer.ggml.eot_token_id"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _finding(result, code):
    (f,) = [f for f in result.check.findings if f.code == code]
    return f


def test_eot_on_the_reasoning_closer_is_eos011_and_fix_points_it_at_the_turn_end(tmp_path, capsys):
    path = reasoning(tmp_path / "m.gguf", {"eos": "<|endoftext|>", "eot": "<|think_end|>"})
    result = api.check(path)
    f = _finding(result, "EOS011")
    assert (f.file, f.fixable) == (EOT, True)
    assert f.message.startswith(
        f"llama.cpp stops on <|think_end|> ({THINK_END}), which the template writes inside an "
        "assistant turn (between the reasoning and the answer:"
    )
    assert f.message.endswith(f"{EOT} points at it; fix: {EOT} = {TURN_END} (<|turn_end|>)")
    assert set(result.check.stop.ids) == {ENDOFTEXT, THINK_END}
    assert set(result.check.proposed) == {ENDOFTEXT, TURN_END}
    code, out, _ = run(capsys, "check", path)
    assert code == 1
    # ollama's row too: its latest release runs llama-server, which reads these keys
    assert (
        "runtimes      run on now: llama.cpp, ollama; stop inside a turn at <|think_end|> now: "
        "llama.cpp, ollama; after fix: all stop\n"
    ) in out
    payload = json.loads(run(capsys, "check", path, "--format", "json")[1])
    rows = {r["runtime"]: r for r in payload["repos"][0]["runtimes"]}
    assert sorted(rows) == ["llama.cpp", "ollama"]
    for row in rows.values():
        assert row["stops_early_before"] == {"<|think_end|>": THINK_END}
        assert row["stops_early_after"] == {}
    code, _, err = run(capsys, "fix", path)
    assert code == 1
    assert "(in place)" in err
    model = load_gguf(path)
    assert model.specials.get("eot") == TURN_END
    assert run(capsys, "check", path)[0] == 0
    assert run(capsys, "fix", path)[0] == 0  # idempotent


def test_eot_on_an_ordinary_token_is_eos012(tmp_path):
    path = reasoning(tmp_path / "m.gguf", {"eos": "<|endoftext|>", "eot": "#"})
    f = _finding(api.check(path), "EOS012")
    assert f.message.startswith(
        f"llama.cpp stops on '#' ({HASH}), an ordinary text token: a reply is cut wherever the "
        "model writes it ('#' starts markdown headers and code comments)"
    )
    assert f.fixable
    assert api.fix(path).error is None
    assert load_gguf(path).specials.get("eot") == TURN_END


def test_eos_on_the_reasoning_closer_is_explained_not_changed(tmp_path, capsys):
    path = reasoning(tmp_path / "m.gguf", {"eos": "<|think_end|>", "eot": "<|turn_end|>"})
    result = api.check(path)
    f = _finding(result, "EOS011")
    assert (f.file, f.fixable) == ("tokenizer.ggml.eos_token_id", False)
    assert "eosfix never changes eos (templates render it as eos_token" in f.message
    assert not result.patches
    assert result.check.status.value == "problems"
    code, out, _ = run(capsys, "check", path)
    assert code == 1
    (line,) = [x for x in out.splitlines() if x.startswith("  runtimes ")]
    assert line.startswith(
        "  runtimes      stop inside a turn at <|think_end|> now: llama.cpp, ollama ("
    )
    assert "after fix" not in line  # no fix changes it
    before = path.read_bytes()
    assert run(capsys, "fix", path)[0] == 1  # a problem eosfix cannot fix: nothing written
    assert path.read_bytes() == before


def test_keep_id_leaves_eot_and_puts_the_turn_end_in_eom(tmp_path):
    path = reasoning(tmp_path / "m.gguf", {"eos": "<|endoftext|>", "eot": "<|think_end|>"})
    result = api.check(path, keep_ids=[THINK_END])
    f = _finding(result, "EOS011")
    assert f.severity.value == "warning"
    assert f.message.endswith(f"kept: --keep-id {THINK_END}")
    assert [(e.role, e.new) for e in result.patches] == [("eom", TURN_END)]


def test_an_ordinary_token_llama_cpp_stops_on_by_its_text_is_a_warning(tmp_path):
    """Qwen2's vocabulary has '</s>' as an ordinary BPE token; llama.cpp stops on every token
    with that text (ggml-vocab-qwen2.gguf shows it with real llama.cpp). No key changes it,
    and it cuts only a reply that writes '</s>': a warning, not an error."""
    from tests.support.ggufs import CHATML, write_gguf

    path = write_gguf(
        tmp_path / "q.gguf",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        template=CHATML,
        ids={"eos": "<|endoftext|>"},
        normal=["</s>"],
    )
    result = api.check(path)
    f = _finding(result, "EOS012")
    assert (f.file, f.severity.value, f.fixable) == ("tokenizer.ggml.tokens", "warning", False)
    assert f.message == (
        f"llama.cpp stops on '</s>' ({N}), an ordinary text token: a reply is cut wherever the "
        "model writes it ('</s>' starts with '<', which opens HTML and XML tags); llama.cpp "
        "stops on every token with this text (its end-of-generation list); no key changes that"
    )
    assert result.check.status.value == "ok"  # warnings only
    assert not result.patches


def test_gpt_oss_eot_on_end_is_no_false_alarm(tmp_path):
    """llama.cpp drops <|end|> from its set when <|return|> and <|call|> are in it, whatever
    eot says: it never stops there, so there is nothing to report."""
    path = harmony(tmp_path / "h.gguf", {"eos": "<|return|>", "eot": "<|end|>"})
    result = api.check(path)
    end = N + 5
    assert end not in result.check.stop.ids
    assert not {"EOS011", "EOS012"} & {f.code for f in result.check.findings}


@pytest.mark.slow
def test_real_llama_cpp_stops_inside_the_turn_until_fixed(tmp_path):
    """Real llama.cpp (llama-cpp-python 0.3.36): it stops on <|think_end|> while eot points
    at it, and after ``fix`` on <|turn_end|> instead; eos on it stays; gpt-oss's <|end|> never."""
    from tests.support.ggufs import CHATML, write_gguf
    from tests.support.llamacpp_eog import real_eog

    cases = {
        "eot": reasoning(tmp_path / "eot.gguf", {"eos": "<|endoftext|>", "eot": "<|think_end|>"}),
        "ordinary": reasoning(tmp_path / "hash.gguf", {"eos": "<|endoftext|>", "eot": "#"}),
        "eos": reasoning(tmp_path / "eos.gguf", {"eos": "<|think_end|>", "eot": "<|turn_end|>"}),
        "harmony": harmony(tmp_path / "h.gguf", {"eos": "<|return|>", "eot": "<|end|>"}),
        "text": write_gguf(
            tmp_path / "q.gguf",
            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            template=CHATML,
            ids={"eos": "<|endoftext|>"},
            normal=["</s>"],
        ),
    }
    before = real_eog(list(cases.values()))
    assert N in before[cases["text"]]["eog"]  # the ordinary '</s>', by its text
    assert THINK_END in before[cases["eot"]]["eog"]
    assert HASH in before[cases["ordinary"]]["eog"]
    assert THINK_END in before[cases["eos"]]["eog"]
    assert N + 5 not in before[cases["harmony"]]["eog"]  # <|end|>: llama.cpp's own exception
    for path in cases.values():
        assert set(before[path]["eog"]) == set(api.check(path).check.stop.ids), path.name
        api.fix(path)
    after = real_eog(list(cases.values()))
    for name in ("eot", "ordinary"):
        eog = set(after[cases[name]]["eog"])
        assert eog == {ENDOFTEXT, TURN_END}, name
        assert not api.check(cases[name]).patches
    assert THINK_END in after[cases["eos"]]["eog"]  # not eosfix's to change


def test_a_byte_level_word_piece_is_shown_as_the_model_writes_it(tmp_path):
    from tests.support.ggufs import write_gguf

    path = write_gguf(
        tmp_path / "w.gguf",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        template=CHATML,
        ids={"eos": "<|endoftext|>", "eot": "\u0120Paris"},
        normal=["\u0120Paris"],
    )
    f = _finding(api.check(path), "EOS012")
    assert f.message.startswith(f"llama.cpp stops on ' Paris' ({N}), an ordinary text token")
    assert "(the word or word piece 'Paris')" in f.message
    assert f.fixable  # eot points elsewhere: the turn end
