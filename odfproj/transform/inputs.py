"""What a transform reads: a dataset's changelog as of a block and an offset.

The same function serves a live update (everything up to the input's head) and the reproduction of a
recorded ExecuteTransform (everything up to the ``newBlockHash``/``newOffset`` the block recorded), so
both read exactly the same way: the data files of the data events at or before that block, filtered to
offsets up to that offset, under the data schema that was in effect at that block.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.arrow_schema import decode_arrow_schema
from odfproj.odf.data_schema import Vocab
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import DATA_EVENTS
from odfproj.storage.workspace import Workspace
from odfproj.transform.errors import TransformError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ChangelogView", "changelog_as_of", "read_changelog", "resolve_inputs"]


@dataclass(frozen=True)
class ChangelogView:
    """A dataset's records as of one block: the files to read, their schema, the watermark then."""

    dataset: Dataset
    #: The last block considered (``None``: nothing of the dataset is considered).
    block_hash: Multihash | None
    #: The last record offset considered (``None``: no record).
    offset: int | None
    #: The data schema in effect at ``block_hash`` (``None`` before any SetDataSchema).
    schema: pa.Schema | None
    data_paths: tuple[Path, ...]
    watermark: datetime | None


def changelog_as_of(dataset: Dataset, block_hash: Multihash | None, offset: int | None) -> ChangelogView:
    """The data of ``dataset`` at or before ``block_hash`` with offsets up to ``offset``.

    Walks the chain from the head (blocks after ``block_hash`` are skipped): reading every input's
    history on every run is the price of batch-independent results (see docs/design/transforms.md).
    """
    if block_hash is None:
        return ChangelogView(dataset, None, None, None, (), None)
    started = False
    schema: pa.Schema | None = None
    watermark: datetime | None = None
    watermark_known = False
    paths: list[Path] = []
    for current, block in dataset.iter_blocks():
        if not started:
            if current != block_hash:
                continue
            started = True
        event = block.event
        if isinstance(event, model.SetDataSchema) and schema is None:
            schema = decode_arrow_schema(event.schema)
        elif isinstance(event, DATA_EVENTS):
            if not watermark_known:
                # Once set, every data event carries the watermark: the latest one is the watermark.
                watermark, watermark_known = event.new_watermark, True
            data = event.new_data
            if data is not None and offset is not None and data.offset_interval.start <= offset:
                paths.append(dataset.layout.data_path(data.physical_hash))
    if not started:
        raise TransformError(f"dataset {dataset.name}: block {block_hash} is not in its metadata chain")
    paths.reverse()  # oldest first (order does not matter to the projections, only to humans)
    return ChangelogView(dataset, block_hash, offset, schema, tuple(paths), watermark)


def read_changelog(session: SparkSession, view: ChangelogView, schema: pa.Schema | None = None) -> DataFrame:
    """The view's records as a DataFrame with ``schema`` (default: the view's), offsets up to the view's."""
    from pyspark.sql import functions as F

    from odfproj.engine.types import spark_schema_from_arrow

    schema = schema if schema is not None else view.schema
    if schema is None:
        raise TransformError(f"dataset {view.dataset.name} has no data schema yet")
    spark_schema = spark_schema_from_arrow(schema)
    if not view.data_paths or view.offset is None:
        return session.createDataFrame([], spark_schema)
    df = session.read.schema(spark_schema).parquet(*(str(p) for p in view.data_paths))
    offset = Vocab.of(view.dataset.projection().set_vocab).offset
    return df.where(F.col(f"`{offset}`") <= F.lit(view.offset))


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
