"""A derivative's inputs: its SetTransform's ``did:odf`` references resolved to workspace datasets.

What a transform reads of them is :mod:`odfproj.state.frames` (a changelog as of a block and offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace
from odfproj.transform.errors import TransformError

if TYPE_CHECKING:
    pass

__all__ = ["resolve_inputs"]


def resolve_inputs(
    workspace: Workspace, derivative: str, inputs: Iterable[model.TransformInput]
) -> list[tuple[str, DatasetId, Dataset]]:
    """``(alias, id, dataset)`` per SetTransform input, in order; the ids are looked up in ``workspace``."""
    resolved: list[tuple[str, DatasetId, Dataset]] = []
    for transform_input in inputs:
        try:
            dataset_id = DatasetId.from_did_str(transform_input.dataset_ref)
        except Exception:
            raise TransformError(
                f"dataset {derivative}: input {transform_input.dataset_ref!r} is not a did:odf identifier"
            ) from None
        dataset = workspace.find_by_id(dataset_id)
        alias = transform_input.alias
        if dataset is None:
            shown = f"{alias!r} ({dataset_id})" if alias else str(dataset_id)
            raise TransformError(f"dataset {derivative}: input {shown} is not in the workspace")
        resolved.append((alias or dataset.name, dataset_id, dataset))
    return resolved
