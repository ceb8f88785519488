"""`eosfix ollama`: a model store built like ollama's, checked and never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosfix.cli import main
from eosfix.containers.ollama.read import default_models_dir, model_name
from tests.support.ggufs import CHATML, chatml, glm, write_gguf
from tests.support.ollama import add_model, four_model_store


def _snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_names_and_default_folder(monkeypatch, tmp_path):
    assert model_name(Path("registry.ollama.ai/library/llama3.2/latest")) == "llama3.2:latest"
    assert model_name(Path("registry.ollama.ai/me/m/q4")) == "me/m:q4"
    assert model_name(Path("hf.co/org/repo/Q4_K_M")) == "hf.co/org/repo:Q4_K_M"
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    assert default_models_dir() == tmp_path
    monkeypatch.delenv("OLLAMA_MODELS")
    assert default_models_dir() == Path.home() / ".ollama" / "models"


def test_each_model_checked_store_untouched_modelfile_printed(tmp_path, capsys):
    store = four_model_store(tmp_path)
    before = _snapshot(store)
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 1
    assert _snapshot(store) == before
    blocks = {b.splitlines()[0]: b for b in out.split("\n\n")}
    assert "<|im_end|>  id 98: stops" in blocks["qwen:latest"]
    assert "Modelfile" not in blocks["qwen:latest"]
    assert "<|user|>  id 100: never stops" in blocks["glm:latest"]
    assert (
        '    FROM glm:latest\n    PARAMETER stop "<|user|>"\n    PARAMETER stop "<|observation|>"'
    ) in blocks["glm:latest"]
    assert "never stops" not in blocks["glm-stops:latest"]  # its stop strings cover both
    cmdr = blocks["hf.co/org/cmdr:Q4_K_M"]
    # a Modelfile's stop list replaces the base model's: the existing stop is kept
    assert (
        'PARAMETER stop "<|START_OF_TURN_TOKEN|>"\n    PARAMETER stop "<|END_OF_TURN_TOKEN|>"'
    ) in cmdr
    assert out.rstrip().endswith("4 models, 2 would not stop at every turn end")


def test_write_modelfile_and_json(tmp_path, capsys):
    store = four_model_store(tmp_path)
    out_dir = tmp_path / "modelfiles"
    code = main(
        ["ollama", "--models", str(store), "--write-modelfile", str(out_dir), "--format", "json"]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 1
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "glm_latest.Modelfile",
        "hf.co_org_cmdr_Q4_K_M.Modelfile",
    ]
    text = (out_dir / "glm_latest.Modelfile").read_text()
    assert "FROM glm:latest\n" in text
    models = {m["name"]: m for m in payload["models"]}
    assert models["glm:latest"]["status"] == "does_not_stop"
    assert models["glm:latest"]["stops"] == {"<|user|>": False, "<|observation|>": False}
    assert models["qwen:latest"]["status"] == "ok"
    assert models["glm:latest"]["modelfile"] == text


def test_broken_manifest_is_one_line_and_exit_2(tmp_path, capsys):
    store = four_model_store(tmp_path)
    add_model(store, "gone:latest", None)
    (store / "manifests" / "registry.ollama.ai" / "library" / "junk").mkdir()
    (store / "manifests" / "registry.ollama.ai" / "library" / "junk" / "x").write_text("{")
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 2
    assert "error: gone:latest: " in out
    assert "model blob missing from the store" in out
    assert "error: junk:x: " in out
    assert "invalid JSON" in out


def test_not_an_ollama_folder(tmp_path, capsys):
    assert main(["ollama", "--models", str(tmp_path)]) == 2
    assert "no manifests folder" in capsys.readouterr().err


def test_an_empty_store_checks_nothing_and_exits_2(tmp_path, capsys):
    (tmp_path / "manifests").mkdir()
    assert main(["ollama", "--models", str(tmp_path)]) == 2
    assert capsys.readouterr().out == "no models in the store: nothing checked\n"


def test_one_model_is_counted_in_the_singular(tmp_path, capsys):
    store = tmp_path / "models"
    (tmp_path / "src").mkdir()
    add_model(store, "qwen:latest", chatml(tmp_path / "src" / "q.gguf"), {"stop": ["<|im_end|>"]})
    assert main(["ollama", "--models", str(store)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 model, 0 would not stop at every turn end"


# --- the GGUF check's findings, ollama's own stop rule, output that agrees ---------


def test_stop_ids_that_cut_replies_fail_the_model_as_eosfix_check_does(tmp_path, capsys):
    # eot points at " Paris": every engine of the latest ollama stops there
    store = tmp_path / "models"
    src = write_gguf(tmp_path / "p.gguf", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                     template=CHATML, normal=["\u0120Paris"],
                     ids={"eos": "<|endoftext|>", "eot": "\u0120Paris"})  # fmt: skip
    add_model(store, "paris:latest", src, {"stop": ["<|im_end|>"]})
    blob = next(p for p in (store / "blobs").iterdir() if p.read_bytes() == src.read_bytes())
    assert main(["check", str(blob)]) == 1
    assert "EOS012" in capsys.readouterr().out
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 1  # was "0 would not stop", exit 0
    assert "stops early    EOS012 ollama stops on ' Paris' (96), an ordinary text token" in out
    assert (
        f"fix the blob   no Modelfile can take a stop id away: eosfix fix {blob} --output " in out
    )
    assert out.rstrip().endswith(
        "1 model, 0 would not stop at every turn end, 1 stop inside a reply"
    )
    main(["ollama", "--models", str(store), "--format", "json"])
    (m,) = json.loads(capsys.readouterr().out)["models"]
    assert m["status"] == "stops_early"
    assert m["stops_early"][0]["id"] == 96
    assert m["ollama"]["engine"] == "llama-server"


def test_ollama_release_and_engine_decide_what_stops(tmp_path, capsys):
    # qwen3 on ollama 0.20.0 ran on the Go engine: eos and eos_token_ids only, not <|im_end|>
    store = tmp_path / "models"
    add_model(store, "q3:latest", chatml(tmp_path / "q.gguf", arch="qwen3"), {})
    assert main(["ollama", "--models", str(store)]) == 0
    assert "0.32.15 (llama-server) stops on [96, 98]" in capsys.readouterr().out
    assert main(["ollama", "--models", str(store), "--runtime", "ollama==0.20.0"]) == 1
    out = capsys.readouterr().out
    assert "0.20.0 (ollama engine (Go)) stops on [96]" in out
    assert "<|im_end|>  id 98: never stops" in out
    assert main(["ollama", "--models", str(store), "--runtime", "mlx-lm==0.31.3"]) == 2
    assert "judges ollama only" in capsys.readouterr().err


def test_json_status_agrees_with_the_text_and_every_model_is_counted(tmp_path, capsys):
    store = four_model_store(tmp_path)
    base = write_gguf(
        tmp_path / "src" / "base.gguf", ["<|endoftext|>"], ids={"eos": "<|endoftext|>"}
    )
    add_model(store, "base:latest", base)
    add_model(store, "gone:latest", None)
    code = main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    assert code == 2
    assert "base:latest: no chat template in its GGUF: nothing to check" in out
    assert out.rstrip().endswith(
        "6 models, 2 would not stop at every turn end, 1 without a chat template, "
        "1 could not be read"
    )
    main(["ollama", "--models", str(store), "--format", "json"])
    status = {m["name"]: m["status"] for m in json.loads(capsys.readouterr().out)["models"]}
    assert status["base:latest"] == "no_template"  # was "ok"
    assert status["gone:latest"] == "error"


def test_writing_modelfiles_says_only_what_it_wrote_and_a_bad_folder_is_one_line(tmp_path, capsys):
    store = four_model_store(tmp_path)
    out_dir = tmp_path / "mf"
    main(["ollama", "--models", str(store), "--write-modelfile", str(out_dir)])
    assert capsys.readouterr().err.count("Writing ") == 2
    main(["ollama", "--models", str(store), "--write-modelfile", str(out_dir)])
    assert "Writing" not in capsys.readouterr().err  # unchanged: not written again
    blocked = tmp_path / "file"
    blocked.write_text("")
    code = main(["ollama", "--models", str(store), "--write-modelfile", str(blocked / "sub")])
    out, err = capsys.readouterr()
    assert code == 2  # was exit 3 (an uncaught PermissionError/NotADirectoryError)
    assert err.count("\n") == 1
    assert err.startswith(f"error: {blocked / 'sub'}: cannot create the folder: ")
    assert "4 models" in out  # the report came first


def test_modelfile_quotes_stop_strings_as_ollamas_parser_reads_them(tmp_path, capsys):
    store = tmp_path / "models"
    add_model(store, "g:latest", glm(tmp_path / "g.gguf"), {"stop": ['say "hi"', "C:\\path"]})
    main(["ollama", "--models", str(store)])
    out = capsys.readouterr().out
    # parser/parser.go unquote: one pair of quotes off, no escapes (json.dumps gave "say \"hi\"")
    assert '    PARAMETER stop "say "hi""\n    PARAMETER stop "C:\\path"\n' in out


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("<|im_end|>", '"<|im_end|>"'),
        ('a"b', '"a"b"'),
        ("a\\b", '"a\\b"'),
        (" x ", '" x "'),
        ('a"\nb', '"""a"\nb"""'),  # '"a"' would end the value at the line break
        ('""x', '"""""x"""'),  # '""x"' opens a triple-quoted value
        ("a\u200bb", None),  # not printable: the parser drops it
    ],
)
def test_quote_stop(text, quoted):
    from eosfix.runtimes.ollama.modelfile import quote_stop, read_value

    assert quote_stop(text) == quoted
    if quoted is not None:
        assert read_value(quoted) == text
    assert read_value(json.dumps(text)) != text or "\\" not in json.dumps(text)
