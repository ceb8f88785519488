"""What a chat template reads and writes, from its syntax tree (never rendered). Pure.
One module, a little over 400 lines: every reader below walks the same parsed tree with the
same helpers (which role an ``if`` selects, what the model wrote, folded constants).

- :func:`undeclared_names`: the variables a template looks up from its context
  (``jinja2.meta.find_undeclared_variables``), e.g. ``functions``, ``datetime``,
  ``tools_in_user_message``, ``custom_tools``: names no probe passes unless told.
- :func:`placeholders`: a harmless value of the type each undeclared name is used as
  (concatenated: ``""``; counted with: ``1``; iterated or serialised: ``[]``; indexed: ``{}``),
  for a probe that failed only because the name was undefined.
- :func:`mentions`: which words the template's text holds, so a probe for a content-part type
  (or for a flag around a reasoning block) is run only when the template can read it.
- :func:`reasoning_flags`: variables no probe passes that decide whether a reasoning block is
  written (``{% if enable_thinking %}...{{ m.reasoning }}``), with the value that writes it.
- :func:`ending_literals`: the control tokens the template text writes right after what the
  model writes (a message's content, a call's arguments): where a reply can end. These are
  the only literals reported as "possible" terminators when no probe reaches them.
- :func:`selected_role`: which role an ``if`` selects (``m.role == 'assistant'``), for
  ``eosfix.analysis.branches`` too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from jinja2 import meta, nodes

from eosfix.analysis.template import parse_template
from eosfix.core.errors import TemplateError


class TokenFinder(Protocol):
    """What finds control tokens in a text (``eosfix.analysis.positions.SpecialScanner``,
    which this module cannot import: positions needs probes, and probes need this module)."""

    def find(self, text: str) -> list[tuple[str, int]]: ...


# Where a message's reasoning is read from (fields, or a content part's key).
REASONING_NAMES = frozenset({"reasoning_content", "reasoning", "thinking", "thought", "thoughts"})
# Attributes whose value the model writes: a message's content (or a content part's text)
# and a tool call's arguments.
MODEL_TEXT = frozenset({"content", "text", "arguments"})
_STR_FILTERS = frozenset({"trim", "string", "lower", "upper", "capitalize", "title", "replace"})
_LIST_FILTERS = frozenset(
    {"tojson", "first", "last", "join", "map", "select", "selectattr", "reject", "rejectattr"}
    | {"list", "sort", "unique", "batch", "slice", "sum", "min", "max", "reverse"}
)
_DICT_FILTERS = frozenset({"items", "dictsort"})
_ARITHMETIC = (nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow)


def syntax_tree(source: str) -> nodes.Template | None:
    """The template's syntax tree, shared with the renderer: compiling it folds constant
    expressions in place (``['a', 'b']`` becomes one ``Const`` holding a list), so every walk
    here reads a constant's strings whatever its shape (``constant_strings``)."""
    try:
        return parse_template(source)
    except TemplateError:
        return None


def constant_strings(value: Any) -> list[str]:
    """The strings of a constant: itself, or the items of a folded list, tuple or dict."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return [v for v in value if isinstance(v, str)]
    return []


@functools.lru_cache(maxsize=256)
def undeclared_names(source: str) -> frozenset[str]:
    """Variables the template looks up from its context (globals such as ``range`` excluded)."""
    ast = syntax_tree(source)
    return frozenset() if ast is None else frozenset(meta.find_undeclared_variables(ast))


@functools.lru_cache(maxsize=256)
def mentions(source: str, words: frozenset[str]) -> frozenset[str]:
    """Which of ``words`` the template's text holds as a whole word: every attribute
    (``m.thinking``), item key (``m['thinking']``) or string constant
    (``part.type == 'thinking'``) it can read is among them (comments too: a superset, read
    off the text without walking the syntax tree)."""
    return frozenset(re.findall(r"\b(" + "|".join(map(re.escape, sorted(words))) + r")\b", source))


@functools.lru_cache(maxsize=256)
def reasoning_flags(source: str) -> tuple[tuple[str, bool], ...]:
    """Variables the template never sets, tested where a reasoning block is written (an
    ``if`` whose body, or a conditional expression whose value, reads a reasoning field),
    each with the value that writes the block: ``True``, ``False`` under ``not`` or
    ``is false``."""
    ast = syntax_tree(source)
    if ast is None or not mentions(source, REASONING_NAMES):
        return ()
    stored = {n.name for n in ast.find_all(nodes.Name) if n.ctx in ("store", "param")}
    free = frozenset(n.name for n in ast.find_all(nodes.Name) if n.name not in stored)
    out: dict[str, bool] = {}
    for node in ast.find_all(nodes.If):
        if any(_reads_reasoning(stmt) for stmt in node.body):
            _flags(node.test, free, out, negated=False)
    for expr in ast.find_all(nodes.CondExpr):
        if _reads_reasoning(expr.expr1):
            _flags(expr.test, free, out, negated=False)
    return tuple(sorted(out.items()))


def _reads_reasoning(node: nodes.Node) -> bool:
    for n in (node, *node.find_all((nodes.Getattr, nodes.Getitem))):
        if isinstance(n, nodes.Getattr) and n.attr in REASONING_NAMES:
            return True
        arg = n.arg if isinstance(n, nodes.Getitem) else None
        if (
            isinstance(arg, nodes.Const)
            and isinstance(arg.value, str)
            and arg.value in REASONING_NAMES
        ):
            return True
    return False


def _flags(test: nodes.Node, free: frozenset[str], out: dict[str, bool], negated: bool) -> None:
    if isinstance(test, nodes.Not):
        _flags(test.node, free, out, not negated)
    elif isinstance(test, (nodes.And, nodes.Or)):
        _flags(test.left, free, out, negated)
        _flags(test.right, free, out, negated)
    elif isinstance(test, nodes.Name) and test.name in free:
        out.setdefault(test.name, not negated)
    elif (
        isinstance(test, nodes.Test)
        and isinstance(test.node, nodes.Name)
        and test.node.name in free
        and test.name in ("true", "false")
    ):
        out.setdefault(test.node.name, (test.name == "true") != negated)


def placeholders(source: str, names: Iterable[str]) -> dict[str, Any]:
    """A harmless value for each of ``names`` the template uses in a way an undefined value
    fails (concatenation, arithmetic, serialisation, indexing); names only tested
    (``if x``, ``x is defined``) are left out: undefined already works there."""
    wanted = set(names)
    kinds: dict[str, str] = {}
    for name, kind in _usages(source):
        if name in wanted and _RANK[kind] > _RANK.get(kinds.get(name, ""), -1):
            kinds[name] = kind
    return {name: _VALUES[kind]() for name, kind in sorted(kinds.items())}


_VALUES: dict[str, Any] = {"str": str, "int": lambda: 1, "list": list, "dict": dict}
_RANK = {"dict": 0, "list": 1, "int": 2, "str": 3}  # a concatenated name is text first


@functools.lru_cache(maxsize=256)
def _usages(source: str) -> tuple[tuple[str, str], ...]:
    """(name, kind) for each use of a bare name that an undefined value would fail."""
    ast = syntax_tree(source)
    if ast is None:
        return ()
    out: list[tuple[str, str]] = []

    def visit(node: nodes.Node) -> None:
        for child in node.iter_child_nodes():
            if isinstance(child, nodes.Name) and child.ctx == "load":
                kind = _use(node, child)
                if kind is not None:
                    out.append((child.name, kind))
            visit(child)

    visit(ast)
    return tuple(out)


def _use(parent: nodes.Node, name: nodes.Name) -> str | None:
    """How ``parent`` uses ``name``, as the type a placeholder needs (None: no constraint)."""
    if isinstance(parent, (nodes.Add, nodes.Concat)):
        other = [n for n in parent.iter_child_nodes() if n is not name]
        numeric = any(isinstance(o, nodes.Const) and type(o.value) in (int, float) for o in other)
        return "int" if numeric and isinstance(parent, nodes.Add) else "str"
    if isinstance(parent, (*_ARITHMETIC, nodes.Neg, nodes.Pos)):
        return "int"
    if isinstance(parent, nodes.Filter) and parent.node is name:
        if parent.name in _STR_FILTERS:
            return "str"
        if parent.name in _DICT_FILTERS:
            return "dict"
        return "list" if parent.name in _LIST_FILTERS else None
    if isinstance(parent, nodes.For) and parent.iter is name:
        return "list"
    if isinstance(parent, (nodes.Getitem, nodes.Getattr)) and parent.node is name:
        return "dict"
    if isinstance(parent, nodes.Compare) and any(
        isinstance(o.expr, nodes.Const) and type(o.expr.value) in (int, float) for o in parent.ops
    ):
        return "int"
    return None


# --- where the template text can end a reply ---------------------------------------------


@functools.lru_cache(maxsize=256)
def ending_literals(
    source: str, scanner: TokenFinder, special_tokens: tuple[tuple[str, str], ...] = ()
) -> frozenset[str]:
    """Control tokens the template writes first after model-written text.

    ``scanner`` finds the control tokens in a literal; ``special_tokens`` (name, content)
    resolves ``{{ eos_token }}``-style names. Walks the template in
    output order: what is written after a message's content or a call's arguments, before
    any other control token, ends a reply there. Text written only for a user, system or tool
    message, or as the generation prompt, does not count.
    """
    ast = syntax_tree(source)
    if ast is None:
        return frozenset()
    walker = _EndWalker(scanner.find, dict(special_tokens))
    walker.body(ast.body, False, None)
    return frozenset(walker.found)


Piece = tuple[Any, ...]  # ("text", str) | ("model",) | ("either", [Piece], [Piece])


class _EndWalker:
    """Walks statements in output order; ``after`` is True right after model-written text."""

    def __init__(self, find: Any, special_tokens: Mapping[str, str]) -> None:
        self.find = find
        self.special_tokens = dict(special_tokens)
        self.model_names: set[str] = set(MODEL_TEXT)  # names bound to model-written text
        self.bound: dict[str, list[Piece]] = {}  # ``{% set x = ... %}``: what ``{{ x }}`` writes
        self.found: set[str] = set()
        self._tokens: dict[str, list[str]] = {}  # literal -> its control tokens

    def tokens(self, text: str) -> list[str]:
        if text not in self._tokens:
            self._tokens[text] = [tok for tok, _ in self.find(text)]
        return self._tokens[text]

    def body(self, stmts: Iterable[nodes.Node], after: bool, role: str | None) -> bool:
        for node in stmts:
            after = self.stmt(node, after, role)
        return after

    def stmt(self, node: nodes.Node, after: bool, role: str | None) -> bool:
        if isinstance(node, nodes.Output):
            for child in node.nodes:
                after = self.write(self.pieces(child), after, role)
            return after
        if isinstance(node, nodes.If):
            return self._if(node, after, role)
        if isinstance(node, nodes.For):
            if self._is_model(node.iter):
                self.model_names |= {n.name for n in node.target.find_all(nodes.Name)}
            once = self.body(node.body, after, role)
            twice = self.body(node.body, after or once, role)  # an iteration follows another
            rest = self.body(node.else_, after, role) if node.else_ else after
            return after or once or twice or rest
        if isinstance(node, nodes.Assign):
            self._assign(node)
            return after
        if isinstance(node, nodes.Macro):
            self.body(node.body, False, role)
            return after
        if isinstance(node, (nodes.CallBlock, nodes.FilterBlock, nodes.With, nodes.Scope)):
            return self.body(node.body, after, role)
        if isinstance(node, nodes.ScopedEvalContextModifier):
            return self.body(node.body, after, role)
        return after

    def _assign(self, node: nodes.Assign) -> None:
        names = [n.name for n in node.target.find_all(nodes.Name)]
        if self._is_model(node.node):
            self.model_names.update(names)
        if isinstance(node.target, nodes.Name):
            self.bound[node.target.name] = self.pieces(node.node)  # self-references expanded

    def _if(self, node: nodes.If, after: bool, role: str | None) -> bool:
        ends = []
        branches = [(node.test, node.body), *((e.test, e.body) for e in node.elif_)]
        for test, stmts in branches:
            if _reads(test, "add_generation_prompt", negated=False):
                ends.append(self.body(stmts, False, "prompt"))  # the generation prompt
                continue
            ends.append(self.body(stmts, after, selected_role(test) or role))
        ends.append(self.body(node.else_, after, role) if node.else_ else after)
        return any(ends)

    def pieces(self, expr: nodes.Node) -> list[Piece]:
        """What an expression writes, in order: literal text and model-written text."""
        if isinstance(expr, nodes.TemplateData):
            return [("text", expr.data)]
        if isinstance(expr, nodes.Const):
            return [("text", expr.value)] if isinstance(expr.value, str) else []
        if isinstance(expr, nodes.Name):
            if expr.name in self.bound:
                return self.bound[expr.name]
            if expr.name in self.special_tokens:
                return [("text", self.special_tokens[expr.name])]
        if isinstance(expr, (nodes.Add, nodes.Concat)):
            parts = expr.nodes if isinstance(expr, nodes.Concat) else (expr.left, expr.right)
            return [piece for part in parts for piece in self.pieces(part)]
        if isinstance(expr, nodes.CondExpr):
            no = self.pieces(expr.expr2) if expr.expr2 is not None else []
            return [("either", self.pieces(expr.expr1), no)]
        if isinstance(expr, nodes.Filter) and expr.node is not None and expr.name in _STR_FILTERS:
            return self.pieces(expr.node)
        return [("model",)] if self._is_model(expr) else []

    def write(self, pieces: list[Piece], after: bool, role: str | None) -> bool:
        for piece in pieces:
            if piece[0] == "text":
                for token in self.tokens(piece[1]):
                    if after and role != "prompt":
                        self.found.add(token)
                    after = False
            elif piece[0] == "model":
                after = after or role not in ("other", "prompt")
            else:
                yes, no = self.write(piece[1], after, role), self.write(piece[2], after, role)
                after = yes or no
        return after

    def _is_model(self, expr: nodes.Node) -> bool:
        for node in (expr, *expr.find_all((nodes.Getattr, nodes.Getitem, nodes.Name))):
            if isinstance(node, nodes.Getattr) and node.attr in MODEL_TEXT:
                return True
            arg = node.arg if isinstance(node, nodes.Getitem) else None
            if (
                isinstance(arg, nodes.Const)
                and isinstance(arg.value, str)
                and arg.value in MODEL_TEXT
            ):
                return True
            if isinstance(node, nodes.Name) and node.name in self.model_names:
                return True
        return False


def _reads(test: nodes.Node, name: str, *, negated: bool) -> bool:
    """Whether ``test`` reads ``name`` (outside a ``not`` unless ``negated``)."""
    if isinstance(test, nodes.Not):
        return _reads(test.node, name, negated=not negated) if negated else False
    if isinstance(test, nodes.Name):
        return test.name == name and not negated
    if isinstance(test, nodes.And):
        return _reads(test.left, name, negated=negated) or _reads(test.right, name, negated=negated)
    return False


ASSISTANT_ROLES = frozenset({"assistant", "model", "chatbot"})


def selected_role(test: nodes.Node, *, filtered: bool = False) -> str | None:
    """ "assistant" when ``test`` selects assistant messages (``m.role == 'assistant'``),
    "other" when it selects only other roles, None when it says nothing about the role
    (a comparison under ``not`` says nothing). ``filtered``: also a role read through a text
    filter (``m.role | lower == 'assistant'``)."""
    roles: set[str] = set()
    _roles(test, roles, filtered)
    if not roles:
        return None
    return "assistant" if roles & ASSISTANT_ROLES else "other"


def _roles(test: nodes.Node, out: set[str], filtered: bool = False) -> None:
    if isinstance(test, (nodes.And, nodes.Or)):
        _roles(test.left, out, filtered)
        _roles(test.right, out, filtered)
    elif (
        isinstance(test, nodes.Compare)
        and _is_role(_unfiltered(test.expr) if filtered else test.expr)
        and len(test.ops) == 1
    ):
        op = test.ops[0]
        if op.op == "eq" and isinstance(op.expr, nodes.Const) and isinstance(op.expr.value, str):
            out.add(op.expr.value)
        elif op.op == "in" and isinstance(op.expr, (nodes.List, nodes.Tuple)):
            out.update(
                v
                for i in op.expr.items
                if isinstance(i, nodes.Const)
                for v in constant_strings(i.value)
            )
        elif op.op == "in" and isinstance(op.expr, nodes.Const):
            out.update(constant_strings(op.expr.value))


def _unfiltered(expr: nodes.Node) -> nodes.Node:
    """``expr`` without the text filters it is read through (``m.role | lower | trim``)."""
    while isinstance(expr, nodes.Filter) and expr.node is not None and expr.name in _STR_FILTERS:
        expr = expr.node
    return expr


def _is_role(expr: nodes.Node) -> bool:
    if isinstance(expr, nodes.Getattr):
        return expr.attr == "role"
    return (
        isinstance(expr, nodes.Getitem)
        and isinstance(expr.arg, nodes.Const)
        and expr.arg.value == "role"
    )
