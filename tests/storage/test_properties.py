"""Property: any valid sequence of events commits, verifies clean, and projects consistently.

Hypothesis draws a dataset kind and a list of steps (data with or without records, watermark moves,
new/carried/dropped checkpoints, source states, schema growth, sources, info...). Each step is turned
into the valid event(s) for the chain's state at that point, with real Parquet files; ``batch``
commits definition events together with the next data event in one transaction.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odfproj.odf import model
from odfproj.odf.identity import DatasetKeyPair
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import DATA_EVENTS, ChainProjection
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import (
    BASE_TIME,
    DEFAULT_SCHEMA,
    build_add_data,
    build_execute_transform,
    polling_source,
    push_source,
    set_schema,
    set_transform,
)

PROPERTIES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_data_steps = st.tuples(
    st.just("data"),
    st.integers(0, 4),  # records
    st.booleans(),  # advance the watermark
    st.sampled_from(["new", "carry", "drop"]),  # checkpoint
    st.booleans(),  # source state
)
_steps = st.lists(
    st.one_of(
        _data_steps,
        _data_steps,
        st.tuples(st.just("info"), st.text(max_size=12)),
        st.tuples(st.just("column"), st.sampled_from([pa.int64(), pa.float64(), pa.string(), pa.bool_()])),
        st.tuples(st.sampled_from(["push", "disable_push"]), st.sampled_from(["a", "b"])),
        st.tuples(st.sampled_from(["polling", "disable_polling", "license", "vocab", "attachments"])),
    ),
    max_size=8,
)


def _definition(step: tuple[Any, ...], p: ChainProjection, schema: pa.Schema) -> tuple[list[Any], pa.Schema]:
    """The definition event(s) a step stands for, if valid at this point; and the schema after them."""
    kind, *args = step
    root = p.kind == model.DatasetKind.Root
    if kind == "info":
        return [model.SetInfo(description=args[0] or None, keywords=("k",) if args[0] else None)], schema
    if kind == "column":
        wider = schema.append(pa.field(f"c{len(schema)}", args[0]))
        return [set_schema(wider)], wider
    if kind == "push" and root:
        return [push_source(args[0])], schema
    if kind == "disable_push" and root and args[0] in p.push_sources:
        return [model.DisablePushSource(source_name=args[0])], schema
    if kind == "polling" and root:
        return [polling_source()], schema
    if kind == "disable_polling" and root and p.set_polling_source is not None:
        return [model.DisablePollingSource()], schema
    if kind == "license":
        return [
            model.SetLicense(short_name="MIT", name="MIT License", website_url="https://mit-license.org")
        ], schema
    if kind == "vocab":
        return [model.SetVocab(offset_column="offset", event_time_column="event_time")], schema
    if kind == "attachments":
        item = model.AttachmentEmbedded(path="README.md", content="# hello")
        return [model.SetAttachments(attachments=model.AttachmentsEmbedded(items=(item,)))], schema
    return [], schema


def _run(dataset: Dataset, scratch: Path, steps: list[tuple[Any, ...]], batch: bool) -> int:
    """Commit the steps; returns how many records were added."""
    records = 0
    pending: list[Any] = []
    schema = DEFAULT_SCHEMA
    for n, step in enumerate(steps):
        p = dataset.projection()
        if step[0] != "data":
            events, schema = _definition(step, p, schema)
            if batch:
                pending += events
            elif events:
                dataset.append(events, expected_head=p.head)
            continue
        _, rows, advance, checkpoint, with_state = step
        watermark = (p.watermark or BASE_TIME) + timedelta(minutes=1) if advance else None
        if p.kind == model.DatasetKind.Root:
            state = (
                model.SourceState(source_name="src", kind="odf/etag", value=str(n)) if with_state else None
            )
            content = {"new": f"ck-{n}".encode(), "carry": "carry", "drop": None}[checkpoint]
            if content == "carry" and p.last_checkpoint is None:
                content = None
            event, data_file, checkpoint_file = build_add_data(
                p, scratch, rows, watermark=watermark, checkpoint=content, source_state=state, schema=schema
            )
        else:
            event, data_file = build_execute_transform(
                p, scratch, rows, input_rows=rows, watermark=watermark, schema=schema
            )
            checkpoint_file = None
        dataset.append(
            [*pending, event], expected_head=p.head, data_file=data_file, checkpoint_file=checkpoint_file
        )
        pending = []
        records += rows
    if pending:
        dataset.append(pending)
    return records


@PROPERTIES
@given(kind=st.sampled_from(list(model.DatasetKind)), steps=_steps, batch=st.booleans())
def test_valid_chains_commit_verify_and_project(
    kind: model.DatasetKind, steps: list[Any], batch: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(Path(tmp) / "ws")
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        dataset = workspace.create("prop", kind)
        setup: list[Any] = [set_schema()]
        if kind == model.DatasetKind.Derivative:
            setup.insert(0, set_transform(DatasetKeyPair.generate().dataset_id))
        dataset.append(setup)
        records = _run(dataset, scratch, steps, batch)

        assert verify_dataset(dataset, integrity=True) == []
        projection = dataset.projection()
        assert projection.last_offset == (records - 1 if records else None)
        assert projection.has_data == (records > 0)

        chain = list(dataset.iter_blocks())
        assert projection.block_count == len(chain)
        definitions = [
            b.event for _, b in reversed(chain) if not isinstance(b.event, (*DATA_EVENTS, model.Seed))
        ]
        assert [d.event for d in projection.definition_events] == definitions

        # The cached projection equals a rebuild from the chain, and survives its JSON form.
        dataset.layout.projection_cache.unlink()
        rebuilt = Dataset(dataset.name, dataset.path).projection()
        assert rebuilt == projection
        assert ChainProjection.from_json(projection.to_json()) == projection
