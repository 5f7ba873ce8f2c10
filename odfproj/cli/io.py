"""Reading the files a user names on the command line, with errors that name them."""

from __future__ import annotations

import sys
from pathlib import Path

from odfproj.errors import OdfprojError


def read_input(path: str) -> bytes:
    """Read ``path`` (``-`` is standard input) or fail with a one-line error naming it."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise OdfprojError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise OdfprojError(f"{path}: is a directory, expected a file") from None
    except OSError as e:
        raise OdfprojError(f"{path}: cannot read: {e.strerror}") from None


def in_file(path: str, error: Exception) -> OdfprojError:
    """Prefix an error with the file it came from, keeping its exit code."""
    wrapped = OdfprojError(f"{path}: {error}")
    wrapped.exit_code = getattr(error, "exit_code", 1)
    return wrapped
