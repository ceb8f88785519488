"""A GGUF checked and fixed for ollama too: what ollama reads of the file, its row in
the runtime table, and the ``tokenizer.ggml.eos_token_ids`` list its Go engine (0.7.1 to
0.24.0) needs.

The expectations come from ollama's source (docs/ollama.md): the Go engine stops on
``eos_token_id`` and an INT32 ``eos_token_ids`` only (gemma3/gemma4 also eot), never eot/eom;
llama-server (0.30.0 on) stops on llama.cpp's set and never reads the list. Every file ``fix``
writes here is loaded by real llama.cpp.
"""

from __future__ import annotations

import json

import pytest

from eosfix import api
from eosfix.cli import main
from eosfix.containers.gguf.container import open_gguf
from eosfix.containers.gguf.eos_ids import ollama_view
from eosfix.containers.gguf.read import load_gguf, read_header
from eosfix.runtimes.ollama.compat import INT32
from eosfix.runtimes.ollama.engines import GO, SERVER, gguf_stops, go_stops
from tests.support.ggufs import (
    BASE,
    HARMONY,
    HARMONY_SPECIALS,
    REASONING,
    REASONING_SPECIALS,
    chatml,
    glm,
    write_gguf,
)
from tests.support.llamacpp_eog import assert_loads

N = len(BASE)
ENDOFTEXT, IM_END = N, N + 2  # tests.support.ggufs.chatml
IDS = "tokenizer.ggml.eos_token_ids"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _codes(result):
    return [f.code for f in result.check.findings]


def test_reader_gives_what_ollama_reads(tmp_path):
    path = chatml(tmp_path / "m.gguf", arch="qwen3", eos_token_ids=["<|endoftext|>"])
    model = load_gguf(path)
    assert model.architecture == "qwen3"
    assert model.eos_token_ids == ((ENDOFTEXT,), INT32)
    view = ollama_view(model, has_projector=True)
    assert (view.architecture, view.eos_token_ids, view.eos_token_ids_type) == (
        "qwen3",
        (ENDOFTEXT,),
        INT32,
    )
    assert view.chat_template is not None
    assert "<|im_start|>" in view.chat_template
    assert {"general.architecture", IDS, "tokenizer.ggml.tokens"} <= view.key_names
    assert view.tensor_shapes is None  # read only where ollama's layer needs them
    assert view.has_projector
    # any item type is read, never a reason to refuse the file (ollama's Go engine ignores it)
    for kind in ("UINT32", "INT64"):
        other = chatml(tmp_path / f"{kind}.gguf", eos_token_ids=["<|im_end|>"],
                       eos_token_ids_type=kind)  # fmt: skip
        assert load_gguf(other).eos_token_ids == ((IM_END,), kind)
    gemma = chatml(tmp_path / "g.gguf", arch="gemma3", tensor=bytes(64))
    assert load_gguf(gemma).tensor_shapes == {"weights": (64,)}


def test_check_has_an_ollama_row_and_pins_an_older_release(tmp_path, capsys):
    path = chatml(tmp_path / "q.gguf", arch="qwen3")
    code, out, _ = run(capsys, "check", "--format", "json", path)
    assert code == 1  # EOS203: the Go engine of 0.12.0-0.24.0
    rows = {r["runtime"]: r for r in json.loads(out)["repos"][0]["runtimes"]}
    assert sorted(rows) == ["llama.cpp", "ollama"]
    latest = rows["ollama"]
    assert latest["reads"].startswith(f"{SERVER}: ")
    assert latest["stops_before"] == {"<|im_end|>": True}  # llama-server: <|im_end|> by text
    assert "qwen3 on llama-server" in latest["note"]
    # ollama 0.20.0 runs qwen3 on its Go engine: eos 96 and the (absent) list only
    code, out, _ = run(capsys, "check", "--runtime", "ollama==0.20.0", "--format", "json", path)
    assert code == 1
    rows = {r["runtime"]: r for r in json.loads(out)["repos"][0]["runtimes"]}
    pinned = rows["ollama"]
    assert (pinned["version"], pinned["stops_before"]) == ("0.20.0", {"<|im_end|>": False})
    assert pinned["reads"].startswith(f"{GO}: ")
    assert pinned["stops_after"] == {"<|im_end|>": True}  # once eos_token_ids is written
    code, out, _ = run(capsys, "check", "--runtime", "ollama==0.20.0", path)
    assert code == 1
    assert "run on now: ollama==0.20.0; after fix: all stop" in out


def test_go_engine_architecture_gets_eos_token_ids_int32_and_llama_cpp_loads_it(tmp_path, capsys):
    path = chatml(tmp_path / "q.gguf", arch="qwen3", tensor=bytes(range(256)) * 8)
    result = api.check(path)
    assert _codes(result) == ["EOS203"]
    (f,) = result.check.findings
    assert f.file == IDS
    assert f.message == (
        "ollama 0.12.0 to 0.24.0 runs qwen3 on its Go engine, which stops on eos_token_id and "
        f"an INT32 eos_token_ids only: not on <|im_end|> ({IM_END}); fix: {IDS} = "
        f"[{ENDOFTEXT}, {IM_END}] (INT32)"
    )
    assert [p.as_json()["new"] for p in result.patches] == [[ENDOFTEXT, IM_END]]
    code, out, err = run(capsys, "fix", "--diff", path)
    assert out == ""  # a GGUF's key edits are no patch: listed on stderr
    assert (
        f"+{IDS}: [{ENDOFTEXT}, {IM_END}]  # INT32: {ENDOFTEXT} <|endoftext|>, {IM_END} <|im_end|>"
        in err
    )
    before = read_header(path)
    code, _, err = run(capsys, "fix", path)
    assert code == 1
    assert "(rewritten)" in err
    after = read_header(path)
    f_ids = after.fields[IDS]
    assert (f_ids.item_type.name, list(f_ids.value)) == ("INT32", [ENDOFTEXT, IM_END])
    for key, field in before.fields.items():
        assert after.fields[key].value == field.value, key
    model = load_gguf(path)
    for version in ("0.12.0", "0.20.0", "0.24.0"):
        assert IM_END in go_stops(ollama_view(model), version)
    assert run(capsys, "check", path)[0] == 0
    assert run(capsys, "fix", path)[0] == 0  # idempotent
    assert_loads([path])


def test_no_list_for_an_architecture_no_go_engine_ran(tmp_path):
    path = chatml(tmp_path / "llama.gguf", arch="llama")
    result = api.check(path)
    assert result.check.findings == ()
    assert result.patches == ()


def test_an_existing_list_of_another_type_is_rewritten_as_int32(tmp_path, capsys):
    path = chatml(tmp_path / "q.gguf", arch="qwen3", eos_token_ids=["<|endoftext|>"],
                  eos_token_ids_type="UINT32", tensor=bytes(64))  # fmt: skip
    (f,) = api.check(path).check.findings
    assert "its UINT32 list reads as empty there" in f.message
    assert run(capsys, "fix", path)[0] == 1
    field = read_header(path).fields[IDS]
    assert (field.item_type.name, list(field.value)) == ("INT32", [ENDOFTEXT, IM_END])
    assert list(read_header(path).fields).count(IDS) == 1
    assert_loads([path])


def test_same_length_int32_list_is_edited_in_place(tmp_path, capsys):
    path = chatml(
        tmp_path / "q.gguf", arch="qwen3", eos_token_ids=["<|endoftext|>", "<|im_start|>"]
    )
    result = api.check(path)
    # <|im_start|> ends nothing here, but it is no in-turn token either: it stays
    assert [p.as_json()["new"] for p in result.patches] == [[ENDOFTEXT, N + 1, IM_END]]
    # the same length: only the items change ('(' is ordinary text, which cuts replies)
    same = chatml(tmp_path / "s.gguf", arch="qwen3", eos_token_ids=["<|endoftext|>", "("])
    patch = api.check(same).patches
    assert [p.as_json()["in_place"] for p in patch] == [True]
    code, _, err = run(capsys, "fix", same)
    assert (code, "(in place)" in err) == (1, True)
    assert list(read_header(same).fields[IDS].value) == [ENDOFTEXT, IM_END]  # '(' cut replies
    assert_loads([same])


def test_an_in_turn_list_item_is_eos011_and_never_written(tmp_path, capsys):
    path = write_gguf(tmp_path / "r.gguf", REASONING_SPECIALS, template=REASONING, arch="qwen3",
                      ids={"eos": "<|endoftext|>", "eot": "<|turn_end|>"},
                      eos_token_ids=["<|endoftext|>", "<|think_end|>"])  # fmt: skip
    result = api.check(path)
    found = {f.code: f for f in result.check.findings if f.file == IDS}
    assert sorted(found) == ["EOS011", "EOS203"]  # and the Go engine misses <|turn_end|>
    f = found["EOS011"]
    assert f.fixable
    assert "<|think_end|>" in f.message
    assert "which the template writes inside an assistant turn" in f.message
    (patch,) = result.patches
    new = patch.as_json()["new"]
    assert N + 2 not in new  # <|think_end|>
    assert new == [N, N + 3]
    assert run(capsys, "fix", path)[0] == 1
    model = load_gguf(path)
    assert N + 2 not in go_stops(ollama_view(model), "0.20.0")
    assert_loads([path])


def test_gpt_oss_gets_call_in_the_list_not_end(tmp_path, capsys):
    path = write_gguf(tmp_path / "oss.gguf", HARMONY_SPECIALS, template=HARMONY.read_text(),
                      ids={"eos": "<|return|>"}, arch="gpt-oss")  # fmt: skip
    result = api.check(path)
    assert _codes(result) == ["EOS203"]
    ret, call, end = (HARMONY_SPECIALS.index(t) + N for t in ("<|return|>", "<|call|>", "<|end|>"))
    assert [p.as_json()["new"] for p in result.patches] == [[ret, call]]
    assert end not in result.patches[0].as_json()["new"]
    assert run(capsys, "fix", path)[0] == 1
    model = load_gguf(path)
    assert {ret, call} <= go_stops(ollama_view(model), "0.11.5")
    assert end not in go_stops(ollama_view(model), "0.11.5")
    assert_loads([path])


def test_glm4moelite_list_puts_terminators_where_the_compat_layer_reads_eot_and_eom(tmp_path):
    # eosfix writes eot/eom for llama.cpp and the list [eos, <|user|>, <|observation|>] for the
    # Go engine; llama-server's compatibility layer then reads nothing (eot/eom are present),
    # and the Go engine stops on both openers.
    path = glm(tmp_path / "g.gguf", arch="glm4moelite", tensor=bytes(64))
    result = api.check(path)
    assert sorted(_codes(result)) == ["EOS201", "EOS201", "EOS203"]
    assert api.fix(path).error is None
    model = load_gguf(path)
    user, obs = N + 4, N + 6
    assert model.eos_token_ids == ((N, user, obs), INT32)
    view = ollama_view(model)
    assert {user, obs} <= gguf_stops(view).ids  # llama-server after the layer
    assert {user, obs} <= gguf_stops(view, "0.20.0").ids  # the Go engine
    # llama.cpp 0c1e57098 knows no "glm4moelite" (ollama's name; llama.cpp's is deepseek2) and
    # refuses either file; gguf-py's own reader reads the written one
    gguf = pytest.importorskip("gguf")
    fields = gguf.GGUFReader(path).fields
    assert [int(fields[IDS].parts[i][0]) for i in fields[IDS].data] == [N, user, obs]


@pytest.mark.parametrize("version", ["0.6.0", "0.11.4", "0.24.0", "0.32.15"])
def test_gguf_container_ollama_stops_match_the_rule_module(tmp_path, version):
    path = chatml(tmp_path / "q.gguf", arch="gemma3", tensor=bytes(64))
    g = open_gguf(path)
    assert g.ollama_stops((), version).ids == gguf_stops(ollama_view(g.model), version).ids
