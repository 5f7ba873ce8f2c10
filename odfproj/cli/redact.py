"""Keep the values of secret environment variables out of everything the CLI prints.

The second line of defence behind ``env_var()``'s refusal of secrets (``project.env``): whatever
path a secret value takes to the terminal, a CI log or a PR comment (an engine error quoting a URL,
a traceback under ``--debug``), stdout and stderr replace it with ``*****``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from odfproj.errors import OdfprojError
from odfproj.project.config import load_project
from odfproj.project.env import EnvPolicy, Redactor


class RedactingStream:
    """A text stream that redacts what is written to it, and is otherwise the stream it wraps."""

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.redact(text))
        return len(text)

    def writelines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _project_option(argv: Sequence[str]) -> Path | None:
    for index, arg in enumerate(argv):
        if arg == "--project" and index + 1 < len(argv):
            return Path(argv[index + 1])
        if arg.startswith("--project="):
            return Path(arg.partition("=")[2])
    return None


def command_redactor(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> Redactor:
    """Secrets of the environment, judged by the project's ``env:`` declarations when there is one."""
    policy = EnvPolicy()
    # Outside a project (or in a broken one, which the command reports), names decide alone.
    with contextlib.suppress(OdfprojError):
        policy = load_project(_project_option(argv)).env
    return Redactor(policy.secret_values(environ))


def install(redactor: Redactor) -> None:
    """Route stdout and stderr through ``redactor`` for the rest of the process."""
    sys.stdout = RedactingStream(sys.stdout, redactor)  # type: ignore[assignment]
    sys.stderr = RedactingStream(sys.stderr, redactor)  # type: ignore[assignment]
