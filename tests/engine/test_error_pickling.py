"""Every ``OdfprojError`` crosses a pickle intact: the warm engine's socket carries them (JVM-free).

The classes are found by walking ``OdfprojError``'s subclasses after importing every odfproj module, so a
new one is covered without being named here. Each is built with sample arguments chosen from its
constructor's signature, pickled and unpickled, and must come back as the same class with the same
message, ``args`` and attributes. A class the receiving side cannot rebuild at all becomes one line.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import queue
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import odfproj
from odfproj.engine.warm import client, server
from odfproj.engine.warm.protocol import ServerInfo, send
from odfproj.errors import EngineError, ManifestError, OdfprojError

#: Modules not imported, each with why (a script runs when imported; it defines no error class).
_SKIPPED: dict[str, str] = {"odfproj.__main__": "runs the CLI when imported"}


def _all_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(odfproj.__path__, prefix="odfproj."):
        if info.name not in _SKIPPED:
            importlib.import_module(info.name)
            names.append(info.name)
    return names


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _classes() -> list[type[OdfprojError]]:
    _all_modules()
    classes = {OdfprojError, *_subclasses(OdfprojError)}
    return sorted((c for c in classes if c.__module__.startswith("odfproj.")), key=lambda c: c.__qualname__)


def _sample(parameter: inspect.Parameter, n: int) -> object:
    """A value of the parameter's annotated type (annotations are strings here)."""
    kind = str(parameter.annotation)
    if "list" in kind or "Sequence" in kind or "tuple" in kind:
        return [f"a.yaml:{n}:1: first problem", f"b.yaml:{n}:2: second problem"]
    if "int" in kind:
        return 40 + n
    if "Path" in kind:
        return Path(f"/somewhere/{parameter.name}")
    return f"{parameter.name} {n}: 'quoted', on one line"


def _instance(cls: type[OdfprojError]) -> OdfprojError:
    init = cls.__init__
    if init is Exception.__init__ or init is BaseException.__init__:  # no constructor of its own
        return cls(f"{cls.__name__} happened: 'x' is wrong")
    parameters = list(inspect.signature(init).parameters.values())[1:]
    args = [
        _sample(p, n)
        for n, p in enumerate(parameters)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return cls(*args)


CLASSES = _classes()


def test_the_walk_finds_the_classes_a_grep_finds() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"ManifestError", "LockedError", "UntranslatableQueryError", "ReadError", "WatchError"} <= names
    assert len(CLASSES) > 40


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_error_crosses_a_pickle_intact(cls: type[OdfprojError]) -> None:
    error = _instance(cls)
    error.add_note("a note")  # what code adds after construction travels too
    again = pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(again) is cls
    assert str(again) == str(error)
    assert again.args == error.args
    assert vars(again) == vars(error)
    assert again.exit_code == error.exit_code


def test_a_manifest_error_keeps_its_problems_and_its_one_line() -> None:
    one = ManifestError(["datasets/x.yaml:5:9: kind: 'Rooot' is not one of Root, Derivative"])
    again = pickle.loads(pickle.dumps(one))
    assert str(again) == str(one) and "\n" not in str(again) and again.problems == one.problems
    two = ManifestError(["a.yaml:1:1: one", "b.yaml:2:2: two"])
    assert str(pickle.loads(pickle.dumps(two))) == "2 problems:\na.yaml:1:1: one\nb.yaml:2:2: two"


# --- a class the receiving side cannot rebuild ------------------------------------------------------------


class NeedsTwo(Exception):
    """Not an OdfprojError: Python's pickling calls it with its message only, which it refuses."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what} failed:\n{why}")


def _frame(value: object, answer: Callable[[socket.socket, object], None]) -> bytes:
    """The bytes ``answer`` writes on a socket for ``value``."""
    left, right = socket.socketpair()
    with left, right:
        answer(left, value)
        left.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := right.recv(1 << 16):
            data += chunk
    return data


def _call(data: bytes, tmp_path: Path) -> BaseException:
    """What ``client.call`` raises when the server answers with ``data``."""
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1 << 16)
            conn.sendall(data)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(BaseException) as raised:
            client.call(ServerInfo(1, 1, "t", path, 0.0, 1.0), "op", timeout=10)
        return raised.value
    finally:
        thread.join(10)
        listener.close()


def test_an_error_that_cannot_be_rebuilt_crosses_as_one_line_with_its_type() -> None:
    """The server sees that it would not cross: the caller gets its type and first line."""
    data = _frame(
        NeedsTwo("the check", "line one\nline two"), lambda conn, e: server.send_answer(conn, (False, e))
    )
    ok, value = pickle.loads(data[8:])  # after the frame's length
    assert not ok and type(value) is EngineError and str(value) == "NeedsTwo: the check failed:"


def test_an_error_that_cannot_be_rebuilt_in_the_client_is_one_line(tmp_path) -> None:
    """A server of another version may still send what this side cannot rebuild."""
    data = _frame(NeedsTwo("the check", "line one\nline two"), lambda conn, e: send(conn, (False, e)))
    raised = _call(data, tmp_path)
    assert type(raised) is EngineError and "\n" not in str(raised)
    assert str(raised).startswith("the warm engine's answer could not be read: ")
    stream_frames: queue.Queue = queue.Queue()
    left, right = socket.socketpair()
    with left, right:
        left.sendall(data)
        left.shutdown(socket.SHUT_WR)
        client._read_frames(right, stream_frames)  # a streaming request's reader (run)
    ok, value = stream_frames.get_nowait()
    assert not ok and type(value) is EngineError and str(value) == str(raised)
