"""Every import in eosfix/ goes to its own layer or one below, and
no import closes a cycle. A newcomer reads the flow top-down (docs/development.md, "Where things live")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "eosfix"

# Bottom to top. A module may import from its own layer and the layers below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("eosfix", "eosfix.core"),  # eosfix/__init__.py holds only __version__
    ("eosfix.runtimes",),
    ("eosfix.analysis",),
    ("eosfix.decide",),
    ("eosfix.containers",),
    ("eosfix.pipeline", "eosfix.ports", "eosfix.result"),
    ("eosfix.sources",),
    ("eosfix.targets",),
    ("eosfix.batch",),
    ("eosfix.api",),
    ("eosfix.render",),
    ("eosfix.serve",),
    ("eosfix.cli", "eosfix.__main__"),
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _layer(module: str) -> int:
    best, found = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, found = len(name), i
    return found


def _imports(path: Path) -> list[tuple[str, int]]:
    """(module imported, line) for every eosfix import, at any depth (lazy ones too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.rsplit(".", node.level - (path.name == "__init__.py"))[0]
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if mod == "eosfix" or mod.startswith("eosfix."):
                # ``from eosfix.x import y`` may name a module y of package x
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    target = sub if _is_module(sub) else mod
                    out.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("eosfix")]
    return out


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    missing = [_module_name(p) for p in _modules() if _layer(_module_name(p)) < 0]
    assert not missing


def test_no_import_runs_up_a_layer():
    upward = []
    for path in _modules():
        me = _module_name(path)
        for target, line in _imports(path):
            if _layer(target) > _layer(me):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {me} -> {target}")
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    graph: dict[str, set[str]] = {}
    for path in _modules():
        me = _module_name(path)
        graph[me] = {t for t, _ in _imports(path) if t != me and t in _all_names()}
    cycles = _cycles(graph)
    assert not cycles, cycles


def _all_names() -> set[str]:
    return {_module_name(p) for p in _modules()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_long_modules_say_why(path):
    """A module over 400 lines says in its first lines why it is one module."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) > 400:
        head = "\n".join(lines[:12])
        assert "one module" in head.lower() or "one file" in head.lower(), path.name


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, init
        assert len(doc.splitlines()[0]) > 20, init
