"""Commands that load when they are used: ``odfproj --help`` imports no command's module.

Typer builds every command of a group from its function's signature, so registering the commands
directly would import every command's module (and what it imports) at each start, to run one of
them. The root group here knows each command by its name, the ``module:attribute`` that defines it
(a command's function, or the ``typer.Typer`` of a group such as ``block``) and its summary: the first
paragraph of its help, which is all that ``odfproj --help`` lists. A command's module is imported when
the command is resolved, to run it or to show its own ``--help``; the command modules import the
lower layers inside the functions that use them, so resolving a command stays cheap too.

``tests/cli/test_startup.py`` checks that each summary is the first paragraph of its command's own help.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

from odfproj.cli import metavars


@dataclass(frozen=True)
class LazyCommand:
    """A command of the root group, named by where it is defined."""

    name: str
    target: str
    """``module:attribute``: a command's function, or a ``typer.Typer`` of subcommands."""
    summary: str
    """The first paragraph of the command's help, on one line: what ``odfproj --help`` lists."""

    def load(self, group: TyperGroup) -> Any:
        """The command as typer builds it when it is registered on ``group`` (imports its module)."""
        module, _, attribute = self.target.partition(":")
        defined = getattr(importlib.import_module(module), attribute)
        # A one-command Typer with the root group's settings: typer builds the command exactly as
        # `app.command(name, cls=metavars.Command)` or `app.add_typer(sub, name=name)` on the root would.
        holder = typer.Typer(
            rich_markup_mode=group.rich_markup_mode,
            suggest_commands=group.suggest_commands,
            add_completion=False,
            pretty_exceptions_enable=False,
        )
        if isinstance(defined, typer.Typer):
            holder.add_typer(defined, name=self.name)
        else:
            holder.command(self.name, cls=metavars.Command)(defined)
        return typer.main.get_group(holder).commands[self.name]

    def listing(self, group: TyperGroup) -> TyperCommand:
        """A stand-in that only has the name and summary: enough for the group's command list."""
        return TyperCommand(self.name, help=self.summary, rich_markup_mode=group.rich_markup_mode)


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands by name, in registration order; a lazy one is loaded on first access."""

    def __init__(self, group: TyperGroup, loaded: Mapping[str, Any], lazy: Sequence[LazyCommand]) -> None:
        self._group = group
        self._loaded: dict[str, Any] = dict(loaded)
        self._lazy = {command.name: command for command in lazy if command.name not in self._loaded}
        self._order = [*self._loaded, *self._lazy]

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded

    def listing(self, name: str) -> Any:
        """The command if it is loaded, else its stand-in (no import)."""
        if name in self._loaded:
            return self._loaded[name]
        return self._lazy[name].listing(self._group)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = self._lazy[name].load(self._group)  # KeyError: no such command
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._order:
            self._order.append(name)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._order:
            raise KeyError(name)
        self._order.remove(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy


class LazyGroup(metavars.Group):
    """A typer group whose subclasses name their commands in ``lazy_commands`` instead of registering them."""

    lazy_commands: ClassVar[tuple[LazyCommand, ...]] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = LazyCommands(self, self.commands, self.lazy_commands)
        self._listing = False

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)  # names only: listing them loads none

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            return None
        assert isinstance(self.commands, LazyCommands)
        if self._listing:
            return self.commands.listing(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        """The group's help lists its commands from their summaries, importing none of them."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
