"""``odfproj diff``: how each dataset's state differs between two points, computed on Spark.

The comparison itself is :func:`odfproj.state.data_diff.diff_states`; this module picks the two
states. The points are either "as known at ``--since``" and "now" (the workspace's heads): what a
run, an apply or a pull changed in the tables, for a reviewer who wants rows rather than blocks; or
"production's heads" and "a preview environment's heads" (``--env``): what publishing it would
change, for a pull request's reviewer.

A diff runs where ``sql`` runs: in this process's JVM, or whole in the warm engine's server
(:func:`warm_diff`), which sends back the plain-value :class:`DatasetDiff`\\ s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.engine.warm.client import WarmSessionHolder, call
from odfproj.engine.warm.server import Handler
from odfproj.state.data_diff import DataDiff, diff_states
from odfproj.state.dataset_index import primary_key_of
from odfproj.state.views import state_frame
from odfproj.storage.workspace import Workspace

__all__ = ["DatasetDiff", "diff_datasets", "handlers", "warm_diff"]

_DIFF = "data_diff"


@dataclass(frozen=True)
class DatasetDiff:
    """One dataset's diff, or why there is none (``note``: it has no data yet)."""

    name: str
    diff: DataDiff | None
    note: str | None = None


def diff_datasets(
    engine: SparkEngine,
    workspace: Workspace,
    names: Sequence[str],
    *,
    since: datetime | None = None,
    base: Workspace | None = None,
    sample: int,
) -> tuple[DatasetDiff, ...]:
    """Each named dataset now against as it was known at ``since``, or against ``base``'s (production's).

    With ``base`` (``workspace`` is an environment) and no names, the datasets the environment
    changed; a dataset ``base`` does not have compares with an empty table.
    """
    if (since is None) == (base is None):
        raise ValueError("diff_datasets compares with a moment (since) or a base workspace, not both")
    if names:
        chosen = list(names)
    elif base is not None and workspace.environment is not None:
        chosen = list(workspace.environment.changed())
    else:
        chosen = workspace.list_datasets()
    datasets = [workspace.open(n) for n in chosen]
    results = []
    with tempfile.TemporaryDirectory(prefix="odfproj-diff-") as scratch:
        for i, dataset in enumerate(datasets):
            projection = dataset.projection()
            if projection.arrow_schema is None:
                results.append(DatasetDiff(dataset.name, None, "no data yet"))
                continue
            before_files, after_files = Path(scratch) / f"{i}-before", Path(scratch) / f"{i}-after"
            before_files.mkdir()
            after_files.mkdir()
            after = state_frame(engine.session, dataset, after_files)
            if base is None:
                before = state_frame(engine.session, dataset, before_files, as_at=since)
            elif base.exists(dataset.name) and base.open(dataset.name).projection().arrow_schema is not None:
                before = state_frame(engine.session, base.open(dataset.name), before_files)
            else:
                before = None  # production has no such dataset, or no data in it yet
            key = primary_key_of(projection) or ()
            results.append(DatasetDiff(dataset.name, diff_states(before, after, key, sample=sample)))
    return tuple(results)


def warm_diff(
    holder: WarmSessionHolder,
    workspace: Workspace,
    names: Sequence[str],
    *,
    since: datetime | None = None,
    base: Workspace | None = None,
    sample: int,
) -> tuple[DatasetDiff, ...]:
    """:func:`diff_datasets` run by the warm server, with the target's settings of ``holder``."""
    target = holder.target
    return call(
        holder.server(),
        _DIFF,
        target.master,
        dict(target.conf),
        str(workspace.root),
        list(names),
        since,
        str(base.root) if base is not None else None,
        sample,
    )


def _served_diff(
    session: object,
    master: str,
    conf: dict[str, str],
    workspace: str,
    names: list[str],
    since: datetime | None,
    base: str | None,
    sample: int,
) -> Any:
    settings = SparkSettings(master=master, conf=MappingProxyType(conf))
    engine = SparkEngine(SparkSessionHolder(settings, session))  # type: ignore[arg-type]
    return diff_datasets(
        engine,
        Workspace(Path(workspace)),
        names,
        since=since,
        base=Workspace(Path(base)) if base is not None else None,
        sample=sample,
    )


def handlers() -> dict[str, Handler]:
    """The request the warm server answers for ``diff``."""
    return {_DIFF: _served_diff}
