"""Creating, forking, refreshing and destroying preview environments (the layout: ``storage.env_record``).

Every operation here writes only inside the environment's folder; production is read. Publishing,
the one operation that changes production, is :mod:`odfproj.storage.publish`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from odfproj.errors import InvalidValueError
from odfproj.odf.identity import DatasetId
from odfproj.storage.env_record import (
    RECORD_FILE,
    EnvironmentRecord,
    Pin,
    PreviewEnvironmentError,
    read_record,
    write_record,
)
from odfproj.storage.fsutil import fsync_dir, remove_tree, replace_atomic
from odfproj.storage.head import read_head
from odfproj.storage.layout import DATASET_DIRS, DatasetLayout
from odfproj.storage.workspace import Workspace
from odfproj.workspace_paths import environment_root

__all__ = ["create_environment", "destroy_environment", "fork", "inputs_among", "refresh_environment"]


def create_environment(production: Workspace, name: str, *, now: datetime | None = None) -> EnvironmentRecord:
    """Make environment ``name``: every production dataset pinned at its current head, nothing copied.

    The record is written last, so a crash leaves a folder without ``env.json`` that is no
    environment, and a second create finishes it.
    """
    root = environment_root(production.root, name)
    if read_record(root) is not None:
        raise PreviewEnvironmentError(f"environment {name!r} already exists ({root})")
    stamp = now or datetime.now(UTC)
    pins = _pin_production(production, root, names=None)
    record = EnvironmentRecord(name, stamp, stamp).with_pins(pins)
    write_record(root, record)
    return record


def refresh_environment(
    production: Workspace, environment: Workspace, *, now: datetime | None = None
) -> tuple[EnvironmentRecord, tuple[str, ...]]:
    """Re-pin every pinned dataset to production's head now; returns the record and the datasets reset.

    A forked dataset whose fork point is still production's head keeps its blocks. One whose
    production head moved can no longer be published as a fast-forward: its environment chain is
    dropped and it is pinned to production's head again (reset), to be applied and run anew.
    Datasets production gained are pinned; ones it lost are dropped unless the environment
    created them. The caller holds the environment's lock.
    """
    record = _record_of(environment)
    reset: list[str] = []
    pins: dict[str, Pin | None] = {}
    current = set(production.list_datasets())
    for name, pin in record.datasets.items():
        if pin.state == "created":
            continue
        if name not in current:
            remove_tree(environment.datasets_dir / name)
            pins[name] = None
            continue
        head = production.open(name, recover=False).head()
        if pin.state == "forked" and pin.base == head:
            continue
        if pin.state == "forked":
            reset.append(name)
            remove_tree(environment.datasets_dir / name)
    to_pin = [
        n for n in current if record.pin(n) is None or n in reset or record.datasets[n].state == "pinned"
    ]
    pins.update(_pin_production(production, environment.root, names=to_pin))
    updated = record.with_pins(pins, refreshed=now or datetime.now(UTC))
    write_record(environment.root, updated)
    return updated, tuple(sorted(reset))


def destroy_environment(production: Path, name: str) -> None:
    """Remove environment ``name`` and everything in its folder.

    Its folder holds only objects the environment wrote and that nothing else references: objects
    a publish gave production are linked into production's folders, so removing these names leaves
    production's intact.
    """
    root = environment_root(production, name)
    if read_record(root) is None:
        raise PreviewEnvironmentError(f"environment {name!r} does not exist in workspace {production}")
    (root / RECORD_FILE).unlink()  # no longer an environment, even if the removal is interrupted
    fsync_dir(root)
    remove_tree(root)


def fork(environment: Workspace, names: Iterable[str]) -> tuple[str, ...]:
    """Give each pinned dataset of ``names`` a chain of its own, forked at its pinned head.

    Nothing is copied: the fork's head is the pinned head, and its blocks stay production's until
    new ones are appended on top. Returns the datasets forked now. The caller holds the
    environment's lock.
    """
    record = _record_of(environment)
    pins: dict[str, Pin | None] = {}
    for name in names:
        pin = record.pin(name)
        if pin is not None and pin.state == "pinned":
            spelled = next(n for n in record.datasets if n.lower() == name.lower())
            folder = environment.datasets_dir / spelled
            for sub in DATASET_DIRS:  # a pinned dataset's folder holds only its head
                (folder / sub).mkdir(exist_ok=True)
            assert pin.base is not None
            # From now on the file is the head (it moves by commits): written durably, unlike a pin's.
            replace_atomic(DatasetLayout(folder).head_ref, pin.base.to_multibase().encode("ascii"))
            pins[spelled] = Pin("forked", pin.base)
    if pins:
        write_record(environment.root, record.with_pins(pins))
    return tuple(sorted(pins))


def inputs_among(workspace: Workspace, names: Iterable[str]) -> dict[str, list[str]]:
    """Each of ``names`` with the inputs its chain's SetTransform names that are among ``names`` too.

    Read from the chains (inputs are recorded by id), so it holds for an environment's datasets
    whatever the manifests now say: publish orders by it, and a fork reaches downstream by it.
    """
    chosen = list(names)
    projections = {name: workspace.open(name, recover=False).projection() for name in chosen}
    by_id = {projection.dataset_id: name for name, projection in projections.items()}
    inputs: dict[str, list[str]] = {}
    for name, projection in projections.items():
        transform = projection.set_transform
        refs = [item.dataset_ref for item in transform.inputs] if transform is not None else []
        inputs[name] = []
        for ref in refs:
            try:
                upstream = by_id.get(DatasetId.from_did_str(ref))
            except InvalidValueError:
                continue  # a name, not an id: a chain records ids
            if upstream is not None:
                inputs[name].append(upstream)
    return inputs


def _record_of(environment: Workspace) -> EnvironmentRecord:
    record = read_record(environment.root)
    if record is None:
        raise PreviewEnvironmentError(f"{environment.root} is not an environment")
    return record


def _pin_production(production: Workspace, root: Path, names: Iterable[str] | None) -> dict[str, Pin]:
    """Pin each production dataset (all when ``names`` is None) at its head now.

    The pin itself is the caller's record, written durably last; the ``refs/head`` written here only
    lists the dataset in the environment (a pinned dataset's head is read from the record), so it is
    written without an fsync each: pinning ten thousand datasets costs no ten thousand syncs.
    """
    pins: dict[str, Pin] = {}
    for name in production.list_datasets() if names is None else names:
        head = read_head(DatasetLayout(production.datasets_dir / name).head_ref)
        if head is None:
            continue  # deleted meanwhile
        layout = DatasetLayout(root / "datasets" / name)
        layout.refs_dir.mkdir(parents=True, exist_ok=True)
        replace_atomic(layout.head_ref, head.to_multibase().encode("ascii"), durable=False)
        pins[name] = Pin("pinned", head)
    return pins
