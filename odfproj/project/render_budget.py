"""Time, memory and size budgets for rendering one manifest: a template from a pull request must not
hang CI or exhaust its memory.

Jinja's sandbox stops templates from reaching Python internals but bounds neither time nor memory
(``{% for i in range(99999) %}{% for j in range(99999) %}`` runs for hours, ``'x' * 10**9`` takes a
gigabyte). Two mechanisms together bound both:

* **Per step**, before the work is done: repetition (``*``), powers, ``%`` formatting, ``~`` and
  ``+`` concatenation, calls of methods and filters with huge widths or counts, and every filter's
  result are checked against ``MAX_VALUE_CHARS``; the output is counted as it streams.
* **Over time**, for loops of cheap steps: while a template runs, a trace function watches the lines
  of the compiled template code (only those, so the rest of odfproj runs at full speed) and stops the
  render past ``MAX_RENDER_SECONDS`` or when more than ``MAX_RENDER_MEMORY`` bytes are allocated
  (``tracemalloc``).

Either way the manifest gets one problem naming the budget, and nothing else is affected.
"""

from __future__ import annotations

import functools
import re
import sys
import time
import tracemalloc
from collections.abc import Callable, Collection, Iterator, Sized
from contextlib import contextmanager
from types import FrameType
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = [
    "MAX_RENDER_MEMORY",
    "MAX_RENDER_SECONDS",
    "MAX_VALUE_CHARS",
    "BudgetedEnvironment",
    "RenderBudgetExceeded",
    "render_budget",
]

MAX_RENDER_SECONDS = 10.0
"""Per manifest; real manifests render in milliseconds."""
MAX_RENDER_MEMORY = 256 * 1024 * 1024
"""Bytes a render may allocate and keep at once."""
MAX_VALUE_CHARS = 4 * 1024 * 1024
"""Longest string or list a template may build, and the longest rendered manifest (the YAML limit)."""
_CHECK_EVERY = 64
"""Template lines between two clock and memory checks."""
_WIDE_FORMAT = re.compile(r"%[-#0 +]*(\*|\d{7,})")


class RenderBudgetExceeded(Exception):
    """Rendering went over a budget; the message names it."""


def _too_big(what: str) -> RenderBudgetExceeded:
    return RenderBudgetExceeded(f"render budget exceeded: {what} would exceed {MAX_VALUE_CHARS} characters")


def _check_size(value: Any) -> Any:
    if isinstance(value, Sized) and not isinstance(value, dict) and len(value) > MAX_VALUE_CHARS:
        raise _too_big("a value")
    return value


def _check_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Widths and counts (``center(10**9)``, ``'x'.ljust(10**9)``) make huge strings from small ones."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_VALUE_CHARS:
            raise _too_big(f"an argument of {value}")


def _check_replace(text: Any, old: Any, new: Any) -> None:
    """``replace`` can multiply a string's length: count the result before it is built."""
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        hits = text.count(old) if old else len(text) + 1
        if len(text) + hits * (len(new) - len(old)) > MAX_VALUE_CHARS:
            raise _too_big("a replace")


def _bounded_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)  # keeps Jinja's pass_context/pass_environment markers
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_arguments(args[1:], kwargs)
        if function.__name__ == "do_replace" and len(args) >= 4:  # (eval_ctx, s, old, new, ...)
            _check_replace(args[1], args[2], args[3])
        return _check_size(function(*args, **kwargs))

    return bounded


class _BudgetCodeGenerator(CodeGenerator):
    """Compiles ``a ~ b`` to a join whose total size is checked before the string is built."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BudgetedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with every single step bounded in size."""

    code_generator_class = _BudgetCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filters = {name: _bounded_filter(f) for name, f in self.filters.items()}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, Sized) and isinstance(count, int) and len(seq) * count > MAX_VALUE_CHARS:
                    raise _too_big("a repetition")
        elif operator == "**":
            if isinstance(right, int | float) and abs(right) > 1024 and abs(left) > 1:
                raise RenderBudgetExceeded(
                    f"render budget exceeded: the power {left} ** {right} is too large"
                )
        elif operator == "%":
            if isinstance(left, str) and _WIDE_FORMAT.search(left):
                raise _too_big("a %-format width")
        elif (
            isinstance(left, Sized) and isinstance(right, Sized) and len(left) + len(right) > MAX_VALUE_CHARS
        ):
            raise _too_big("a concatenation")
        return _check_size(super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _check_arguments(args, kwargs)
        if getattr(__obj, "__name__", None) == "replace" and len(args) >= 2:
            _check_replace(getattr(__obj, "__self__", None), args[0], args[1])
        return _check_size(super().call(__context, __obj, *args, **kwargs))

    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        texts = [str(part) for part in parts]
        if sum(len(text) for text in texts) > MAX_VALUE_CHARS:
            raise _too_big("a '~' concatenation")
        return "".join(texts)


@contextmanager
def render_budget(code_files: Collection[str]) -> Iterator[Callable[[int], None]]:
    """Watch the template code compiled from ``code_files`` while the block runs.

    Yields a function to call with the length of each chunk of output, which bounds the output too.
    """
    deadline = time.monotonic() + MAX_RENDER_SECONDS
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start(1)
    baseline = tracemalloc.get_traced_memory()[0]
    lines = 0
    output = 0

    def check() -> None:
        if time.monotonic() > deadline:
            raise RenderBudgetExceeded(
                f"render budget exceeded: rendering took over {MAX_RENDER_SECONDS:g} s"
            )
        if tracemalloc.get_traced_memory()[0] - baseline > MAX_RENDER_MEMORY:
            raise RenderBudgetExceeded(
                f"render budget exceeded: rendering used over {MAX_RENDER_MEMORY // 2**20} MB of memory"
            )

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
            if lines % _CHECK_EVERY == 0:
                check()
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        return on_line if frame.f_code.co_filename in code_files else None

    def count_output(length: int) -> None:
        nonlocal output
        output += length
        if output > MAX_VALUE_CHARS:
            raise _too_big("the rendered manifest")
        check()

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield count_output
    finally:
        sys.settrace(previous)
        if started_tracing:
            tracemalloc.stop()
