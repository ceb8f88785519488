"""README, docs/ and --help stay in sync with the code."""

from __future__ import annotations

import re

import click
import pytest

from eosfix.cli import cli
from tests.conftest import ROOT, tool

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
# The README and the reference pages under docs/ (docs/_codes/ is folded into docs/codes.md).
ALL_DOCS = README + "".join(p.read_text() for p in sorted(DOCS.glob("*.md")))


def test_readme_starts_with_two_working_commands():
    block = re.search(r"```bash\n(.*?)\n```", README, re.DOTALL)
    assert block is not None
    first, second = block.group(1).splitlines()
    assert first.startswith("pip install . && eosfix check sample_repos/")
    sample = first.split()[-1]
    assert (ROOT / sample).is_dir()
    assert "pytest" in second


def test_ci_runs_the_readme_test_command():
    """Every step of the README's second command is in .ci/run, in its order (CI runs other
    stages between the install and the tests, not other steps instead of them)."""
    test_command = README.split("```bash\n", 1)[1].splitlines()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    at = 0
    for step in test_command.split(" && "):
        found = ci.find(step, at)
        assert found >= 0, f"{step!r} is not in .ci/run after what comes before it"
        at = found + len(step)


def test_every_command_has_help_and_is_in_readme():
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        assert cmd.help, name
        assert f"eosfix {name}" in README, name


def _gen_codes():
    return tool("gen_codes")


def test_every_finding_code_is_documented():
    """docs/codes.md lists every code of the one registry, with its title and its anchor
    (``Code.anchor``), and no other."""
    from eosfix.core.codes import CODES

    page = (DOCS / "codes.md").read_text()
    documented = re.findall(r"^## (EOS\d{3})", page, flags=re.MULTILINE)
    assert documented == list(CODES)
    for code, entry in CODES.items():
        assert f"## {code} — {entry.title} (" in page, code
        assert f"{{ #{entry.anchor} }}\n" in page, code


def test_codes_page_is_generated_from_the_registry():
    """The committed docs/codes.md is exactly what tools/gen_codes.py writes: a code added,
    retitled or made fixable in eosfix/core/codes.py fails here until the page is regenerated;
    every prose file of docs/_codes/ names a registered code and is on the page."""
    gen = _gen_codes()
    assert (DOCS / "codes.md").read_text(encoding="utf-8") == gen.markdown(), (
        "docs/codes.md is out of date: run python tools/gen_codes.py"
    )
    page = gen.markdown()
    for prose in (DOCS / "_codes").glob("*.md"):
        assert prose.read_text(encoding="utf-8").strip("\n") in page, prose.name


def test_codes_page_generator_follows_the_registry(monkeypatch):
    """The generator reads the registry, not a copy: a changed entry changes the page, and
    prose for an unknown code is refused."""

    from eosfix.core import codes

    gen = _gen_codes()
    entry = codes.CODES["EOS004"]
    changed = dict(codes.CODES)
    changed["EOS004"] = entry._replace(fixable=True, title="a new title")
    monkeypatch.setattr(gen, "CODES", changed)
    page = gen.markdown()
    assert "## EOS004 — a new title (fixable, warning) { #eos004 }" in page
    assert "| [EOS004](#eos004) | warning | yes | a new title |" in page
    del changed["EOS001"]
    with pytest.raises(SystemExit, match="EOS001"):
        gen.markdown()  # docs/_codes/EOS001.md names a code the registry no longer holds


def test_every_long_option_is_in_readme():
    """Every long option is in the README or a docs page (its reference)."""
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        for param in cmd.params:
            if isinstance(param, click.Option):
                opts = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
                assert any(o in ALL_DOCS for o in opts), (name, opts)


def _python_api_snippet() -> str:
    page = (DOCS / "python-api.md").read_text()
    section = page[page.index("# Python API") :]
    block = re.search(r"```python\n(.*?)\n```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


@pytest.mark.parametrize(
    "target",
    ["chatml-missing-im-end", "llama3-healthy", "base-model", "missing", "readme", "gguf"],
)
def test_readme_python_api_snippet_runs_on_every_kind_of_path(target, tmp_path, capsys):
    """The snippet never crashes: a fixable repo, a healthy one, a base model, a missing
    path, a file that is no model, a GGUF (no AttributeError on a result without a check)."""
    from tests.conftest import SAMPLES, copy_repo
    from tests.support import ggufs

    if target in ("missing", "readme"):
        path = tmp_path / "README.md"
        if target == "readme":
            path.write_text("hi\n")
    elif target == "gguf":
        path = ggufs.chatml(tmp_path / "m.gguf")
    else:
        path = copy_repo(SAMPLES / target, tmp_path / target)
    code = _python_api_snippet().replace('"./my-model"', repr(str(path)))
    exec(compile(code, "docs/python-api.md", "exec"), {})  # noqa: S102 - the docs' own example
    out = capsys.readouterr().out.splitlines()
    if target == "chatml-missing-im-end":
        assert out == [
            "fixable ['<|im_end|>']",
            "(248044, 248046)",
            "('generation_config.json',)",
            "ok",
        ]
    elif target in ("missing", "readme"):
        assert out[0].startswith(f"{path}: ")
        assert out[-1] == "error"


def test_readme_exit_code_table_matches_the_constants_and_help():
    from eosfix.render import report

    table = README[README.index("## Exit codes") :]
    for code in (report.EXIT_OK, report.EXIT_FINDINGS, report.EXIT_INPUT, report.EXIT_INTERNAL):
        assert f"\n| {code} | " in table
    assert "--strict" in table.split("\n| 1 |")[1].split("\n")[0]
    ctx = click.Context(cli)
    for name in ("check", "fix", "cache", "hub"):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        assert "unless --strict" in " ".join((cmd.help or "").split()), name


def _gen_runtimes():
    return tool("gen_runtimes")


def test_runtimes_table_is_generated_from_the_rules():
    """docs/runtimes.md's table is exactly what tools/gen_runtimes.py writes from RUNTIMES: a
    rule that changes what it reads, its versions or its basis fails here until the table is
    regenerated."""
    gen = _gen_runtimes()
    page = (DOCS / "runtimes.md").read_text(encoding="utf-8")
    assert page == gen.page(page), (
        "docs/runtimes.md is out of date: run python tools/gen_runtimes.py"
    )


def test_runtime_table_says_what_is_executed_and_follows_the_rules():
    """Each runtime's row says "executed with" exactly when eosfix runs its rule against the
    runtime (``Runtime.executed``), else where it was read; a changed rule changes its row."""
    import dataclasses

    from eosfix.runtimes import RUNTIMES

    gen = _gen_runtimes()
    rows = {r.name: gen.row(r).rstrip(" |").split(" | ")[-1] for r in RUNTIMES}
    for r in RUNTIMES:
        if r.executed is None:  # never a row with neither
            assert rows[r.name] == f"cited at {r.source}", r.name
        else:
            assert rows[r.name].startswith("executed with "), r.name
            assert r.executed.split(" (")[0] in rows[r.name], r.name
    changed = dataclasses.replace(RUNTIMES[0], reads="a new file", executed=None)
    assert gen.row(changed).startswith("| transformers | a new file; ")
    assert gen.row(changed).endswith(f" | cited at {changed.source} |")


# A test named in the docs: `test_x` (in the page's own test file) or `tests/a/b.py::test_x`.
_NAMED_TEST = re.compile(r"`(?:(tests/[\w/]+\.py)::)?(test_\w+)`")


def _guarantees(page: str, default: str | None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each ``- **Title.**`` bullet of ``page`` with the tests it names (file, name)."""
    bullets = re.findall(r"^- \*\*(.+?)\*\*(.*?)(?=^- \*\*|^#|\Z)", page, re.MULTILINE | re.DOTALL)
    return [
        (title, [(f or default or "", name) for f, name in _NAMED_TEST.findall(body)])
        for title, body in bullets
    ]


def _defined(path: str) -> set[str]:
    source = (ROOT / path).read_text()
    return set(re.findall(r"^(?:async )?def (test_[a-z0-9_]+)\(", source, re.MULTILINE))


@pytest.mark.parametrize(
    ("page", "default", "least"),
    [("safety.md", "tests/test_faults.py", 10), ("serve.md", None, 12), ("page.md", None, 10)],
)
def test_every_guarantee_names_a_test_that_exists(page, default, least):
    """docs/safety.md, docs/serve.md and docs/page.md state each guarantee with the test that proves it
    (a bare name is a test of tests/test_faults.py): every test named exists, and every
    guarantee names at least one."""
    guarantees = _guarantees((DOCS / page).read_text(), default)
    assert len(guarantees) >= least
    assert all(tests for _, tests in guarantees), [t for t, tests in guarantees if not tests]
    named = {test for _, tests in guarantees for test in tests}
    missing = [f"{f}::{n}" for f, n in sorted(named) if not f or n not in _defined(f)]
    assert not missing, missing


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _page_links(page):
    """The relative link targets of a docs page, outside code blocks and code spans."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_every_relative_link_of_a_docs_page_names_a_page_of_the_site(page):
    """mkdocs (strict) refuses a link to a file that is not a page of docs/: a link is
    relative to the page's own folder, so `docs/x.md` from a page in docs/ names nothing."""
    for target in _page_links(page):
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_file(), f"{page.name}: {target}"
        assert path.is_relative_to(DOCS.resolve()), f"{page.name}: {target}"


def test_ci_builds_the_docs_site_so_that_a_warning_fails_it():
    """`mkdocs build --strict` counts warnings; `-q` hides them and the build passes whatever
    the docs hold. .ci/run builds without it, then breaks a link in a copy of the docs and
    requires that build to fail (the proof that the step can fail)."""
    ci = (ROOT / ".ci" / "run").read_text()
    builds = [line for line in ci.splitlines() if "mkdocs build" in line]
    assert builds
    for line in builds:
        assert "--strict" in line.split(), line
        assert not {"-q", "--quiet"} & set(line.split()), line
    assert "a broken link did not fail the docs build" in ci


def test_an_eosfix_version_the_docs_or_help_name_as_past_is_earlier_than_this_one():
    """'The order of eosfix 0.1.0 still works' read wrong in 0.1.0 itself: a version the docs
    or a command's help name is an earlier release than the one installed."""
    from packaging.version import Version

    import eosfix

    ctx = click.Context(cli)
    helps = [cli.get_command(ctx, name).help or "" for name in cli.list_commands(ctx)]
    text = " ".join((ALL_DOCS + " ".join(helps)).split())
    for version in re.findall(r"\beosfix (\d+\.\d+(?:\.\d+)?)\b", text):
        assert Version(version) < Version(eosfix.__version__), version


def _help_texts() -> dict[str, str]:
    """Every command's help and every option's, as --help prints them (by command)."""
    ctx = click.Context(cli)
    out = {}
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        helps = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        out[name] = " ".join(" ".join(h.split()) for h in helps)
    return out


def _headings(text: str) -> set[str]:
    """A page's headings as a reader sees them (Markdown code marks dropped)."""
    found = re.findall(r"^#+ (.+?)(?: \{ #[\w-]+ \})?$", text, flags=re.MULTILINE)
    return {h.replace("`", "").strip() for h in found}


# A section a help text sends the reader to: README ("Exit codes"), docs/ports.md ("...").
_SECTION = re.compile(r"""(README|docs/[\w-]+\.md) \("([^"]+)"\)""")


def test_every_section_a_help_text_names_is_in_that_page():
    """``eosfix goldens --help`` once sent readers to a README section that lives in
    docs/ports.md: every ``PAGE ("Heading")`` a help text names is a heading of PAGE."""
    named = 0
    for command, text in _help_texts().items():
        for page, heading in _SECTION.findall(text):
            path = ROOT / "README.md" if page == "README" else ROOT / page
            assert path.is_file(), (command, page)
            assert heading in _headings(path.read_text()), (command, page, heading)
            named += 1
    assert named, "no help text names a section: the pattern no longer matches them"
    for command, text in _help_texts().items():  # a page named any other way is not checked
        assert not re.search(r"README(?! \(\")|docs/[\w-]+\.md(?! \(\")", text), command


def test_the_payload_fields_docs_serve_says_are_required_are_the_ones_refused_without():
    """docs/serve.md names the fields a push must hold; removing any one of them from its own
    example is refused (400), and removing any other field is not."""
    pytest.importorskip("fastapi")
    import copy
    import json
    from pathlib import Path as _Path

    from huggingface_hub import WebhookPayload
    from pydantic import ValidationError

    from eosfix.serve.app import classify, names_problem
    from eosfix.serve.config import ServeConfig

    page = (DOCS / "serve.md").read_text()
    example = json.loads(re.search(r"```json\n(.*?)```", page, re.DOTALL).group(1))
    sentence = re.search(r"requires more: (.*?) are\s+required", page, re.DOTALL)
    assert sentence is not None
    said = set(re.findall(r"`([\w.]+)`", sentence.group(1)))
    config = ServeConfig(
        secret="s", token="t", policy="pr", authors=frozenset({"acme"}), state_dir=_Path(".")
    )

    def refused(data: dict) -> bool:
        if names_problem(data) is not None:
            return True
        try:
            payload = WebhookPayload.model_validate_json(json.dumps(data))
        except ValidationError:
            return True
        classify(payload, config, data["repo"].get("headSha"))
        return False

    def leaves(node: dict, prefix: str = "") -> list[str]:
        out = []
        for key, value in node.items():
            path = f"{prefix}{key}"
            out += leaves(value, path + ".") if isinstance(value, dict) else [path]
        return out

    assert not refused(example)
    required = set()
    for path in leaves(example):
        data = copy.deepcopy(example)
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[last]
        if refused(data):
            required.add(path)
    assert said == required
