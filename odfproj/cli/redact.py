"""Keep the values of secret environment variables out of everything the CLI prints.

The second line of defence behind ``env_var()``'s refusal of secrets (``project.env``): whatever
path a secret value takes to the terminal, a CI log or a PR comment (an engine error quoting a URL,
a traceback under ``--debug``), stdout and stderr replace it with ``*****``.

The variables whose names say they are secret are known at start; those a project declares secret
(``env:`` in odfproj.yaml) are known once the project is read, which imports its reader. So the project
is read when some output first contains the value of a variable it could declare secret, not at every
start: an output without one (``odfproj --help``'s, as a rule) is the same either way, and reads nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from odfproj.errors import OdfprojError
from odfproj.project.env import MIN_REDACTED_LENGTH, EnvPolicy, Redactor


class Redacts(Protocol):
    def redact(self, text: str) -> str: ...


class RedactingStream:
    """A text stream that redacts what is written to it, and is otherwise the stream it wraps."""

    def __init__(self, stream: TextIO, redactor: Redacts) -> None:
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


class CommandRedactor:
    """Secrets of the environment, judged by the project's ``env:`` declarations when there is one.

    Judged by names alone until an output contains the value of a variable that the names do not make
    secret (long enough to be redacted): only then is the project read, once, for the variables it
    declares secret. A declaration can only add secrets, so text without such a value is redacted
    exactly as the project's own redactor would redact it.
    """

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> None:
        self._argv = list(argv)
        self._environ = dict(environ)
        by_name = EnvPolicy()
        self._redactor = Redactor(by_name.secret_values(self._environ))
        self._undecided = tuple(
            value
            for name, value in self._environ.items()
            if len(value) >= MIN_REDACTED_LENGTH and not by_name.is_secret(name)
        )
        self._reading = False

    def redact(self, text: str) -> str:
        if self._undecided and not self._reading and any(value in text for value in self._undecided):
            self._read_project()
        return self._redactor.redact(text)

    def _read_project(self) -> None:
        # Imported here: reading a project imports its whole reader (YAML, JSON Schema, the ODF model).
        from odfproj.project.config import load_project

        self._reading = True  # what the project's reader prints meanwhile is judged by names
        try:
            policy = EnvPolicy()
            # Outside a project (or in a broken one, which the command reports), names decide alone.
            with contextlib.suppress(OdfprojError):
                policy = load_project(_project_option(self._argv)).env
            secrets = policy.secret_values(self._environ)
        except Exception:  # a bug, which the command meets again: hide whatever it might declare
            secrets = frozenset(self._undecided)
        finally:
            self._reading = False
        self._redactor.add(secrets)
        self._undecided = ()


def command_redactor(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> CommandRedactor:
    """Secrets of the environment, judged by the project's ``env:`` declarations when there is one."""
    return CommandRedactor(argv, environ)


def install(redactor: Redacts) -> None:
    """Route stdout and stderr through ``redactor`` for the rest of the process."""
    sys.stdout = RedactingStream(sys.stdout, redactor)  # type: ignore[assignment]
    sys.stderr = RedactingStream(sys.stderr, redactor)  # type: ignore[assignment]
