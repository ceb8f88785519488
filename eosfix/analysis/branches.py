"""Variables that choose a branch writing an assistant message or a tool call, read from the
template's syntax tree, and the probes that take each side of them. Pure.

Command R7B and Command A are ``{% if documents %}`` a tool-use template ``{% else %}`` a
plain one: a probe that never sets ``documents`` never reaches a tool call.
:func:`branch_variables` finds every variable the template never sets that an ``if`` tests
where one of its branches writes an assistant message or a tool call (``documents``,
``tools``, ``builtin_tools``, ``tool_choice``, a custom flag), with what takes the side an
unset variable does not; :func:`branch_specs` runs each probe shape again on the side no
probe of its kind takes (``tool_call+documents``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from jinja2 import nodes

from eosfix.analysis.reads import (
    MODEL_TEXT,
    constant_strings,
    placeholders,
    selected_role,
    syntax_tree,
)
from eosfix.analysis.shapes import DOCUMENTS, SPECS, TOOL, TOOL_SCHEMA, ProbeSpec

# Names Jinja or the environment defines, and the two every render is given: never a branch
# variable.
_BUILTIN_NAMES = frozenset(
    {"loop", "range", "namespace", "dict", "lipsum", "cycler", "joiner", "super", "self"}
    | {"varargs", "kwargs", "caller", "raise_exception", "strftime_now", "true", "false", "none"}
    | {"messages", "add_generation_prompt"}  # every render is given both
)
_CALL_FIELDS = frozenset({"tool_calls", "tool_call"})


class Gate(NamedTuple):
    """A variable an ``if`` tests to choose a branch that writes an assistant message or a
    tool call, and what takes the branch an undefined value does not take.

    ``kind``: ``truthy`` (any true value of the type the template uses it as), ``value``
    (exactly ``value``: ``== 'auto'``, ``is false``), ``none`` (``is none`` / ``is not
    none``: None, unless the variable is always passed as None); ``line``: the first such
    ``if``.
    """

    name: str
    kind: str
    value: Any
    line: int


@functools.lru_cache(maxsize=256)
def branch_variables(source: str) -> tuple[Gate, ...]:
    """Variables the template never sets that an ``if`` tests where one of its branches
    writes an assistant message or a tool call: it selects the assistant role
    (``m.role == 'assistant'``, through ``lower`` too), reads a message's ``tool_calls``, or,
    inside an assistant message's branch, writes what the model wrote (``content``,
    ``arguments``). In template order; never ``loop``, ``range`` or another built-in name."""
    ast = syntax_tree(source)
    if ast is None:
        return ()
    walker = _GateWalker(ast)
    walker.body(ast.body, assistant=False)
    return tuple(walker.found.values())


def _set_outside_macros(node: nodes.Node, out: set[str]) -> None:
    """Names the template sets (``set``, loop targets) outside a macro: a macro's parameters
    and its own ``set`` are local to it (Command R7B's ``document_turn(documents)``)."""
    for child in node.iter_child_nodes():
        if isinstance(child, nodes.Macro):
            continue
        if isinstance(child, nodes.Name) and child.ctx in ("store", "param"):
            out.add(child.name)
        _set_outside_macros(child, out)


# What a subtree holds (``_GateWalker.holds``): a test selecting the assistant role, a read of
# a message's tool calls, a read of what the model wrote.
_ASSISTANT, _CALLS, _MODEL = 1, 2, 4


class _GateWalker:
    def __init__(self, ast: nodes.Template) -> None:
        self.ast = ast
        self.found: dict[str, Gate] = {}
        self._holds: dict[int, int] = {}  # id(node) -> what its subtree holds
        self._bound: frozenset[str] | None = None

    @property
    def bound(self) -> frozenset[str]:
        """Names the template sets itself, or Jinja's own (read once, when first needed)."""
        if self._bound is None:
            stored: set[str] = set()
            _set_outside_macros(self.ast, stored)
            self._bound = frozenset(stored) | _BUILTIN_NAMES
        return self._bound

    def body(self, stmts: Iterable[nodes.Node], assistant: bool) -> None:
        for node in stmts:
            self.stmt(node, assistant)

    def stmt(self, node: nodes.Node, assistant: bool) -> None:
        if not isinstance(node, nodes.If):
            for child in node.iter_child_nodes():
                if isinstance(child, nodes.Stmt):
                    self.stmt(child, assistant)
            return
        branches = [(node.test, node.body), *((e.test, e.body) for e in node.elif_)]
        tested = [g for test, _ in branches for g in _gates(test, _BUILTIN_NAMES)]
        bodies = [stmts for _, stmts in branches] + [node.else_]
        wanted = _ASSISTANT | _CALLS | (_MODEL if assistant else 0)
        if tested and any(self.holds(stmt) & wanted for stmts in bodies for stmt in stmts):
            for name, kind, value in tested:
                if name not in self.bound:
                    self.found.setdefault(name, Gate(name, kind, value, node.lineno))
        for test, stmts in branches:
            self.body(stmts, assistant or selected_role(test, filtered=True) == "assistant")
        self.body(node.else_, assistant)

    def holds(self, node: nodes.Node) -> int:
        """What ``node``'s subtree holds (``_ASSISTANT``, ``_CALLS``, ``_MODEL``), once."""
        key = id(node)
        found = self._holds.get(key)
        if found is not None:
            return found
        found = 0
        if isinstance(node, nodes.Compare) and selected_role(node, filtered=True) == "assistant":
            found |= _ASSISTANT
        field = _field(node)
        if field in _CALL_FIELDS:
            found |= _CALLS
        elif field in MODEL_TEXT:
            found |= _MODEL
        for child in node.iter_child_nodes():
            found |= self.holds(child)
        self._holds[key] = found
        return found


def _field(node: nodes.Node) -> str | None:
    """The attribute or constant key ``node`` reads (``m.tool_calls``, ``m['content']``)."""
    if isinstance(node, nodes.Getattr):
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return node.arg.value if isinstance(node.arg.value, str) else None
    return None


def _gates(test: nodes.Node, bound: frozenset[str]) -> list[tuple[str, str, Any]]:
    """(name, kind, value) for each free variable ``test`` reads (``Gate``)."""
    if isinstance(test, nodes.Name):
        return [] if test.name in bound else [(test.name, "truthy", None)]
    if isinstance(test, nodes.Not):
        return _gates(test.node, bound)
    if isinstance(test, (nodes.And, nodes.Or)):
        return _gates(test.left, bound) + _gates(test.right, bound)
    if isinstance(test, nodes.Test) and isinstance(test.node, nodes.Name):
        name = test.node.name
        if name in bound:
            return []
        if test.name in ("true", "false"):
            return [(name, "value", test.name == "true")]
        return [(name, "none" if test.name == "none" else "truthy", None)]
    if isinstance(test, nodes.Compare) and len(test.ops) == 1:
        left, op = test.expr, test.ops[0]
        if isinstance(left, nodes.Name) and left.name not in bound:
            if isinstance(op.expr, nodes.Const) and op.op in ("eq", "ne"):
                return [(left.name, "value", op.expr.value)]
            if isinstance(op.expr, nodes.Const) and op.op in ("in", "notin"):
                items = constant_strings(op.expr.value)
                return [(left.name, "value", items[0])] if items else []
            return [(left.name, "truthy", None)]
        right = op.expr
        if (
            isinstance(right, nodes.Name)
            and right.name not in bound
            and op.op in ("in", "notin")
            and isinstance(left, nodes.Const)
        ):
            return [(right.name, "value", [left.value])]
    if isinstance(test, (nodes.Getattr, nodes.Getitem, nodes.Filter)):
        inner = test.node
        if isinstance(inner, nodes.Name) and inner.name not in bound:
            return [(inner.name, "truthy", None)]
    return []


# The variables every render is given (``render_chat``: None unless a probe sets them), with
# the value a probe sets them to; ``builtin_tools`` names the probe tool.
_KNOWN_VALUES: dict[str, Any] = {
    "tools": [TOOL_SCHEMA],
    "documents": DOCUMENTS,
    "builtin_tools": [TOOL],
}
_PASSED_AS_NONE = frozenset({"tools", "documents"})
FLAG = "Eosfixflag"  # the value of a variable the template only needs to be set
_TRUE_OF: dict[str, Any] = {"str": FLAG, "int": 1, "list": [FLAG], "dict": {FLAG: FLAG}}
BRANCH_KINDS = ("final", "reasoning", "history", "tool_call", "tool_result")


def gate_value(source: str, gate: Gate) -> Any:
    """What a probe sets ``gate``'s variable to, to take the branch an unset one does not."""
    if gate.kind == "value":
        return gate.value
    if gate.kind == "none" and gate.name not in _PASSED_AS_NONE:
        return None
    if gate.name in _KNOWN_VALUES:
        return _KNOWN_VALUES[gate.name]
    used_as = placeholders(source, [gate.name]).get(gate.name)
    return _TRUE_OF.get(type(used_as).__name__, True) if used_as is not None else True


def branch_gates(source: str, given: frozenset[str]) -> tuple[tuple[Gate, Any], ...]:
    """The template's branch variables (``branch_variables``) with the
    value a probe sets each to. ``given``: variables every render gets (the special tokens),
    never a branch variable."""
    skip = given | {"messages", "add_generation_prompt"}
    return tuple(
        (gate, gate_value(source, gate))
        for gate in branch_variables(source)
        if gate.name not in skip
    )


def branch_specs(
    gates: Sequence[tuple[Gate, Any]], specs: Sequence[ProbeSpec] = ()
) -> tuple[ProbeSpec, ...]:
    """Each shape again on the side of a branch variable (``branch_gates``) that no probe of
    its kind takes: ``tool_call+documents`` where only ``final+documents`` sets
    ``documents``, ``tool_result-tools`` where every tool result is probed with ``tools``.
    ``specs``: the probes run besides ``SPECS``."""
    out: list[ProbeSpec] = []
    everything = (*SPECS, *specs)
    for gate, value in gates:
        for kind in BRANCH_KINDS:
            mine = [s for s in everything if s.kind == kind]
            if not mine:
                continue
            sides = {_side(s.kwargs, gate.name, value) for s in mine}
            base = mine[0]
            if True not in sides:
                kwargs = {**base.kwargs, gate.name: value}
                out.append(base._replace(name=f"{base.name}+{gate.name}", kwargs=kwargs))
            if False not in sides:
                kwargs = {k: v for k, v in base.kwargs.items() if k != gate.name}
                out.append(base._replace(name=f"{base.name}-{gate.name}", kwargs=kwargs))
    return tuple(out)


def _side(kwargs: Mapping[str, Any], name: str, value: Any) -> bool:
    """Whether a probe's variables take the side of ``name`` that ``value`` takes (the
    other side: unset, None, or, for a value compared with, a different one)."""
    if name not in kwargs:
        return False
    given = kwargs[name]
    if isinstance(value, (bool, str, int, float)) or value is None:
        return bool(given == value)
    return bool(given)
