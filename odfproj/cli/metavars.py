"""Help shows what to type after an option (``--var KEY=VALUE``), not Python types (``<list[str]>``).

Typer labels every value with its annotation (``<str>``, ``<path>``, ``<list[str]>``, ``<int range>``)
and every flag, ``--help`` included, with ``<bool>``. The command classes here name the values the
click way instead, once for every command: a flag shows nothing, a choice its choices, and any
other value without an explicit ``metavar`` its parameter's name in capitals (``DATASET``,
``LIMIT``). Options whose name says little set a ``metavar`` where they are defined.

They also give ``--help`` the value ``False`` when it is not given, as any flag has: typer 0.29 and
later coerce every value but a flag's ``True``/``False`` with pydantic, which the help option's
``None`` would import for ``odfproj COMMAND --help`` too (about 0.07 s of its start;
bench/bench_startup.py). pyproject.toml keeps typer below 0.29 for the commands themselves.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def name_metavars(params: list[Any], ctx: typer.Context) -> list[Any]:
    """Give every parameter of a command a metavar (in place); returns ``params``."""
    for param in params:
        if param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        elif getattr(getattr(param, "type_descriptor", None), "is_choice", False):
            param.metavar = param.display_type(ctx).strip("<>")
        else:
            param.metavar = (param.name or "value").upper()
    return params


def plain_flag(option: Any) -> Any:
    """The help option, ``False`` when not given (typer leaves it ``None``, which it then coerces)."""
    if option is not None and option.default is None:
        option.default = False
    return option


class Command(TyperCommand):
    def get_params(self, ctx: typer.Context) -> list[Any]:
        return name_metavars(super().get_params(ctx), ctx)

    def get_help_option(self, ctx: typer.Context) -> Any:
        return plain_flag(super().get_help_option(ctx))


class Group(TyperGroup):
    def get_params(self, ctx: typer.Context) -> list[Any]:
        return name_metavars(super().get_params(ctx), ctx)

    def get_help_option(self, ctx: typer.Context) -> Any:
        return plain_flag(super().get_help_option(ctx))
