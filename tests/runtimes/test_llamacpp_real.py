"""eosfix's model of llama.cpp's end-of-generation set against real llama.cpp.

Real llama.cpp is the build inside llama-cpp-python 0.3.36 (``pip install 'eosfix[runtimes]'``),
queried in a child process (``tests/support/llamacpp_eog.py``: ``vocab_only`` load, then
``llama_vocab_is_eog`` for every id). The vocabularies are every ``models/ggml-vocab-*.gguf``
the llama-cpp-python 0.3.36 sdist ships, and every GGUF these tests write, before and after
``eosfix fix``. Equal sets, or the difference is one of llama.cpp's hash-order choices that
eosfix reports as uncertain (and never counts on).
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from eosfix import api
from eosfix.containers.gguf.format import CONTROL
from eosfix.containers.gguf.pieces import DECODED_MODELS, piece
from eosfix.containers.gguf.read import load_gguf
from eosfix.runtimes import describe
from eosfix.runtimes.llamacpp import LLAMA_CPP_COMMIT, LLAMA_CPP_PYTHON, end_of_generation
from tests.support.ggufs import chatml, command_r, copy_with_templates, glm
from tests.support.llamacpp_eog import real_eog

pytestmark = pytest.mark.slow


def _agrees(path: Path, real: dict) -> None:
    model = end_of_generation(load_gguf(path).vocab)
    assert "error" not in real, (path.name, real)
    got = set(real["eog"])
    assert model.ids <= got <= model.ids | model.uncertain, (path.name, sorted(model.ids), got)


def test_the_executed_llama_cpp_is_the_installed_one():
    """The llama.cpp row says "executed with llama.cpp <commit> (llama-cpp-python <v>)"."""
    pytest.importorskip("llama_cpp", reason="pip install 'eosfix[runtimes]'")
    assert importlib.metadata.version("llama-cpp-python") == LLAMA_CPP_PYTHON
    assert describe("llama.cpp").executed == f"{LLAMA_CPP_COMMIT} (llama-cpp-python 0.3.36)"


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
def test_model_equals_real_llama_cpp_on_every_shipped_vocab(ggml_vocab_files):
    reals = real_eog(ggml_vocab_files)
    for path in ggml_vocab_files:
        _agrees(path, reals[path])
        specials = load_gguf(path).specials
        assert specials.get("eos") == reals[path]["eos"], path.name
        if specials.get("eot") is not None:  # determined (not a hash-order pick)
            assert specials.get("eot") == reals[path]["eot"], path.name


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
def test_token_pieces_equal_real_llama_cpp_on_every_shipped_vocab(ggml_vocab_files):
    """``diagnose`` reads a GGUF's generated ids as text: each token's bytes as llama.cpp's
    ``llama_token_to_piece`` writes them, for every vocabulary type eosfix decodes."""
    decoded = [p for p in ggml_vocab_files if load_gguf(p).vocab.model in DECODED_MODELS]
    assert decoded
    reals = real_eog(decoded, pieces=True)
    for path in decoded:
        model = load_gguf(path)
        tokens = model.header.value("tokenizer.ggml.tokens")
        types = model.token_types or (1,) * len(tokens)
        real = reals[path]["pieces"]
        wrong = [i for i, (t, k) in enumerate(zip(tokens, types, strict=True))
                 if piece(model.vocab.model, t, k).hex() != real[i]]  # fmt: skip
        assert not wrong, (path.name, [(i, tokens[i], real[i]) for i in wrong[:5]])


def _opener_template(path: Path) -> dict[str, str] | None:
    """A GLM-like template whose replies end where the next turn opens, with three control
    tokens of this vocabulary that llama.cpp does not stop on; None when it has too few."""
    model = load_gguf(path)
    eog = end_of_generation(model.vocab)
    named = {model.specials.get(r) for r in ("bos", "eos", "unk")}
    tokens = model.header.value("tokenizer.ggml.tokens")
    pick = [
        i
        for i, t in enumerate(model.token_types or ())
        if t == CONTROL
        and i not in eog.ids | eog.uncertain
        and i not in named
        and "unused" not in tokens[i]
    ][:3]
    if len(pick) < 3:
        return None
    u, a, t = (tokens[i] for i in pick)
    return {
        "default": (
            "{% for m in messages %}{% if m.role == 'user' %}" + u + "{{ m.content }}"
            "{% elif m.role == 'assistant' %}" + a + "{{ m.content }}"
            "{% elif m.role == 'tool' %}" + t + "{{ m.content }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}" + a + "{% endif %}"
        )
    }


EOS_TEMPLATE = {
    "default": (
        "{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }} [/INST]"
        "{% else %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}"
    )
}


@pytest.fixture(scope="session")
def vocab_copies(ggml_vocab_files, tmp_path_factory) -> list[Path]:
    """Each shipped vocabulary with a chat template: its own if it has one, else a template
    whose turn ends llama.cpp does not know (fixable), else one ending with eos_token."""
    out = tmp_path_factory.mktemp("vocab-copies")
    copies = []
    for path in ggml_vocab_files:
        dst = out / path.name
        if load_gguf(path).repo.templates:
            shutil.copyfile(path, dst)
        else:
            copy_with_templates(path, dst, _opener_template(path) or EOS_TEMPLATE)
        copies.append(dst)
    return copies


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
def test_check_and_fix_every_vocab_copy_and_real_llama_cpp_agrees(vocab_copies, tmp_path):
    before = real_eog(vocab_copies)
    fixed = []
    for path in vocab_copies:
        _agrees(path, before[path])
        result = api.check(path)
        assert result.error is None, result.error
        terms = [t.id for t in result.check.id_terminators]
        stops = all(i in before[path]["eog"] for i in terms)
        assert (not result.patches) == stops, path.name  # a fix exactly when needed
        if result.patches:
            out = tmp_path / path.name
            assert api.fix_gguf(path, output=out).error is None
            fixed.append((out, terms))
    assert len(fixed) >= 5  # the opener template made most vocabularies fixable
    after = real_eog([p for p, _ in fixed])
    for out, terms in fixed:
        _agrees(out, after[out])
        assert set(terms) <= set(after[out]["eog"]), out.name  # real llama.cpp now stops
        assert not api.check(out).patches


def test_written_ggufs_before_and_after_fix(tmp_path):
    cases = {
        "chatml": chatml(tmp_path / "chatml.gguf"),
        "glm": glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 4),
        "glm-in-place": glm(
            tmp_path / "glm-in-place.gguf",
            ids={"eos": "<|endoftext|>", "eot": "<|endoftext|>", "eom": "<|endoftext|>"},
        ),
        "glm-taken": glm(
            tmp_path / "glm-taken.gguf",
            ids={"eos": "<|endoftext|>", "eot": "[gMASK]", "eom": "<sop>"},
        ),
        "command-r": command_r(tmp_path / "cmdr.gguf"),
    }
    before = real_eog(list(cases.values()))
    for path in cases.values():
        _agrees(path, before[path])
    glm_before = set(before[cases["glm"]]["eog"])
    user, obs = (
        load_gguf(cases["glm"]).repo.resolve(t).id for t in ("<|user|>", "<|observation|>")
    )
    assert user not in glm_before
    assert obs not in glm_before
    assert 98 in before[cases["chatml"]]["eog"]  # <|im_end|> by its name: nothing to fix
    results = {name: api.fix(path) for name, path in cases.items()}
    assert results["chatml"].written == ()
    assert results["glm-taken"].written == ()  # cannot be expressed: nothing written
    assert results["glm-in-place"].write.mode == "in-place"
    assert results["glm"].write.mode == "rewrite"
    after = real_eog(list(cases.values()))
    for path in cases.values():
        _agrees(path, after[path])
    assert {user, obs} <= set(after[cases["glm"]]["eog"])
    assert {user, obs} <= set(after[cases["glm-in-place"]]["eog"])
    assert after[cases["glm"]]["eot"] == user
    assert not {user, obs} & set(after[cases["glm-taken"]]["eog"])
    cmdr = load_gguf(cases["command-r"]).repo.resolve("<|END_OF_TURN_TOKEN|>").id
    assert cmdr in after[cases["command-r"]]["eog"]


def test_real_smollm2_gguf_agrees():
    from tests.support.realmodel import require_smollm2_gguf

    path = require_smollm2_gguf()
    _agrees(path, real_eog([path])[path])


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
def test_remote_reads_agree_with_real_llama_cpp_on_the_file_downloaded_whole(
    vocab_copies, fake_hub, tmp_path
):
    """Every vocabulary (with a template) and every GGUF these tests write, on the stand-in
    Hub: the verdict eosfix reads by ranges is llama.cpp's ``llama_vocab_is_eog`` of the same
    bytes, downloaded whole."""
    from huggingface_hub import hf_hub_download

    from eosfix.sources.hub.read import HubEntry, HubReader
    from eosfix.targets.gguf_hub import check_gguf_repo

    written = [
        chatml(tmp_path / "chatml.gguf"),
        glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 4),
        command_r(tmp_path / "command-r.gguf"),
    ]
    files = {p.name: p.read_bytes() for p in [*vocab_copies, *written]}
    fake_hub.add_repo("org/vocabs", files)
    fake_hub.cdn = True
    reader = HubReader()
    entry = reader.resolve(HubEntry("org/vocabs"))
    checked = check_gguf_repo(reader, entry)
    assert all(f.requests <= 4 for f in checked.files)  # the redirect, then at most 3 ranges
    by_file = {r.gguf.file: r for r in checked.results}
    for r in checked.results:
        for other in r.gguf.alike:
            by_file[other] = r
    assert set(by_file) == set(files)
    whole = {name: Path(hf_hub_download("org/vocabs", name)) for name in files}
    reals = real_eog(list(whole.values()))
    for name, result in by_file.items():
        assert result.error is None, (name, result.error)
        model = end_of_generation(load_gguf(whole[name]).vocab)
        got = set(result.check.stop.ids)
        real = set(reals[whole[name]]["eog"])
        assert got == model.ids, name
        assert got <= real <= got | model.uncertain, (name, sorted(got), sorted(real))
