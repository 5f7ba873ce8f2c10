"""State shared by CLI commands and the one way they report failure."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import NoReturn

from rich.console import Console
from rich.markup import escape


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
