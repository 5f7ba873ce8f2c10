"""State shared by CLI commands and the one way they report failure."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from odfproj.storage.workspace import Workspace


@dataclass(frozen=True)
class CliState:
    debug: bool = False
    verbose: bool = False
    warm: bool | None = None
    """``--warm``/``--cold``: whether to use the warm engine (``None``: its default, see ``engine.warm``)."""


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print ``error: message`` on stderr and exit; the single place errors leave the CLI."""
    stderr_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, emoji=False)
    sys.exit(exit_code)


def adopt_old_workspace(workspace: Workspace) -> None:
    """Adopt a workspace an older odfproj made (datasets, no ``.names/`` record) and say so in one line.

    The one place the CLI shows it (on stderr, so stdout stays the command's own); storage only
    returns the fact (:meth:`Workspace.adopt_unrecorded`). Adopting writes ``.names/``, so it runs
    where a command opens its workspace to write, ``cli.remote_ws.synced`` for ``apply`` and ``run``
    (writers; ``plan`` passes there as a reader and adopts nothing) and ``ingest``, and in
    ``verify``, which already repairs what it opens (an interrupted commit) and whose key check is
    the one adoption makes; never in ``plan`` or ``validate``, which run on untrusted pull requests
    and write nothing. Once adopted the workspace has records, so the next command says nothing and
    pays one directory read.
    """
    adoption = workspace.adopt_unrecorded()
    if adoption is not None:
        stderr_console().print(adoption.line(), markup=False, emoji=False)
