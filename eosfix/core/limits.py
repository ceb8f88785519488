"""Bounds on rendering an untrusted chat template, and the process memory ceiling.

One module, over 400 lines: every budget is charged by the same guarded sandbox (its code
generator, filters and calls), so the bounds and their enforcement are read together.

A chat template is code written by a stranger. The Jinja sandbox blocks attribute escapes,
but not work or memory: ``range(10**5)`` nested loops, ``'a' * 10**10``, a string doubled in
a loop, an exponential macro. :class:`GuardedSandbox` adds budgets, checked *before* an
operation allocates where the size can be predicted, and on every result otherwise:

- **size**: no string, list or int built by the template (binary operators, ``~``, calls,
  filters, ``{{ }}`` output) may exceed ``max_size`` characters (or items; ints
  ``max_int_bits``);
- **output**: the text of one render (and of any macro or ``{% set %}`` block) is at most
  ``max_output`` characters;
- **allocation**: the characters all those operations build in one render, garbage
  included (a loop filling a macro's buffer with fresh strings);
- **loop iterations** and **calls** (functions, methods, macros) per render;
- **depth**: macros and recursive loops nested in one another (Python's own
  ``RecursionError`` turns into the same refusal, should it come first).

These are counts: the same template and input hit the same bound at the same place on any
machine under any load, so a refusal is a verdict on the template. Each raises
:class:`RenderLimitExceeded` (``.limit`` names the bound); an attempt to reach an unsafe
attribute (``__class__``, ``__globals__``, ``__subclasses__``...) raises
:class:`SandboxEscape` at once, instead of Jinja's silent empty string.

Time is not a budget but a backstop: a render still running after ``max_seconds`` of wall
clock (checked on every loop iteration, call and output piece) raises
:class:`RenderDeadline`, a runaway the counts missed or a machine too busy to finish. The
counts stop every known hostile template in well under a second of CPU, and the slowest real
template renders in milliseconds, so the backstop sits far beyond both; when it fires, it
says nothing about the template, only about this machine at this moment: retry.

The in-process budgets keep one render small and short; the hard ceiling for batch runs is
:func:`set_memory_ceiling` (``RLIMIT_AS``) in each worker process, e.g. as a
``ProcessPoolExecutor(initializer=set_memory_ceiling, initargs=(1 << 30,))``. Then a
template that still manages to allocate too much gets a ``MemoryError`` (kept as a
``memory`` refusal) instead of the kernel's OOM killer taking the whole batch down.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import Context, LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError, modifies_known_mutable

# Measured on a 2-core machine: the slowest real render (corpus, sample repos, the 53 render
# goldens) takes ~10 ms (~95 ms with compiling), the slowest whole repo check 0.16 s; every
# hostile template of tests/analysis/test_template.py is stopped by a count in at
# most 0.6 s of CPU (1.5 s with the minimum versions). 30 s is ~20 times the worst hostile
# render: only a machine stalled for half a minute (or a runaway no count catches) gets there.
BACKSTOP_SECONDS = 30.0


class RenderLimits(NamedTuple):
    """The budget of one render. Real chat templates use a tiny fraction of each."""

    # The wall-clock backstop (RenderDeadline), not a budget: see the module docstring.
    max_seconds: float = BACKSTOP_SECONDS
    max_size: int = 1_000_000  # characters of one string / items of one list
    max_output: int = 1_000_000  # characters of one render's text
    max_int_bits: int = 65_536
    max_loop_iterations: int = 1_000_000
    max_calls: int = 100_000
    # Characters built by the template over the whole render, garbage included: this is
    # what bounds memory when a loop builds big strings into a macro's or block's buffer.
    max_allocated: int = 20_000_000
    # Macros and recursive loops nested in one another: a level takes ~6 Python frames, so
    # 100 levels stay below Python's recursion limit (1000) from any caller, and the refusal
    # is the same whatever the stack depth the render started at.
    max_depth: int = 100


DEFAULT_LIMITS = RenderLimits()


class RenderLimitExceeded(jinja2.TemplateError):
    """A render went over one of its bounds; ``limit`` names which one."""

    def __init__(self, limit: str, detail: str) -> None:
        super().__init__(f"render limit exceeded: {limit} ({detail})")
        self.limit = limit


def machine_load() -> str:
    """``"load 3.2 on 2 cores"``: what the machine was doing when a render ran out of time."""
    cores = os.cpu_count() or 1
    try:
        one_minute = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        return f"{cores} cores, load unknown"
    return f"load {one_minute:.1f} on {cores} cores"


class RenderDeadline(RenderLimitExceeded):
    """A render still running at the wall-clock backstop: about this machine, not the template.

    Its message is the one a finding shows (EOS103): it names the seconds and the machine's
    load, and says the outcome is worth a retry.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__("time", f"over {seconds:g} s")
        self.args = (
            f"could not finish in {seconds:g} s on this machine ({machine_load()}): retry",
        )
        self.seconds = seconds


class SandboxEscape(SecurityError):
    """The template reached for an attribute the sandbox hides (``__class__``, ...)."""

    limit = "sandbox"


# --- the per-render budget -------------------------------------------------------------


class _Budget:
    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.iterations = 0
        self.calls = 0
        self.allocated = 0
        self.depth = 0

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderDeadline(self.limits.max_seconds)


_active = threading.local()


@contextlib.contextmanager
def render_budget(limits: RenderLimits = DEFAULT_LIMITS) -> Iterator[None]:
    """Bound every render started inside the block (one budget per block, per thread)."""
    previous = getattr(_active, "budget", None)
    _active.budget = _Budget(limits)
    try:
        yield
    finally:
        _active.budget = previous


def _budget() -> _Budget | None:
    return getattr(_active, "budget", None)


def _limits() -> RenderLimits:
    budget = _budget()
    return budget.limits if budget is not None else DEFAULT_LIMITS


def _tick() -> None:
    budget = _budget()
    if budget is not None:
        budget.tick()


# --- sizes -------------------------------------------------------------------------------


def weight(obj: Any, cap: int) -> int:
    """Roughly how many characters ``str(obj)`` would take; stops counting past ``cap``.

    Shared references count each time (``[s] * 1000`` weighs 1000 ``s``), which is what
    joining, printing or serialising them costs.
    """
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 1
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            total += 1
        if total > cap:
            return total
    return total


def _charge(size: int) -> None:
    """Count ``size`` characters against the render's allocation budget."""
    budget = _budget()
    if budget is None:
        return
    budget.allocated += size
    if budget.allocated > budget.limits.max_allocated:
        raise RenderLimitExceeded(
            "allocation", f"built over {budget.limits.max_allocated} characters in one render"
        )


def _refuse_size(estimate: int, what: str) -> None:
    limits = _limits()
    if estimate > limits.max_size:
        raise RenderLimitExceeded("size", f"{what} would hold over {limits.max_size} characters")


def _check_result(value: Any, what: str) -> Any:
    limits = _limits()
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > limits.max_int_bits:
            raise RenderLimitExceeded("size", f"{what} gave an int over {limits.max_int_bits} bits")
        return value
    size = weight(value, limits.max_size)
    _refuse_size(size, what)
    _charge(size)
    return value


def _int_bits(value: Any) -> int:
    return value.bit_length() if isinstance(value, int) and not isinstance(value, bool) else 0


_SEQUENCE = (str, list, tuple)
_WIDTH = re.compile(r"\d+")


def _format_estimate(fmt: str, args: Iterable[Any], cap: int) -> int:
    """Upper bound of ``fmt % args`` / ``fmt.format(*args)``: every field may print every arg."""
    widths = sum(min(int(w), cap + 1) for w in _WIDTH.findall(fmt) if len(w) < 12) + sum(
        cap + 1 for w in _WIDTH.findall(fmt) if len(w) >= 12
    )
    fields = fmt.count("%") + fmt.count("{")
    arg_weight = sum(weight(a, cap) + max(0, a if isinstance(a, int) else 0) for a in args)
    return len(fmt) + widths + fields * arg_weight


def _binop_estimate(operator: str, left: Any, right: Any, limits: RenderLimits) -> None:
    """Refuse before computing a binary operation whose result would be over budget."""
    cap = limits.max_size
    if operator == "*":
        if isinstance(left, int) and isinstance(right, _SEQUENCE):
            left, right = right, left
        if isinstance(left, _SEQUENCE) and isinstance(right, int):
            _refuse_size(weight(left, cap) * max(right, 0), "repeating a sequence")
        elif _int_bits(left) + _int_bits(right) > limits.max_int_bits:
            raise RenderLimitExceeded("size", f"int product over {limits.max_int_bits} bits")
    elif operator == "**":
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and abs(left) > 1
            and max(_int_bits(left), 1) * right > limits.max_int_bits
        ):
            raise RenderLimitExceeded("size", f"int power over {limits.max_int_bits} bits")
    elif operator == "+":
        if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _refuse_size(weight(left, cap) + weight(right, cap), "concatenation")
    elif operator == "%" and isinstance(left, str):
        args = right if isinstance(right, (tuple, list)) else (right,)
        _refuse_size(_format_estimate(left, args, cap), "string formatting")


def _str_method_estimate(owner: str, name: str, args: tuple[Any, ...], cap: int) -> int:
    """Upper bound of ``owner.<name>(*args)`` for the str methods that can grow a string."""
    if name in ("format", "format_map"):
        return _format_estimate(owner, args, cap)
    if name == "join" and args and isinstance(args[0], _SEQUENCE):  # call() made it a list
        return weight(args[0], cap) + len(owner) * len(args[0])
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str):
        hits = owner.count(args[0]) if args[0] else len(owner) + 1
        return len(owner) + hits * weight(args[1], cap)
    widest = max((a for a in args if isinstance(a, int)), default=0)
    if name == "expandtabs":
        return len(owner) + (owner.count("\t") + 1) * max(widest, 0)
    return len(owner) + weight(args, cap) + max(widest, 0)  # center, ljust, zfill...


def _call_estimate(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], cap: int) -> int:
    """Upper bound of a call's result size where its arguments do not bound it, else 0."""
    wrapped = getattr(func, "__wrapped__", func)  # the sandbox wraps str.format
    owner = getattr(wrapped, "__self__", None)
    if isinstance(owner, str):
        return _str_method_estimate(owner, wrapped.__name__, (*args, *kwargs.values()), cap)
    return 0


def _items(iterable: Any, cap: int) -> list[Any]:
    """The items of an iterable a join is about to read, refusing more than ``cap``."""
    out: list[Any] = []
    for item in iterable:
        out.append(item)
        if len(out) > cap:
            raise RenderLimitExceeded("size", f"joining over {cap} items")
    return out


def _is_str_join(func: Any) -> bool:
    wrapped = getattr(func, "__wrapped__", func)  # the sandbox wraps str methods
    return isinstance(getattr(wrapped, "__self__", None), str) and wrapped.__name__ == "join"


def _filter_estimate(name: str, value: Any, extra: tuple[Any, ...], cap: int) -> int:
    """Upper bound of a growing filter's result (join, indent, replace, format, wordwrap)."""
    strings = sum(len(v) for v in extra if isinstance(v, str))
    if name == "join" and isinstance(value, (list, tuple, str)):
        return weight(value, cap) + strings * len(value)
    if name == "format" and isinstance(value, str):
        return _format_estimate(value, extra, cap)
    if name in ("indent", "wordwrap") and isinstance(value, str):
        return len(value) + (value.count("\n") + 1) * (strings + 1)
    if name == "replace" and isinstance(value, str) and len(extra) >= 2:
        return _str_method_estimate(value, "replace", extra, cap)
    return 0


# Filters that spend ~1 microsecond per item (sort's per-item key, urlize's regexes), ~100 times
# what building a character costs: their input counts _SLOW_WEIGHT times, against the size of
# one call (at most 10,000 items) and against the render's allocation budget (at most ~20 such
# calls), so a loop of them is stopped by a count in a fraction of a second of CPU.
_SLOW_WEIGHT = 100
_SLOW_FILTERS = frozenset(
    {
        "sort",
        "unique",
        "urlize",
        "wordwrap",
        "groupby",
        "dictsort",
        "title",
        "striptags",
        "min",
        "max",
    }
)


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter: refuse width-like arguments over budget, check the result's size."""
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0  # environment / context first
    slow = name in _SLOW_FILTERS

    @functools.wraps(func)  # keeps jinja_pass_arg, so the filter gets the same arguments
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        cap = _limits().max_size
        value, extra = (
            (args[skip], (*args[skip + 1 :], *kwargs.values()))
            if len(args) > skip
            else (None, tuple(kwargs.values()))
        )
        if any(isinstance(v, int) and not isinstance(v, bool) and v > cap for v in extra):
            raise RenderLimitExceeded("size", f"filter {name!r} given a width over {cap}")
        if name == "join" and len(args) > skip and not isinstance(value, _SEQUENCE):
            # range(8000)|join(sep), a map(...) generator: count the items before joining
            value = _items(value, cap)
            args = (*args[:skip], value, *args[skip + 1 :])
        estimate = _filter_estimate(name, value, extra, cap)
        if slow:
            work = weight(value, cap) * _SLOW_WEIGHT
            _refuse_size(work, f"filter {name!r}")
            _charge(work)
        _refuse_size(estimate, f"filter {name!r}")
        return _check_result(func(*args, **kwargs), f"filter {name!r}")

    return guarded


def _loop_guard(iterable: Any) -> Iterator[Any]:
    """Every ``{% for %}`` iterates through this: one tick of the budget per item."""
    budget = _budget()
    if budget is None:
        yield from iterable
        return
    for item in iterable:
        budget.iterations += 1
        if budget.iterations > budget.limits.max_loop_iterations:
            raise RenderLimitExceeded(
                "loop iterations", f"over {budget.limits.max_loop_iterations} per render"
            )
        budget.tick()
        yield item


_LOOP_FILTER = "eosfix_loop_guard"


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """Jinja's ``lipsum`` global, held to 100 paragraphs of at most 1000 words."""
    from jinja2.utils import generate_lorem_ipsum

    if n > 100 or max > 1000:
        raise RenderLimitExceeded("size", "lipsum asked for over 100 paragraphs / 1000 words")
    return generate_lorem_ipsum(n, html, min, max)


class _GuardedCodeGenerator(CodeGenerator):
    """Routes every loop through the budget and ``~`` through a size check."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Filter(
                loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.lineno
            )
        super().visit_Template(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write("environment.guarded_str_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class GuardedSandbox(ImmutableSandboxedEnvironment):
    """transformers' ``ImmutableSandboxedEnvironment`` with the budgets of this module.

    Renders exactly the same text as the plain sandbox for every template that stays
    within budget.
    """

    code_generator_class = _GuardedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}
        self.filters[_LOOP_FILTER] = _loop_guard
        self.globals["lipsum"] = _lipsum

    def add_filter(self, name: str, func: Callable[..., Any]) -> None:
        """Register a filter with the same guards as the built-in ones."""
        self.filters[name] = _guard_filter(name, func)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        _binop_estimate(operator, left, right, _limits())
        return _check_result(
            super().call_binop(context, operator, left, right), f"operator {operator!r}"
        )

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        if budget is not None:
            budget.calls += 1
            if budget.calls > budget.limits.max_calls:
                raise RenderLimitExceeded("calls", f"over {budget.limits.max_calls} per render")
            budget.tick()
        if not self.is_safe_callable(obj):
            raise SandboxEscape(f"sandbox escape attempt: {obj!r} is not safely callable")
        if isinstance(obj, (Macro, LoopContext)):  # their output is bounded by concat
            return _nested(context, obj, args, kwargs, budget)
        cap = _limits().max_size
        if args and _is_str_join(obj) and not isinstance(args[0], _SEQUENCE):
            # sep.join(a generator): counted as a list, and joined from that list (counting
            # must not consume what the join then reads)
            args = (_items(args[0], cap), *args[1:])
        _refuse_size(_call_estimate(obj, args, kwargs, cap), "a call")
        result = context.call(obj, *args, **kwargs)
        return _check_result(result, f"calling {getattr(obj, '__name__', 'a function')}")

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        if modifies_known_mutable(obj, attribute):  # list.append...: refused when called
            return super().unsafe_undefined(obj, attribute)
        raise SandboxEscape(
            f"sandbox escape attempt: attribute {attribute!r} of {type(obj).__name__!r} is blocked"
        )

    def concat(self, pieces: Iterable[str]) -> str:
        """Join rendered pieces (a whole render, a macro, a set block) within the output cap."""
        limits = _limits()
        out: list[str] = []
        total = 0
        for piece in pieces:
            total += len(piece)
            if total > limits.max_output:
                raise RenderLimitExceeded("output", f"over {limits.max_output} characters")
            _tick()
            out.append(piece)
        _charge(total)
        return "".join(out)

    def guarded_str_join(self, seq: Iterable[Any]) -> str:
        """The ``~`` operator, refusing a result over the size budget."""
        parts = [str(x) for x in seq]
        size = sum(len(p) for p in parts)
        _refuse_size(size, "the '~' operator")
        _charge(size)
        return "".join(parts)


def _nested(
    context: Context,
    obj: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    budget: _Budget | None,
) -> Any:
    """Call a macro or a recursive loop one level deeper, within ``max_depth``."""
    if budget is None:
        return context.call(obj, *args, **kwargs)
    if budget.depth >= budget.limits.max_depth:
        raise RenderLimitExceeded(
            "recursion depth", f"over {budget.limits.max_depth} nested macro or loop calls"
        )
    budget.depth += 1
    try:
        return context.call(obj, *args, **kwargs)
    finally:
        budget.depth -= 1


def guarded_finalize(value: Any) -> Any:
    """``finalize`` hook: a ``{{ value }}`` may not print more than the size budget."""
    if not isinstance(value, str):
        _check_result(value, "printing a value")
    return value


def budgeted_json(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` built piece by piece, refused as soon as it passes the size budget."""
    cap = _limits().max_size
    out: list[str] = []
    total = 0
    for chunk in json.JSONEncoder(**kwargs).iterencode(value):
        total += len(chunk)
        if total > cap:
            raise RenderLimitExceeded("size", f"tojson output over {cap} characters")
        out.append(chunk)
    _charge(total)
    return "".join(out)


# --- the process ceiling ----------------------------------------------------------------


# glibc's mallopt parameter, and the value glibc starts with (malloc/malloc.c)
M_MMAP_THRESHOLD, MMAP_THRESHOLD = -3, 128 * 1024


def give_back_large_blocks() -> bool:
    """Make the C allocator return every block of 128 KiB or more to the system as soon as it
    is freed, for the whole life of a long-running process (``eosfix serve``).

    glibc serves such a block by its own memory map, and unmaps it on free; but each time one
    is freed it raises that threshold to the block's size (up to 32 MiB), after which blocks
    below it come from its arenas, whose freed memory goes back only from their top. A server
    that now and then holds a large buffer (a GGUF header of up to 128 MiB: its bytes, offsets,
    ids) in a worker thread then keeps hundreds of MB resident after the check. Setting the
    threshold turns that adjustment off. True: set; False: not glibc (another allocator keeps
    its own policy) or not allowed."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # the C library this process runs with
    except (OSError, TypeError):  # none to load by that name (Windows)
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # the parameter is glibc's
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def set_memory_ceiling(max_bytes: int) -> None:
    """Cap this process's address space (``RLIMIT_AS``); allocations past it fail.

    Call it first thing in a batch worker (a ``ProcessPoolExecutor`` ``initializer``):
    a template that exhausts memory then raises ``MemoryError`` inside its render, kept
    as a refusal, instead of the kernel killing a process. The limit counts virtual
    memory, so leave room for the interpreter and libraries (1 GiB is plenty for eosfix).
    Only lowers the limit; never raises it above the current hard limit. POSIX only: on
    Windows it does nothing.
    """
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_AS; the per-render counts still bound each render
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        max_bytes = min(max_bytes, hard)
    if soft != resource.RLIM_INFINITY:
        max_bytes = min(max_bytes, soft)
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, hard))
