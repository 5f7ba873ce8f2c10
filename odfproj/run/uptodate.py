"""What earlier runs found up to date, by chain heads: a derivative with nothing to do is not asked again.

An update of a derivative that commits nothing and starts no engine (``no new input data``, ``waiting
for input ... to get a data schema``, ``no transform defined``) decides so from its own chain and its
inputs' chains alone, and a chain is named by its head: at the same heads the update finds the same
nothing. ``run`` records each such outcome with the heads it saw, in ``<workspace>/run_uptodate.json``;
a later run whose plan shows the dataset and its inputs at those heads (and that this run has not moved
them) reports the recorded outcome without opening the dataset, loading the transform code or asking
for an engine. So a run costs the datasets whose chains moved, not the project: a no-op run of a large
project, or one new file in one root of it, does the plan's reading and nothing per untouched dataset.

The record is advisory, like every cache of the workspace: a missing, unreadable or foreign file (or
one from another odfproj version) is an empty record, it is rewritten whole (atomically) only when a
run changed it, and ``run --full-refresh`` neither reads it. Roots are not recorded: whether a source
has something new is a question to the source (:func:`odfproj.ingest.fetch.nothing_new`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfproj import __version__
from odfproj.storage.fsutil import replace_atomic

__all__ = ["UPTODATE_FILE", "Heads", "Outcome", "UpToDate"]

#: In the workspace folder, beside ``run_results.json``.
UPTODATE_FILE = "run_uptodate.json"
_FORMAT = 1


@dataclass(frozen=True)
class Heads:
    """A derivative's chain head and its inputs' heads (by ``did:odf``), as a run saw them."""

    head: str
    inputs: tuple[tuple[str, str], ...]

    @staticmethod
    def of(head: str, inputs: Mapping[str, str]) -> Heads:
        return Heads(head, tuple(sorted(inputs.items())))


#: What the update reported: ``run.run.DatasetRun``'s text fields that it set (``message``, ``path``, ...),
#: by name.
Outcome = Mapping[str, str]


class UpToDate:
    """The record of one workspace, loaded once per run; workers look up and record under a lock."""

    def __init__(self, path: Path, entries: dict[str, tuple[Heads, Outcome]]) -> None:
        self.path = path
        self._entries = entries
        self._changed = False
        self._lock = threading.Lock()

    @classmethod
    def load(cls, workspace: Path) -> UpToDate:
        path = workspace / UPTODATE_FILE
        try:
            value: Any = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return cls(path, {})
        if (
            not isinstance(value, dict)
            or value.get("format") != _FORMAT
            or value.get("odfproj") != __version__
        ):
            return cls(path, {})
        entries: dict[str, tuple[Heads, Outcome]] = {}
        datasets = value.get("datasets")
        for name, entry in (datasets if isinstance(datasets, dict) else {}).items():
            try:
                heads = Heads(entry["head"], tuple((i, h) for i, h in entry["inputs"]))
                outcome = dict(entry["outcome"])
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry is no entry
            texts = [heads.head, *(x for pair in heads.inputs for x in pair), *outcome, *outcome.values()]
            if all(isinstance(x, str) for x in texts):
                entries[name] = (heads, outcome)
        return cls(path, entries)

    def outcome(self, dataset: str, heads: Heads) -> Outcome | None:
        """The recorded outcome of ``dataset`` if it was recorded at exactly these heads."""
        with self._lock:
            found = self._entries.get(dataset.lower())
        return found[1] if found is not None and found[0] == heads else None

    def remember(self, dataset: str, heads: Heads, outcome: Outcome) -> None:
        with self._lock:
            if self._entries.get(dataset.lower()) != (heads, dict(outcome)):
                self._entries[dataset.lower()] = (heads, dict(outcome))
                self._changed = True

    def forget(self, dataset: str) -> None:
        """``dataset`` did something (or failed): its entry, if any, describes a past head."""
        with self._lock:
            if self._entries.pop(dataset.lower(), None) is not None:
                self._changed = True

    def save(self) -> None:
        """Write the record if this run changed it; a record that cannot be written only costs the speed."""
        with self._lock:
            if not self._changed:
                return
            datasets = {
                name: {
                    "head": heads.head,
                    "inputs": [list(pair) for pair in heads.inputs],
                    "outcome": dict(outcome),
                }
                for name, (heads, outcome) in sorted(self._entries.items())
            }
            self._changed = False
        data = json.dumps({"format": _FORMAT, "odfproj": __version__, "datasets": datasets}, indent=1)
        with suppress(OSError):
            replace_atomic(self.path, (data + "\n").encode(), durable=False)
