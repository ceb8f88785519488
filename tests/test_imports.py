"""What each command imports: start-up is most of a small check, so the set of modules is a
budget, asserted here (not a timing). A new import on these paths shows up as a diff below:
keep it out of the path (import it where it is used) or add it here on purpose.

Each case runs in a fresh interpreter, as the console script does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from eosfix.cli import LazyGroup, cli
from tests.conftest import SAMPLES

PROBE = """
import contextlib, io, json, sys
before = set(sys.modules)
from eosfix.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, sorted(set(sys.modules) - before)]))
"""

# The first screen: the group, its options, the command list (from LazyGroup.summaries).
CLI_ONLY = {
    "eosfix",
    "eosfix.cli",
    "eosfix.cli.term",
    "eosfix.core",
    "eosfix.core.errors",
    "eosfix.core.outcome",
}

# A check of one model folder: its [tool.eosfix] settings, the folder container, the
# analysis, the decision, every runtime's rule (the runtime table), and the renderers of
# --format (text, JSON, GitHub annotations, SARIF). No Hub, batch, cache, GGUF, ollama store,
# port kit, explain, pydantic model, or rich.
CHECK = CLI_ONLY | {
    "eosfix.analysis",
    "eosfix.analysis.branches",
    "eosfix.analysis.inturn",
    "eosfix.analysis.positions",
    "eosfix.analysis.probes",
    "eosfix.analysis.reads",
    "eosfix.analysis.replies",
    "eosfix.analysis.shapes",
    "eosfix.analysis.template",
    "eosfix.analysis.terminators",
    "eosfix.analysis.toolcalls",
    "eosfix.api",
    "eosfix.cli.common",
    "eosfix.cli.config",
    "eosfix.cli.repo",
    "eosfix.containers",
    "eosfix.containers.folder",
    "eosfix.containers.folder.container",
    "eosfix.containers.folder.files",
    "eosfix.containers.folder.earlystop",
    "eosfix.containers.folder.plan",
    "eosfix.containers.folder.read",
    "eosfix.containers.folder.readers",
    "eosfix.containers.folder.runtimes",
    "eosfix.containers.folder.stopconfig",
    "eosfix.containers.folder.stops",
    "eosfix.containers.target",
    "eosfix.core.codes",
    "eosfix.core.jsonedit",
    "eosfix.core.limits",
    "eosfix.core.memo",
    "eosfix.core.models",
    "eosfix.core.repo",
    "eosfix.core.saferead",  # every repo file is read through it: regular files only, bounded
    "eosfix.core.tokentext",
    "eosfix.decide",
    "eosfix.decide.check",
    "eosfix.decide.stopids",
    "eosfix.decide.stops",
    "eosfix.decide.verdicts",
    "eosfix.pipeline",
    "eosfix.render",
    "eosfix.render.annotations",
    "eosfix.render.report",
    "eosfix.render.runtimes",
    "eosfix.render.text",
    "eosfix.runtimes",
    "eosfix.runtimes.base",
    "eosfix.runtimes.candle",
    "eosfix.runtimes.config_defaults",
    "eosfix.runtimes.exllamav2",
    "eosfix.runtimes.inputs",
    "eosfix.runtimes.llamacpp",
    "eosfix.runtimes.llamacpp_convert",
    "eosfix.runtimes.mlx_lm",
    "eosfix.runtimes.mlx_vlm",
    "eosfix.runtimes.ollama",
    "eosfix.runtimes.ollama_engines",
    "eosfix.runtimes.ollama_gguf",
    "eosfix.runtimes.ollama_modelfile",
    "eosfix.runtimes.sglang",
    "eosfix.runtimes.tgi",
    "eosfix.runtimes.transformers",
    "eosfix.runtimes.vllm",
}

# The libraries a check imports: click, jinja2 (with markupsafe), and packaging.version,
# since ollama's current rule compares its own release bounds on every check (~300
# comparisons, ~1.6 ms of import). Not filelock (locking for fix on Windows), tomli (Python
# before 3.11), pydantic, tokenizers, huggingface_hub, gguf or rich.
CHECK_LIBS = {"click", "jinja2", "markupsafe", "packaging"}


def _imported(*args: str, cwd: Path | None = None) -> tuple[int, set[str], set[str]]:
    """(exit code, eosfix modules, other packages outside the standard library) that
    ``eosfix ARGS`` imports in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True, cwd=cwd
    ).stdout
    code, modules = json.loads(out)
    ours = {m for m in modules if m.split(".")[0] == "eosfix"}
    tops = {m.split(".")[0] for m in modules} - {"eosfix"}
    return code, ours, {t for t in tops if t not in sys.stdlib_module_names}


@pytest.mark.parametrize("args", [["--help"], ["--version"], []], ids=["help", "version", "none"])
def test_the_first_screen_imports_no_command(args):
    code, ours, others = _imported(*args)
    assert code == (0 if args else 2)  # no command: the help, as a usage error
    assert ours == CLI_ONLY
    assert others == {"click"}


@pytest.mark.parametrize(
    ("sample", "args"),
    [
        ("llama3-healthy", []),
        ("chatml-missing-im-end", ["--format", "json"]),
        ("named-templates", ["--quiet"]),
    ],
)
def test_a_check_imports_only_the_folder_path(sample, args):
    code, ours, others = _imported("check", *args, str(SAMPLES / sample))
    assert code in (0, 1)
    assert ours == CHECK
    assert others == CHECK_LIBS


def test_fix_diff_adds_only_the_patch_renderer():
    code, ours, others = _imported("fix", "--diff", str(SAMPLES / "chatml-missing-im-end"))
    assert code == 1
    assert ours == CHECK | {"eosfix.render.patch"}
    assert others == CHECK_LIBS


def _transformers5_repo(root: Path, tail: bytes) -> Path:
    """chatml-missing-im-end as transformers 5 saves it: the ids only in tokenizer.json,
    whose vocabulary is ``tail``."""
    import shutil

    repo = root / "repo"
    shutil.copytree(SAMPLES / "chatml-missing-im-end", repo, ignore=shutil.ignore_patterns("fixed"))
    config = json.loads((repo / "tokenizer_config.json").read_text())
    decoder = config.pop("added_tokens_decoder")
    (repo / "tokenizer_config.json").write_text(json.dumps(config))
    added = [{"id": int(k), **v} for k, v in decoder.items()]
    head = json.dumps({"version": "1.0", "added_tokens": added, "post_processor": None})
    (repo / "tokenizer.json").write_bytes(head[:-1].encode() + b', "model": {"vocab": ' + tail)
    return repo


def test_a_terminator_in_added_tokens_never_parses_the_vocabulary(tmp_path):
    """Its id and "is it one token" come from tokenizer.json's added_tokens: a vocabulary
    that is not even JSON (4 MB of it) is never read, and the tokenizers library is not
    loaded. The report is the one a well-formed vocabulary gives."""
    broken = _transformers5_repo(tmp_path / "broken", b"\xff not json " * 400_000)
    whole = _transformers5_repo(tmp_path / "whole", b'{"a": 0}, "type": "BPE"}}')
    code, ours, others = _imported("check", "--format", "json", str(broken))
    assert code == 1
    assert ours == CHECK
    assert "tokenizers" not in others
    outputs = [
        subprocess.run(
            [sys.executable, "-m", "eosfix", "check", "--format", "json", str(repo)],
            capture_output=True,
            text=True,
            check=False,
        )
        for repo in (broken, whole)
    ]
    assert outputs[0].returncode == outputs[1].returncode == 1
    assert outputs[0].stdout.replace(str(broken), "R") == outputs[1].stdout.replace(str(whole), "R")
    assert '"<|im_end|>"' in outputs[0].stdout


@pytest.mark.parametrize("width", [40, 60, 80, 100, 200])
def test_help_lists_each_command_as_the_command_itself_would(width, monkeypatch):
    """LazyGroup.summaries hold each command's first sentence: --help shows what click makes
    of the command's own help, at any terminal width."""
    assert set(LazyGroup.summaries) == set(LazyGroup.lazy)
    listed = cli.get_help(click.Context(cli, terminal_width=width, max_content_width=width))
    monkeypatch.setattr(LazyGroup, "summaries", {})  # every command imported and asked
    asked = cli.get_help(click.Context(cli, terminal_width=width, max_content_width=width))
    assert listed == asked
