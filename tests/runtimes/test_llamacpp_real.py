"""eosfix's model of llama.cpp's end-of-generation set against real llama.cpp.

Real llama.cpp is the build inside llama-cpp-python 0.3.36 (``pip install 'eosfix[runtimes]'``),
queried in a child process (``tests/support/llamacpp_eog.py``: ``vocab_only`` load, then
``llama_vocab_is_eog`` for every id). The vocabularies are every ``models/ggml-vocab-*.gguf``
the llama-cpp-python 0.3.36 sdist ships (one case each), and every GGUF these tests write,
before and after ``eosfix fix``. Equal sets, or the difference is one of llama.cpp's hash-order
choices that eosfix reports as uncertain (and never counts on).
"""

from __future__ import annotations

import importlib.metadata
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from eosfix import api
from eosfix.containers.gguf.format import CONTROL
from eosfix.containers.gguf.pieces import DECODED_MODELS, piece
from eosfix.containers.gguf.read import GgufModel, load_gguf
from eosfix.runtimes import describe
from eosfix.runtimes.llamacpp import LLAMA_CPP_COMMIT, LLAMA_CPP_PYTHON, end_of_generation
from tests.support.ggufs import chatml, command_r, copy_with_templates, glm
from tests.support.llamacpp_eog import real_eog
from tests.support.testcache import LLAMA_CPP_VOCABULARIES

pytestmark = pytest.mark.slow

EVERY_VOCAB = pytest.mark.parametrize("name", LLAMA_CPP_VOCABULARIES)
DECODED_VOCABS = [n for n, model in LLAMA_CPP_VOCABULARIES.items() if model in DECODED_MODELS]


def _shipped(ggml_vocab_files: list[Path], name: str) -> Path:
    (path,) = [p for p in ggml_vocab_files if p.name == f"ggml-vocab-{name}.gguf"]
    return path


def _agrees(path: Path, real: dict, gguf: GgufModel | None = None) -> None:
    model = end_of_generation((gguf or load_gguf(path)).vocab)
    assert "error" not in real, (path.name, real)
    got = set(real["eog"])
    assert model.ids <= got <= model.ids | model.uncertain, (path.name, sorted(model.ids), got)


def test_the_executed_llama_cpp_is_the_installed_one():
    """The llama.cpp row says "executed with llama.cpp <commit> (llama-cpp-python <v>)"."""
    pytest.importorskip("llama_cpp", reason="pip install 'eosfix[runtimes]'")
    assert importlib.metadata.version("llama-cpp-python") == LLAMA_CPP_PYTHON
    assert describe("llama.cpp").executed == f"{LLAMA_CPP_COMMIT} (llama-cpp-python 0.3.36)"


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
def test_the_cases_are_every_vocabulary_the_sdist_ships(ggml_vocab_files):
    """The vocabulary tests below take one case per listed name: the list is the sdist's."""
    listed = {f"ggml-vocab-{name}.gguf" for name in LLAMA_CPP_VOCABULARIES}
    assert {p.name for p in ggml_vocab_files} == listed


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
@EVERY_VOCAB
def test_model_equals_real_llama_cpp_on_every_shipped_vocab(ggml_vocab_files, name):
    path = _shipped(ggml_vocab_files, name)
    gguf = load_gguf(path)
    assert gguf.vocab.model == LLAMA_CPP_VOCABULARIES[name]  # the cases below are by this type
    real = real_eog([path])[path]
    _agrees(path, real, gguf)
    assert gguf.specials.get("eos") == real["eos"]
    if gguf.specials.get("eot") is not None:  # determined (not a hash-order pick)
        assert gguf.specials.get("eot") == real["eot"]


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
@pytest.mark.parametrize("name", DECODED_VOCABS)
def test_token_pieces_equal_real_llama_cpp_on_every_shipped_vocab(ggml_vocab_files, name):
    """``diagnose`` reads a GGUF's generated ids as text: each token's bytes as llama.cpp's
    ``llama_token_to_piece`` writes them, for every vocabulary type eosfix decodes."""
    path = _shipped(ggml_vocab_files, name)
    model = load_gguf(path)
    assert model.vocab.model in DECODED_MODELS
    tokens = model.header.value("tokenizer.ggml.tokens")
    types = model.token_types or (1,) * len(tokens)
    real = real_eog([path], pieces=True)[path]["pieces"]
    wrong = [i for i, (t, k) in enumerate(zip(tokens, types, strict=True))
             if piece(model.vocab.model, t, k).hex() != real[i]]  # fmt: skip
    assert not wrong, [(i, tokens[i], real[i]) for i in wrong[:5]]


def _opener_template(model: GgufModel) -> dict[str, str] | None:
    """A GLM-like template whose replies end where the next turn opens, with three control
    tokens of this vocabulary that llama.cpp does not stop on; None when it has too few."""
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
# The vocabularies with a template of their own, and those with enough control tokens for the
# opener template (every one of them then fixable); the rest get EOS_TEMPLATE.
OWN_TEMPLATE = {"command-r", "gemma-4", "phi-3", "qwen2", "qwen35"}
OPENER_TEMPLATE = {"aquila", "falcon", "llama-bpe", "refact", "starcoder"}


@pytest.fixture(scope="session")
def vocab_copy(ggml_vocab_files, tmp_path_factory) -> Callable[[str], Path]:
    """NAME -> that shipped vocabulary with a chat template (written once per process): its
    own if it has one, else a template whose turn ends llama.cpp does not know (fixable), else
    one ending with eos_token. Which one it got is checked against the sets above."""
    out = tmp_path_factory.mktemp("vocab-copies")
    made: dict[str, Path] = {}

    def copy(name: str) -> Path:
        if name not in made:
            path = _shipped(ggml_vocab_files, name)
            dst = out / path.name
            model = load_gguf(path)
            own = bool(model.repo.templates)
            assert own == (name in OWN_TEMPLATE), name
            if own:
                shutil.copyfile(path, dst)
            else:
                opener = _opener_template(model)
                assert (opener is not None) == (name in OPENER_TEMPLATE), name
                copy_with_templates(path, dst, opener or EOS_TEMPLATE)
            made[name] = dst
        return made[name]

    return copy


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
@EVERY_VOCAB
def test_check_and_fix_every_vocab_copy_and_real_llama_cpp_agrees(vocab_copy, name, tmp_path):
    path = vocab_copy(name)
    before = real_eog([path])[path]
    _agrees(path, before)
    result = api.check(path)
    assert result.error is None, result.error
    terms = [t.id for t in result.check.id_terminators]
    stops = all(i in before["eog"] for i in terms)
    assert (not result.patches) == stops  # a fix exactly when needed
    if name in OPENER_TEMPLATE:
        assert result.patches  # the opener template makes the vocabulary fixable
    if not result.patches:
        return
    out = tmp_path / path.name
    assert api.fix_gguf(path, output=out).error is None
    after = real_eog([out])[out]
    _agrees(out, after)
    assert set(terms) <= set(after["eog"])  # real llama.cpp now stops
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


def _remote_reads_agree(fake_hub, files: dict[str, bytes]) -> None:
    """``files`` on the stand-in Hub: the verdict eosfix reads by ranges is llama.cpp's
    ``llama_vocab_is_eog`` of the same bytes, downloaded whole."""
    from huggingface_hub import hf_hub_download

    from eosfix.sources.hub.read import HubEntry, HubReader
    from eosfix.targets.gguf_hub import check_gguf_repo

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


@pytest.mark.package_index  # the sdist holding the vocabularies comes from the index
@EVERY_VOCAB
def test_remote_reads_agree_with_real_llama_cpp_on_the_file_downloaded_whole(
    vocab_copy, name, fake_hub
):
    """Every vocabulary (with a template) read from the stand-in Hub by ranges."""
    path = vocab_copy(name)
    _remote_reads_agree(fake_hub, {path.name: path.read_bytes()})


def test_remote_reads_of_written_ggufs_agree_with_real_llama_cpp(fake_hub, tmp_path):
    """Every GGUF these tests write, in one repo, read from the stand-in Hub by ranges."""
    written = [
        chatml(tmp_path / "chatml.gguf"),
        glm(tmp_path / "glm.gguf", tensor=bytes(range(256)) * 4),
        command_r(tmp_path / "command-r.gguf"),
    ]
    _remote_reads_agree(fake_hub, {p.name: p.read_bytes() for p in written})
