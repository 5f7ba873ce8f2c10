"""Building root datasets with hand-written changelogs and derivatives over them, for transform tests."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, Phase, settings

from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import logical_hash, physical_hash
from odfproj.storage.workspace import Workspace

TS = pa.timestamp("ms", tz="UTC")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
COMMON_FIELDS = [
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("op", pa.int32(), nullable=False),
    pa.field("system_time", TS, nullable=False),
    pa.field("event_time", TS),
]

#: A record as tests write it: (op, event time in hours after T0, *user values).
Record = tuple


def schema_with(*columns: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([*COMMON_FIELDS, *(pa.field(name, t) for name, t in columns)])


def hours(n: int) -> datetime:
    return T0 + timedelta(hours=n)


_files = itertools.count()


def create_root(ws: Workspace, name: str, schema: pa.Schema) -> Dataset:
    return ws.create(
        name,
        model.DatasetKind.Root,
        events=[model.SetDataSchema(schema=encode_arrow_schema(schema))],
        system_time=T0,
    )


def add_records(
    dataset: Dataset,
    scratch: Path,
    records: Sequence[Record],
    system_time: datetime,
    *,
    watermark: int | None = None,
) -> None:
    """Commit ``records`` (in order) as one AddData of ``dataset``, at the next offsets."""
    p = dataset.projection()
    schema = p.arrow_schema
    assert schema is not None
    start = 0 if p.last_offset is None else p.last_offset + 1
    n = len(records)
    user = list(schema)[len(COMMON_FIELDS) :]
    arrays = [
        pa.array(range(start, start + n), pa.int64()),
        pa.array([r[0] for r in records], pa.int32()),
        pa.array([system_time] * n, TS),
        pa.array([hours(r[1]) for r in records], TS),
        *(pa.array([r[2 + i] for r in records], f.type) for i, f in enumerate(user)),
    ]
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"slice-{next(_files)}.parquet"
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)
    new_data = model.DataSlice(
        logical_hash=logical_hash(path),
        physical_hash=physical_hash(path),
        offset_interval=model.OffsetInterval(start=start, end=start + n - 1),
        size=path.stat().st_size,
    )
    new_watermark = hours(watermark) if watermark is not None else p.watermark
    if p.watermark is not None and new_watermark is not None:
        new_watermark = max(new_watermark, p.watermark)
    event = model.AddData(prev_offset=p.last_offset, new_data=new_data, new_watermark=new_watermark)
    dataset.append([event], expected_head=p.head, system_time=system_time, data_file=path)


def create_derivative(
    ws: Workspace, name: str, inputs: dict[str, Dataset], *queries: tuple[str | None, str]
) -> Dataset:
    """A derivative over ``inputs`` (alias -> dataset) with the multi-step ``queries`` ((alias, sql)...)."""
    return ws.create(
        name,
        model.DatasetKind.Derivative,
        events=[set_transform(inputs, *queries)],
        system_time=T0,
    )


def set_transform(inputs: dict[str, Dataset], *queries: tuple[str | None, str]) -> model.SetTransform:
    return model.SetTransform(
        inputs=tuple(
            model.TransformInput(dataset_ref=d.dataset_id.as_did_str(), alias=alias)
            for alias, d in inputs.items()
        ),
        transform=model.TransformSql(
            engine="spark", queries=tuple(model.SqlQueryStep(query=q, alias=a) for a, q in queries)
        ),
    )


def data_events(dataset: Dataset) -> list[model.ExecuteTransform]:
    """The derivative's ExecuteTransform events, oldest first."""
    return [
        b.event
        for _, b in reversed(list(dataset.iter_blocks()))
        if isinstance(b.event, model.ExecuteTransform)
    ]


def read_records(dataset: Dataset) -> pa.Table:
    """Every record of ``dataset`` in offset order."""
    tables = []
    for _, block in dataset.iter_blocks():
        event = block.event
        if isinstance(event, model.AddData | model.ExecuteTransform) and event.new_data is not None:
            tables.append(pq.read_table(dataset.layout.data_path(event.new_data.physical_hash)))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables).sort_by("offset")


def current_rows(dataset: Dataset) -> list[tuple]:
    """The multiset of current rows (event_time + user columns), sorted, computed in plain Python."""
    table = read_records(dataset)
    if table.num_rows == 0:
        return []
    columns = [c for c in table.column_names if c not in ("offset", "op", "system_time")]
    counts: dict[tuple, int] = {}
    for row in table.to_pylist():
        key = tuple(row[c] for c in columns)
        counts[key] = counts.get(key, 0) + (1 if row["op"] in (0, 3) else -1)
    assert all(n >= 0 for n in counts.values()), f"{dataset.name}: a row was retracted more than added"
    rows = [key for key, n in counts.items() for _ in range(n)]
    return sorted(rows, key=repr)


def spark_examples(count: int) -> settings:
    """Hypothesis settings for a property test whose examples each run Spark jobs: ``count`` examples,
    no deadline, no shrinking (each example costs a dozen jobs or more; a failure is reported as found)."""
    return settings(
        max_examples=count,
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


A, R, CF, CT = 0, 1, 2, 3


def update_after_each(
    ws: Workspace, engine, batches: list[list[Record]], *, full_refresh: bool = False, minute: int = 1
) -> list[str]:
    """Commit each batch to the root ``r`` and update the derivative ``d`` after it, at ``minute``, the
    next minute...; the modes the updates took (what the incremental paths' tests drive)."""
    from odfproj.transform.coordinator import update_derivative

    modes = []
    for n, batch in enumerate(batches, start=minute):
        now = T0 + timedelta(minutes=n)
        add_records(ws.open("r"), ws.root / "scratch", batch, now)
        modes.append(update_derivative(ws, "d", engine, now, full_refresh=full_refresh).mode)
    return modes


def block_hashes(ws: Workspace) -> list[tuple]:
    """Every ExecuteTransform's data of ``d`` (logical hash, offsets) or None: what must not depend on the path."""
    return [
        (e.new_data.logical_hash, e.new_data.offset_interval) if e.new_data is not None else None
        for e in data_events(ws.open("d"))
    ]


def valid_changes(draw, values, steps: tuple[int, int], max_cuts: int) -> list[list[Record]]:
    """Hypothesis: records ``(op, hour, k, v)`` of a root that retracts and corrects only current rows,
    cut into at most ``max_cuts + 1`` batches (a ``-C``/``+C`` pair stays in one); ``values`` draws ``v``."""
    from hypothesis import strategies as st

    current: list[tuple] = []
    groups: list[list[Record]] = []
    for _ in range(draw(st.integers(*steps))):
        kind = draw(st.sampled_from(("add", "add", "retract", "correct"))) if current else "add"
        new = (draw(st.integers(0, 5)), draw(st.sampled_from("abc")), draw(values))
        if kind == "add":
            current.append(new)
            groups.append([(A, *new)])
        else:
            old = current.pop(draw(st.integers(0, len(current) - 1)))
            if kind == "retract":
                groups.append([(R, *old)])
            else:
                current.append(new)
                groups.append([(CF, *old), (CT, *new)])
    cuts = (
        draw(st.lists(st.integers(1, len(groups) - 1), max_size=max_cuts, unique=True))
        if len(groups) > 1
        else []
    )
    bounds = [0, *sorted(cuts), len(groups)]
    return [[r for g in groups[a:b] for r in g] for a, b in itertools.pairwise(bounds)]
