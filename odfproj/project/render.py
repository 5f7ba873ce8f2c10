"""Render manifest files with Jinja, in a sandbox, before they are parsed.

Manifests come from pull requests and are rendered in CI, so a template is untrusted input: it runs in
Jinja's ``ImmutableSandboxedEnvironment`` (no access to dunder attributes, no mutation of lists or
dicts, no ``str.format`` escapes), with ``StrictUndefined`` so a typo fails instead of rendering as an
empty string. Every failure becomes a ``Problem`` with the manifest's file and line; nothing raises.

What a template sees (documented for users in ``docs/guide/templating.md``):

* ``var(name, default=<required>)``: the project's ``vars`` overlaid with ``--var NAME=VALUE``.
* ``env_var(name, default=<required>)``: an environment variable the project declares under ``env:``,
  never a secret one (``project.env``).
* ``target``: the name of the active target.
* ``raise_error(message)``: stop rendering with a message (for macros that validate their arguments).
* every macro defined in ``macros/**/*.{sql,j2,jinja,yaml}``, by its name; macros may call each other
  across files, and ``{% import "macros/x.j2" as x %}`` works too.

``${{ ... }}`` is not Jinja: ODF engines expand it (``${{ env.GH_TOKEN }}``). Before compiling, every
``${{`` outside Jinja tags, comments and raw blocks is rewritten to ``${{ "{{" }}``, which renders it
back literally and keeps line numbers intact. A file with no Jinja syntax at all is never handed to
Jinja, so it renders to itself byte for byte (Jinja would normalise ``\\r\\n`` line ends).
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn

from jinja2 import FunctionLoader, StrictUndefined, Template, TemplateNotFound, TemplateSyntaxError
from jinja2.runtime import Macro
from jinja2.sandbox import SecurityError

from odfproj.odf.yaml_source import Problem
from odfproj.project.config import ProjectConfig
from odfproj.project.env import EnvPolicy
from odfproj.project.render_budget import BudgetedEnvironment, RenderBudgetExceeded, render_budget

__all__ = [
    "BUILTIN_NAMES",
    "RenderContext",
    "RenderResult",
    "Renderer",
    "has_jinja",
    "render_manifest",
]

#: Names a template always sees; a macro may not take one of them.
BUILTIN_NAMES = frozenset({"var", "env_var", "target", "raise_error"})

_JINJA_MARKERS = ("{{", "{%", "{#")
_ENGINE_OPENER = "${{"
# The ``$`` stays outside the expression: a ``{`` just before ``${{`` must not turn into ``{{{``.
_ENGINE_ESCAPE = '${{ "{{" }}'
# One left-to-right scan: the first alternative that matches at a position wins, so a ``${{`` is
# only escaped where it is plain template text.
_SCAN = re.compile(
    r"""
    (?P<raw>\{%[-+]?\s*raw\s*[-+]?%\}.*?\{%[-+]?\s*endraw\s*[-+]?%\})
  | (?P<comment>\{\#.*?\#\})
  | (?P<engine>\$\{\{)
  | (?P<tag>\{\{.*?\}\}|\{%.*?%\})
    """,
    re.DOTALL | re.VERBOSE,
)
_REQUIRED: Any = object()


class _RenderAbort(Exception):
    """Raised by the template helpers: its message is shown to the user as is."""


# ------------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class RenderResult:
    """The rendered text, or None with the problems that stopped rendering."""

    text: str | None
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return self.text is not None


@dataclass(frozen=True)
class RenderContext:
    """Everything a rendering depends on, so two renderings with equal contexts give equal text.

    ``environ`` None means ``os.environ`` at render time. ``macros`` maps a macro file's path relative
    to the project root (``macros/sql.j2``) to its text.
    """

    vars: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    target: str = "dev"
    macros: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    environ: Mapping[str, str] | None = None
    env: EnvPolicy = field(default_factory=EnvPolicy)
    """Which variables ``env_var()`` may read; by default none."""
    problems: tuple[Problem, ...] = ()
    """Macro files that could not be read (not UTF-8, unreadable)."""

    @classmethod
    def for_project(
        cls,
        config: ProjectConfig,
        *,
        vars_override: Mapping[str, Any] | None = None,
        target: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> RenderContext:
        """The project's vars with ``vars_override`` on top, the target (checked) and its macro files."""
        chosen = config.target(target).name  # raises a ProjectError naming the known targets
        macros: dict[str, str] = {}
        problems: list[Problem] = []
        for path in config.macro_files():
            rel = path.relative_to(config.root).as_posix()
            refusal = config.refusal(path)
            if refusal is not None:
                problems.append(Problem(rel, 1, 1, refusal))
                continue
            try:
                macros[rel] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                problems.append(Problem(rel, 1, 1, f"macro file is not valid UTF-8: {e.reason}"))
            except OSError as e:
                problems.append(Problem(rel, 1, 1, f"cannot read macro file: {e.strerror}"))
        return cls(
            vars=MappingProxyType({**config.vars, **(vars_override or {})}),
            target=chosen,
            macros=MappingProxyType(macros),
            environ=environ,
            env=config.env,
            problems=tuple(problems),
        )


# ------------------------------------------------------------------------------------------------
# Text-level helpers


def has_jinja(text: str) -> bool:
    """Whether ``text`` holds Jinja syntax; ``${{`` (for the data engine) does not count."""
    stripped = text.replace(_ENGINE_OPENER, "")
    return any(marker in stripped for marker in _JINJA_MARKERS)


def escape_engine_expressions(text: str) -> str:
    """Rewrite each ``${{`` in plain template text so Jinja renders it literally (same line count)."""

    def replace(match: re.Match[str]) -> str:
        return _ENGINE_ESCAPE if match.lastgroup == "engine" else match.group(0)

    return _SCAN.sub(replace, text)


# ------------------------------------------------------------------------------------------------
# The renderer


class Renderer:
    """Renders many manifests with one sandboxed environment and the project's macros loaded once."""

    def __init__(self, context: RenderContext | None = None) -> None:
        self.context = context or RenderContext()
        self._env = BudgetedEnvironment(
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            loader=FunctionLoader(self._load_macro_source),
        )
        self._env.globals.update(self._builtins())
        problems = list(self.context.problems)
        problems.extend(self._load_macros())
        self.problems: tuple[Problem, ...] = tuple(problems)
        """Problems of the macro files; manifests that use a broken macro fail on their own too."""

    def render(self, text: str, filename: str) -> RenderResult:
        """Render one manifest's text; ``filename`` is how problems name the file."""
        if not has_jinja(text):
            return RenderResult(text)
        try:
            template = self._compile(escape_engine_expressions(text), filename)
            chunks: list[str] = []
            with render_budget({filename, *self.context.macros}) as count_output:
                for chunk in template.generate():
                    count_output(len(chunk))
                    chunks.append(chunk)
            return RenderResult("".join(chunks))
        except Exception as error:  # every failure of a user's template is a problem, never a traceback
            return RenderResult(None, (self._problem(error, filename),))

    # -- set-up --------------------------------------------------------------------------------

    def _builtins(self) -> dict[str, Any]:
        variables = self.context.vars
        target = self.context.target

        def var(name: str, default: Any = _REQUIRED) -> Any:
            if name in variables:
                return variables[name]
            if default is _REQUIRED:
                raise _RenderAbort(
                    f"var {name!r} is not defined (set it under 'vars:' in odfproj.yaml or pass --var NAME=VALUE)"
                )
            return default

        def env_var(name: str, default: Any = _REQUIRED) -> Any:
            refusal = self.context.env.refusal(str(name))
            if refusal is not None:
                raise _RenderAbort(refusal)
            environ = os.environ if self.context.environ is None else self.context.environ
            value = environ.get(name)
            if value is not None:
                return value
            if default is _REQUIRED:
                raise _RenderAbort(f"environment variable {name!r} is not set and env_var() has no default")
            return default

        def raise_error(message: str) -> NoReturn:
            raise _RenderAbort(str(message))

        return {"var": var, "env_var": env_var, "target": target, "raise_error": raise_error}

    def _load_macro_source(self, name: str) -> tuple[str, str, Callable[[], bool]] | None:
        """The loader behind ``{% import %}``: only macro files can be loaded, by their project path."""
        source = self.context.macros.get(name)
        return None if source is None else (source, name, lambda: True)

    def _load_macros(self) -> list[Problem]:
        """Export every public macro of every macro file into the globals, in path order.

        All macro modules share one mutable namespace as their context parent, and names are looked
        up when a macro is called, so a macro may call macros of any file, whatever the load order.
        """
        namespace = dict(self._env.globals)
        defined_in: dict[str, str] = {}
        problems: list[Problem] = []
        for name in sorted(self.context.macros):
            try:
                with render_budget({name, *self.context.macros}):
                    template = self._env.get_template(name)
                    module = self._make_module(template, namespace)
            except Exception as error:
                problems.append(self._problem(error, name))
                continue
            for macro_name, value in vars(module).items():
                if macro_name.startswith("_") or not isinstance(value, Macro):
                    continue
                clash = self._clash(macro_name, defined_in)
                if clash:
                    problems.append(
                        Problem(name, _macro_line(self.context.macros[name], macro_name), 1, clash)
                    )
                    continue
                defined_in[macro_name] = name
                namespace[macro_name] = value
        self._env.globals.update({k: namespace[k] for k in defined_in})
        return sorted(problems, key=lambda p: (p.file, p.line, p.message))

    def _make_module(self, template: Template, namespace: dict[str, Any]) -> Any:
        try:
            return template.make_module(vars=namespace, shared=True)
        except Exception:
            self._env.handle_exception()  # re-raises with template line numbers in the traceback

    def _clash(self, macro_name: str, defined_in: Mapping[str, str]) -> str | None:
        if macro_name in BUILTIN_NAMES or macro_name in self._env.globals:
            return f"macro {macro_name!r} shadows the built-in {macro_name!r}: rename it"
        if macro_name in defined_in:
            return f"macro {macro_name!r} is also defined in {defined_in[macro_name]}: macro names must be unique"
        return None

    def _compile(self, source: str, filename: str) -> Template:
        code = self._env.compile(source, name=filename, filename=filename)
        return self._env.template_class.from_code(self._env, code, self._env.make_globals(None))

    # -- errors --------------------------------------------------------------------------------

    def _problem(self, error: Exception, filename: str) -> Problem:
        """One problem at the template line that failed; a macro's own position goes in the message."""
        if isinstance(error, TemplateSyntaxError) and error.filename in (filename, None):
            return Problem(filename, error.lineno or 1, 1, f"template syntax error: {error.message}")
        frames = [
            (frame.filename, frame.lineno or 1)
            for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == filename or frame.filename in self.context.macros
        ]
        line = next((n for f, n in reversed(frames) if f == filename), 1)
        message = _describe(error)
        inner = frames[-1] if frames and frames[-1][0] != filename else None
        if isinstance(error, TemplateSyntaxError):
            inner = (error.filename or error.name or "?", error.lineno or 1)
        if inner:
            message += f" (in {inner[0]}:{inner[1]})"
        return Problem(filename, line, 1, message)


def _macro_line(source: str, macro_name: str) -> int:
    """Line of ``{% macro name(`` in a macro file (1 if it cannot be found), to point at a clash."""
    match = re.search(r"\{%[-+]?\s*macro\s+" + re.escape(macro_name) + r"\b", source)
    return source.count("\n", 0, match.start()) + 1 if match else 1


def _describe(error: Exception) -> str:
    if isinstance(error, SecurityError):
        return f"unsafe template: {error} Templates run in a sandbox and cannot reach Python internals."
    if isinstance(error, _RenderAbort | RenderBudgetExceeded):
        return str(error)
    if isinstance(error, TemplateNotFound):
        return f"template not found: {error.name!r} (only files under macros/ can be included or imported)"
    if isinstance(error, MemoryError):
        return "render budget exceeded: out of memory"
    if isinstance(error, TemplateSyntaxError):
        return f"template syntax error: {error.message}"
    if isinstance(error, RecursionError):
        return "template error: too deeply nested (a macro that calls itself without end?)"
    if type(error).__module__.startswith("jinja2"):
        return f"template error: {error}"
    return f"template error: {type(error).__name__}: {error}"


def render_manifest(text: str, filename: str, context: RenderContext | None = None) -> RenderResult:
    """Render one manifest on its own (tools and tests); use a ``Renderer`` for many files."""
    renderer = Renderer(context)
    result = renderer.render(text, filename)
    if renderer.problems and not result.ok:
        return RenderResult(None, (*renderer.problems, *result.problems))
    return result
