"""One exception hierarchy for the whole tool.

Every error a user can cause carries a message written for that user: the CLI prints
``str(error)`` on one line and maps the class to an exit code. A traceback is shown only
with ``--debug``; anything that is not an ``OdfprojError`` is treated as a bug.
"""

from __future__ import annotations


class OdfprojError(Exception):
    """Base class for every error that is reported to the user as one line.

    An error crosses a pickle (the warm engine's socket) as what it is: the same class,
    message (``args``) and attributes, whatever its constructor takes. Python's own pickling rebuilds an
    exception by calling its class with ``args``, which for a subclass whose constructor takes something
    else (``ManifestError``'s list of problems, ``UntranslatableQueryError``'s three parts) builds another
    message or fails; :meth:`__reduce__` rebuilds it without calling the constructor instead.
    """

    exit_code: int = 1

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (type(self), self.args), self.__dict__ or None


def _rebuild(cls: type[OdfprojError], args: tuple[object, ...]) -> OdfprojError:
    """``cls`` with ``args``, its constructor not called: pickle then restores its attributes."""
    error = cls.__new__(cls, *args)
    error.args = args
    return error


class InvalidValueError(OdfprojError, ValueError):
    """A value (a hash, a DID, a dataset name, a DDL type...) does not follow its format."""


class ManifestError(OdfprojError):
    """A manifest file cannot be read, parsed or validated.

    ``problems`` holds every problem found, each already formatted as ``file:line:col: message``.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(
            problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(problems)
        )


class SerializationError(OdfprojError):
    """Binary (FlatBuffers) data is malformed or of an unsupported version."""


class StorageError(OdfprojError):
    """A workspace or dataset on disk is missing, locked, corrupt, or violates chain invariants."""


class PlanError(OdfprojError):
    """A plan cannot be made or applied."""


class EngineError(OdfprojError):
    """The data engine failed or rejected a query."""
