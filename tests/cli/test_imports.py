"""What each command must not import: start-up is most of a small check, so what a command
does not use stays unloaded (asserted here, not timed). A module that starts being imported on
one of these paths fails here: keep it out of the path (import it where it is used).

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

# The first screen (--help, --version, no command) runs no command: none of the packages
# that check, fix or report is loaded (the command list comes from LazyGroup.summaries).
COMMAND_PACKAGES = (
    "eosfix.analysis", "eosfix.api", "eosfix.batch", "eosfix.containers", "eosfix.decide",
    "eosfix.pipeline", "eosfix.ports", "eosfix.render", "eosfix.runtimes", "eosfix.serve",
    "eosfix.sources",
)  # fmt: skip

# A check of one model folder reads the folder and reports on it: no Hub, batch, cache or
# serve machinery, no GGUF or ollama store, no port kit, no writer, no explain; and of the
# libraries only click, jinja2 (with markupsafe) and packaging.version (ollama's current
# rule compares its own release bounds on every check). Not filelock (locking for fix on
# Windows), tomli (Python before 3.11), pydantic (it only words a malformed file's error),
# tokenizers, huggingface_hub, gguf or rich.
NOT_IN_A_CHECK = (
    "eosfix.batch", "eosfix.sources", "eosfix.serve", "eosfix.ports",
    "eosfix.containers.gguf", "eosfix.containers.ollama", "eosfix.containers.folder.write",
    "eosfix.core.fileio", "eosfix.render.explain", "eosfix.render.batch", "eosfix.render.patch",
    "eosfix.render.pr", "eosfix.runtimes.ollama.modelfile",
)  # fmt: skip
CHECK_LIBS = {"click", "jinja2", "markupsafe", "packaging"}


def _under(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)}


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
    assert not _under(ours, COMMAND_PACKAGES)
    assert others == {"click"}


# A check that plans a fix also asks what would stop the writer (a symlink, a read-only file
# or folder: ``write_blocker``), with the writer's own stat checks: its module and fileio.
WRITER = ("eosfix.containers.folder.write", "eosfix.core.fileio")
NOT_IN_A_PLANNED_CHECK = tuple(m for m in NOT_IN_A_CHECK if m not in WRITER)


@pytest.mark.parametrize(
    ("sample", "args", "expected"),
    [
        ("llama3-healthy", [], NOT_IN_A_CHECK),
        ("chatml-missing-im-end", ["--format", "json"], NOT_IN_A_PLANNED_CHECK),
        ("named-templates", ["--quiet"], NOT_IN_A_PLANNED_CHECK),
    ],
)
def test_a_check_imports_only_the_folder_path(sample, args, expected):
    code, ours, others = _imported("check", *args, str(SAMPLES / sample))
    assert code in (0, 1)
    assert not _under(ours, expected)
    assert others == CHECK_LIBS


def test_fix_diff_adds_the_patch_renderer_and_no_writer():
    code, ours, others = _imported("fix", "--diff", str(SAMPLES / "chatml-missing-im-end"))
    assert code == 1
    assert "eosfix.render.patch" in ours
    assert not _under(ours, tuple(m for m in NOT_IN_A_PLANNED_CHECK if m != "eosfix.render.patch"))
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
    assert not _under(ours, NOT_IN_A_PLANNED_CHECK)
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
