"""A workspace as an odfproj older than the ``.names/`` records left it, built with today's code.

The old layout is what odfproj wrote before commit 83a9309 ("verify: a dataset's Seed id must match the
workspace's record and key"): the same ``datasets/<name>/`` reference layout and ``keys/<id>.pem``, the
``.lock`` and ``.names.lock`` files, and no ``.names/`` at all.
"""

from __future__ import annotations

import shutil

from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_in_workspace
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import set_schema

ADOPTED_2 = "adopted 2 datasets of a workspace made before name records (.names/ written)"


def make_old(workspace: Workspace) -> None:
    """Turn a workspace made by this odfproj into one an odfproj before name records made.

    ``.names/`` goes. So do the projection caches: an older odfproj's may be in an older format,
    which is ignored and rebuilt from the chain, exactly as a missing one is.
    """
    shutil.rmtree(workspace.names_dir)
    for cache in workspace.datasets_dir.glob("*/info/projection.json"):
        cache.unlink()
    assert {p.name for p in workspace.root.iterdir()} <= {".lock", ".names.lock", "datasets", "keys"}


def two_datasets(workspace: Workspace) -> tuple[Dataset, Dataset]:
    first = workspace.create("Trades", model.DatasetKind.Root)
    first.append([set_schema()])
    second = workspace.create("prices", model.DatasetKind.Root)
    return first, second


def problems(workspace: Workspace) -> dict[str, list[str]]:
    return {
        name: [p.message for p in verify_in_workspace(workspace, workspace.open(name))]
        for name in workspace.list_datasets()
    }
