"""Declared renames: the ``moved:`` list of odfproj.yaml (terraform's ``moved`` blocks, for datasets).

::

    moved:
      - from: com.example.orders
        to: com.example.sales.orders

A rename is declared next to the manifest whose ``name`` changed, so it is reviewed in the same pull
request; ``plan`` shows it as a rename step (same ``did:odf``, nothing recomputed) instead of a create
and an orphan. An entry stays harmless once applied: the workspace then has the new name and not the
old one, and the entry plans to nothing.

What can be told from odfproj.yaml alone is checked here, when the file is loaded (so ``validate``
catches it): names must be valid ODF dataset names, an entry must change more than the case of a
name (names compare case-insensitively), and no name may appear twice or be both a target and a
source. That last rule refuses chains (``a -> b``, ``b -> c``) and cycles: the order they would be
applied in is not evident to a reviewer, so one entry ``a -> c`` is asked for instead. What depends
on the workspace (does the source exist? is the target free?) is decided by ``plan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfproj.errors import InvalidValueError, OdfprojError
from odfproj.odf.refs import DatasetName

__all__ = ["Move", "MoveError", "parse_moves"]


class MoveError(OdfprojError):
    """A ``moved:`` entry of odfproj.yaml that no workspace could apply."""


@dataclass(frozen=True)
class Move:
    """One declared rename: the dataset named ``source`` in the workspace is to be named ``target``."""

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}"


def parse_moves(path: Path, raw: Any) -> tuple[Move, ...]:
    """The ``moved:`` list of odfproj.yaml at ``path``; raises ``MoveError`` (one line, naming the file)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MoveError(f"{path}: 'moved' must be a list of {{from: NAME, to: NAME}} entries")
    moves = [_entry(path, index, item) for index, item in enumerate(raw)]
    sources = {m.source.lower(): m for m in moves}
    targets = {m.target.lower(): m for m in moves}
    for kind, seen in (("from", sources), ("to", targets)):
        if len(seen) != len(moves):
            twice = next(m for m in moves if sum(_key(o, kind) == _key(m, kind) for o in moves) > 1)
            raise MoveError(f"{path}: moved: {_key(twice, kind)} is the '{kind}' of two entries")
    for move in moves:
        follow = sources.get(move.target.lower())
        if follow is not None:
            what = "a cycle" if follow.target.lower() == move.source.lower() else "a chain"
            raise MoveError(
                f"{path}: moved: {move} and {follow} form {what}; declare one rename per dataset "
                f"({move.source} -> {follow.target}), and remove entries every workspace has applied"
            )
    return tuple(moves)


def _key(move: Move, kind: str) -> str:
    return (move.source if kind == "from" else move.target).lower()


def _entry(path: Path, index: int, item: Any) -> Move:
    where = f"{path}: moved[{index}]"
    if not isinstance(item, dict) or set(item) != {"from", "to"}:
        raise MoveError(f"{where}: expected exactly the keys 'from' and 'to' (the old and the new name)")
    names = []
    for key in ("from", "to"):
        value = item[key]
        try:
            names.append(str(DatasetName(value if isinstance(value, str) else "")))
        except InvalidValueError:
            raise MoveError(f"{where}: {key}: {value!r} is not a valid dataset name") from None
    source, target = names
    if source.lower() == target.lower():
        raise MoveError(
            f"{where}: {source} -> {target} renames nothing (dataset names compare case-insensitively)"
        )
    return Move(source, target)
