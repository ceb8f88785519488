"""eosfix's model of the Hub's conversion for ``ollama run hf.co/...`` against the package the
Hub runs, executed from npm (tests/conformance/hubjs.py): ``@huggingface/ollama-utils``
0.0.18's ``convertGGUFTemplateToOllama`` on every template eosfix has at hand (the corpus, the
render goldens, the sample repos, the test GGUFs, the package's own table, and templates made
to take each branch), with the clock pinned; ``@huggingface/tasks`` 0.21.54's
``parseGGUFQuantLabel`` on file names; and the generated table against the package's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from eosfix.analysis.template import make_environment
from eosfix.runtimes.ollama import hub
from eosfix.runtimes.ollama.hub import convert
from tests.conformance import hubjs
from tests.conftest import CORPUS, ROOT, SAMPLES, unavailable
from tests.support import ggufs

GOLDENS = CORPUS / "render_goldens"
# Templates made to take each branch of the conversion (and its retries).
MADE = {
    "empty": "",
    "outetts": "{{ 'outetts-0.3' }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "astral in the prefix": "😀" * 70 + "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}",
    "refuses everything": "{{ raise_exception('no') }}",
    "refuses a system message": (
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
        "{% endif %}<|u|>{{ m.content }}<|e|>{% endfor %}"
    ),
    "hash marks": (
        "{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}### assistant:\n{% endif %}"
    ),
    "short user prefix": "{% for m in messages %}>{{ m.content }}<|eot|>{% endfor %}",
    "custom cpm": "{% for m in messages %}<用户>{{ m.content }}<AI>{% endfor %}",
    "custom glm4": "[gMASK]<sop>{% for m in messages %}<|user|>{{ m.content }}{% endfor %}",
    "bos and eos": "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}",
    "baked system": "<|system|>You are kind.<|end|>{% for m in messages %}{% if m.role != 'system' %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}",
    "dated": "Today is {{ strftime_now('%Y-%m-%d') }}.{% for m in messages %}<|t|>{{ m.content }}<|/t|>{% endfor %}",
}  # fmt: skip


def _token(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def _folder_cases(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    config_path = folder / "tokenizer_config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    except ValueError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    bos, eos = _token(config.get("bos_token")), _token(config.get("eos_token"))
    templates = [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.jinja"))]
    listed = config.get("chat_template")
    if isinstance(listed, str):
        templates.append(listed)
    elif isinstance(listed, list):
        templates += [t["template"] for t in listed if isinstance(t, dict) and "template" in t]
    return [
        (f"{folder.name}#{i}", {"chat_template": t, "bos_token": bos, "eos_token": eos})
        for i, t in enumerate(templates)
    ]


def _cases(table: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    for root in (CORPUS, SAMPLES):
        if root.is_dir():
            for folder in sorted(p for p in root.iterdir() if p.is_dir()):
                cases += _folder_cases(folder)
    for path in sorted(GOLDENS.glob("*.json")) if GOLDENS.is_dir() else []:
        case = json.loads(path.read_text(encoding="utf-8"))
        context = case.get("context") or {}
        cases.append((path.stem, {"chat_template": case["template"],
                                  "bos_token": _token(context.get("bos_token")),
                                  "eos_token": _token(context.get("eos_token"))}))  # fmt: skip
    for name in ("CHATML", "COMMAND_R", "REASONING"):
        cases.append((f"tests.support.ggufs.{name}", {"chat_template": getattr(ggufs, name)}))
    for path in (ggufs.GLM, ggufs.HARMONY):
        cases.append((path.parent.name, {"chat_template": path.read_text(encoding="utf-8")}))
    cases += [(f"table:{e['model']}", {"chat_template": e["gguf"]}) for e in table]
    cases += [(f"made:{k}", {"chat_template": v, "bos_token": "<s>", "eos_token": "</s>"})
              for k, v in MADE.items()]  # fmt: skip
    return cases


@pytest.fixture(scope="module")
def package() -> dict[str, Any]:
    why = hubjs.missing()
    if why is not None:
        unavailable(why, requirement="node")
    return hubjs.ask({"table": True})


def _expected(answer: Any) -> tuple[str, Any]:
    if answer is None:
        return hub.NONE, None
    if "error" in answer:
        return hub.ERROR, None
    return answer["model"], answer["ollama"].get("params")


def test_the_conversion_is_the_packages_on_every_template(package):
    cases = _cases(package["table"])
    assert len(cases) >= 150
    answers = hubjs.ask({"convert": [c for _, c in cases]})["convert"]
    env = make_environment()  # the real clock: a date in a template changes no stop list
    paths = set()
    for (name, case), answer in zip(cases, answers, strict=True):

        def render(source: str, context: dict[str, Any]) -> str:
            return env.from_string(source).render(**context)

        got = convert(case["chat_template"], case.get("bos_token"), case.get("eos_token"), render)
        path, params = _expected(answer)
        assert got.path == path, name
        assert (json.loads(got.params) if got.params else None) == params, name
        paths.add(got.path if got.path in (hub.AUTO, hub.CUSTOM_PATH, hub.NONE, hub.ERROR)
                  else "table")  # fmt: skip
    assert paths == {"table", hub.AUTO, hub.CUSTOM_PATH, hub.NONE, hub.ERROR}


def test_the_conversion_with_eosfix_sandboxed_renderer(package):
    """eosfix runs the conversion with its own bounded renderer (``analysis.template.render``)."""
    from eosfix.analysis.template import render

    cases = [(k, {"chat_template": v, "bos_token": "<s>", "eos_token": "</s>"})
             for k, v in MADE.items()]  # fmt: skip
    answers = hubjs.ask({"convert": [c for _, c in cases]})["convert"]
    for (name, case), answer in zip(cases, answers, strict=True):
        got = convert(case["chat_template"], "<s>", "</s>", render)
        path, params = _expected(answer)
        assert (got.path, json.loads(got.params) if got.params else None) == (path, params), name


LABELS = [
    "Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Mistral-Small-3.1-24B-D_AU-IQ3_S-imat.gguf",
    "x-Q4_K_M-00001-of-00003.gguf", "gpt-oss-20b-MXFP4.gguf", "model-q4_k_m.gguf",
    "model-Q4_0_4_4.gguf", "Meta-Llama-3-8B-Instruct.Q8_0.gguf", "phi-4-f16.gguf",
    "gemma-3-27b-it-BF16-00001-of-00002.gguf", "Qwen2.5-0.5B-Instruct-IQ2_XXS.gguf",
    "a-TQ1_0.gguf", "b-MXFP4_MOE.gguf", "c-Q2_K_S.gguf", "d-Q3_K_L.gguf", "e-Q5_K_S.gguf",
    "f-IQ4_NL.gguf", "g-IQ1_M.gguf", "h-Q6_K_XL.gguf", "i-NVFP4.gguf", "model.gguf",
    "Q8_0-then-Q4_K_M.gguf", "ß-q4_k_m.gguf", "UD-IQ2_M.gguf", "weird-Q4_K_MM.gguf",
]  # fmt: skip


def test_quant_labels_are_the_hubs(package):
    from eosfix.sources.hub.gguf import quant_label

    expected = hubjs.ask({"labels": LABELS})["labels"]
    assert [quant_label(n) for n in LABELS] == expected


def test_the_generated_table_is_the_packages(package):
    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools" / "gen_ollama_hubmap.py")
    assert spec is not None
    assert spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    module = ROOT / "eosfix" / "runtimes" / "ollama" / "hubmap.py"
    assert module.read_text(encoding="utf-8") == gen.module(package["table"]), (
        "eosfix/runtimes/ollama/hubmap.py is out of date: run python tools/gen_ollama_hubmap.py"
    )
