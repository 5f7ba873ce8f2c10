"""Benchmark of incremental derivatives (issue 20): an update's cost as the root's history grows.

Scenario: a root ``events`` (``id``, ``dim_key`` in 0..9,999, ``value``, ``label``) grown to ``--rows``
rows and then to ``--rows * --growth``; a root ``dims`` of 10,000 rows. Three derivatives:

* ``filtered``: ``WHERE value % 10 < 3`` (stateless: the incremental path);
* ``joined``: ``events JOIN dims ON dim_key`` (mode ``join``: the new events joined with the dimension's state);
* ``grouped``: ``GROUP BY dim_key`` with count, sum and max (mode ``grouped``: per-group partials).

At each size, after the derivatives caught up, ``--rounds`` interleaved pairs of updates are timed per
derivative: an update of ``--update`` x rows new records (a tenth of them Snapshot-style ``-C``/``+C``
corrections of earlier rows) through the normal path, then another such update with ``full_refresh``.
Printed: medians per derivative and path, the large/small ratio of the normal update, and normal vs
full refresh at the large size. With ``--dim-update N`` (and ``joined`` measured), each round also
corrects ``N`` rows of ``dims`` and times ``joined``'s update (``joined/dims``): the dimension's change
joined with the events carrying its keys, which the join index finds by key instead of folding the
events' whole history. Data is written with numpy/pyarrow and committed as AddData blocks
(no ingest), the derivatives run through ``update_derivative`` on one local Spark session.

Usage: ``.venv/bin/python bench/bench_incremental.py [--rows N] [--growth G] [--update F] [--rounds R]
[--only NAME,...] [--normal-only] [--dim-update N]`` (defaults: 100,000 rows grown 10x, 0.1% updates, 2 rounds, every
derivative; the issue's sizes are ``--rows 1000000``; ``--only joined`` measures one derivative and skips the
others' work; ``--normal-only`` skips the full refreshes, which take minutes at 10M rows).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.odf.data_schema import system_fields
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import logical_hash, physical_hash
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative

TS = pa.timestamp("ms", tz="UTC")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SYSTEM = system_fields()
EVENTS = pa.schema(
    [
        *SYSTEM,
        pa.field("id", pa.int64()),
        pa.field("dim_key", pa.int64()),
        pa.field("value", pa.int64()),
        pa.field("label", pa.string()),
    ]
)
DIMS = pa.schema([*SYSTEM, pa.field("dim_key", pa.int64()), pa.field("name", pa.string())])
DIM_ROWS = 10_000
QUERIES = {
    "filtered": "SELECT event_time, id, value FROM e WHERE value % 10 < 3",
    "joined": "SELECT e.event_time, e.id, d.name, e.value FROM e JOIN d ON e.dim_key = d.dim_key",
    "grouped": "SELECT max(event_time) AS event_time, dim_key, count(*) AS n, sum(value) AS total "
    "FROM e GROUP BY dim_key",
}
CHUNK = 1_000_000
APPEND, CORRECT_FROM, CORRECT_TO = 0, 2, 3


def _commit(dataset: Dataset, table: pa.Table, scratch: Path, now: datetime) -> None:
    p = dataset.projection()
    start = 0 if p.last_offset is None else p.last_offset + 1
    n = table.num_rows
    offsets = pa.array(np.arange(start, start + n, dtype=np.int64))
    table = table.set_column(0, "offset", offsets)
    path = scratch / f"{dataset.name}-{start}.parquet"
    pq.write_table(table, path)
    new_data = model.DataSlice(
        logical_hash=logical_hash(path),
        physical_hash=physical_hash(path),
        offset_interval=model.OffsetInterval(start=start, end=start + n - 1),
        size=path.stat().st_size,
    )
    event = model.AddData(prev_offset=p.last_offset, new_data=new_data, new_watermark=now)
    dataset.append([event], expected_head=p.head, system_time=now, data_file=path)
    path.unlink()


def _events(ids: np.ndarray, ops: np.ndarray, bump: np.ndarray, now: datetime) -> pa.Table:
    """Rows of ``events``: row i's values follow from i (``bump`` adds to value: a corrected row)."""
    n = len(ids)
    ms = np.full(n, int(now.timestamp() * 1000), np.int64)
    return pa.Table.from_arrays(
        [
            pa.array(np.zeros(n, np.int64)),
            pa.array(ops.astype(np.int32)),
            pa.array(ms).cast(TS),
            pa.array(int(T0.timestamp() * 1000) + ids * 1000).cast(TS),
            pa.array(ids),
            pa.array(ids % DIM_ROWS),
            pa.array((ids * 7) % 1000 + bump),
            pa.array([f"l{i % 100}" for i in ids.tolist()], pa.string()),
        ],
        schema=EVENTS,
    )


class Source:
    """The ``events`` root and its changes: appends of new ids, corrections of earlier ones."""

    def __init__(self, ws: Workspace, scratch: Path, seed: int = 7) -> None:
        self.ws, self.scratch = ws, scratch
        self.rng = np.random.default_rng(seed)
        self.size = 0
        self.bumps: dict[int, int] = {}  # id -> how often it was corrected (its value is + that)
        self.renames: dict[int, int] = {}  # dimension key -> how often its row was renamed
        self.clock = T0

    def tick(self) -> datetime:
        self.clock += timedelta(minutes=1)
        return self.clock

    def grow(self, rows: int) -> None:
        while self.size < rows:
            n = min(CHUNK, rows - self.size)
            ids = np.arange(self.size, self.size + n, dtype=np.int64)
            table = _events(ids, np.zeros(n, np.int64), np.zeros(n, np.int64), self.tick())
            _commit(self.ws.open("events"), table, self.scratch, self.clock)
            self.size += n

    def update(self, rows: int) -> None:
        """``rows`` records: 90% new rows, 10% as -C/+C pairs correcting earlier rows."""
        pairs = max(1, rows // 20)
        old = self.rng.choice(self.size, size=pairs, replace=False).astype(np.int64)
        before = np.array([self.bumps.get(i, 0) for i in old.tolist()], np.int64)
        for i in old.tolist():
            self.bumps[i] = self.bumps.get(i, 0) + 1
        fresh = np.arange(self.size, self.size + rows - 2 * pairs, dtype=np.int64)
        now = self.tick()
        table = pa.concat_tables(
            [
                _events(old, np.full(pairs, CORRECT_FROM), before, now),
                _events(old, np.full(pairs, CORRECT_TO), before + 1, now),
                _events(fresh, np.zeros(len(fresh), np.int64), np.zeros(len(fresh), np.int64), now),
            ]
        )
        _commit(self.ws.open("events"), table, self.scratch, now)
        self.size += len(fresh)

    def update_dims(self, rows: int) -> None:
        """``rows`` -C/+C pairs renaming random dimension rows (each keeps its key)."""
        keys = self.rng.choice(DIM_ROWS, size=rows, replace=False).astype(np.int64)
        before = [self.renames.get(k, 0) for k in keys.tolist()]
        for k in keys.tolist():
            self.renames[k] = self.renames.get(k, 0) + 1
        now = self.tick()
        table = pa.concat_tables(
            [
                _dims(keys, np.full(rows, CORRECT_FROM), before),
                _dims(keys, np.full(rows, CORRECT_TO), [b + 1 for b in before]),
            ]
        )
        _commit(self.ws.open("dims"), table, self.scratch, now)


def _dims(keys: np.ndarray, ops: np.ndarray, renames: list[int]) -> pa.Table:
    """Rows of ``dims``: key k is named ``dim k`` (``dim k/r`` after its r-th rename)."""
    n = len(keys)
    t0 = np.full(n, int(T0.timestamp() * 1000), np.int64)
    names = [f"dim {k}" + (f"/{r}" if r else "") for k, r in zip(keys.tolist(), renames, strict=True)]
    return pa.Table.from_arrays(
        [
            pa.array(np.zeros(n, np.int64)),
            pa.array(ops.astype(np.int32)),
            pa.array(t0).cast(TS),
            pa.array(t0).cast(TS),
            pa.array(keys),
            pa.array(names, pa.string()),
        ],
        schema=DIMS,
    )


def setup(ws: Workspace, scratch: Path) -> Source:
    events = ws.create(
        "events",
        model.DatasetKind.Root,
        events=[model.SetDataSchema(schema=encode_arrow_schema(EVENTS))],
        system_time=T0,
    )
    dims = ws.create(
        "dims",
        model.DatasetKind.Root,
        events=[model.SetDataSchema(schema=encode_arrow_schema(DIMS))],
        system_time=T0,
    )
    keys = np.arange(DIM_ROWS, dtype=np.int64)
    _commit(dims, _dims(keys, np.zeros(DIM_ROWS, np.int64), [0] * DIM_ROWS), scratch, T0)
    for name, query in QUERIES.items():  # every derivative is defined; --only picks which run
        inputs = [model.TransformInput(dataset_ref=events.dataset_id.as_did_str(), alias="e")]
        if "JOIN d" in query:
            inputs.append(model.TransformInput(dataset_ref=dims.dataset_id.as_did_str(), alias="d"))
        transform = model.TransformSql(engine="spark", query=query)
        ws.create(
            name,
            model.DatasetKind.Derivative,
            events=[model.SetTransform(inputs=tuple(inputs), transform=transform)],
            system_time=T0,
        )
    return Source(ws, scratch)


def timed_update(
    ws: Workspace, engine: SparkEngine, name: str, now: datetime, full: bool
) -> tuple[float, str]:
    started = time.perf_counter()
    outcome = update_derivative(ws, name, engine, now, full_refresh=full)
    return time.perf_counter() - started, outcome.mode


def measure(
    ws: Workspace,
    engine: SparkEngine,
    source: Source,
    update_rows: int,
    rounds: int,
    names: list[str],
    paths: tuple[bool, ...] = (False, True),
    dim_rows: int = 0,
) -> dict:
    """Per derivative and path (normal, full refresh): update times over ``rounds`` interleaved pairs;
    with ``dim_rows``, also ``joined``'s update after a dimension change (``joined/dims``)."""
    times: dict[tuple[str, bool], list[float]] = {}
    modes: dict[tuple[str, bool], str] = {}
    for _ in range(rounds):
        for full in paths:
            source.update(update_rows)
            for name in names:
                seconds, mode = timed_update(ws, engine, name, source.clock, full)
                times.setdefault((name, full), []).append(seconds)
                modes[(name, full)] = mode
            if dim_rows and "joined" in names:
                source.update_dims(dim_rows)
                seconds, mode = timed_update(ws, engine, "joined", source.clock, full)
                times.setdefault(("joined/dims", full), []).append(seconds)
                modes[("joined/dims", full)] = mode
    return {k: (statistics.median(v), modes[k], v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--growth", type=int, default=10)
    parser.add_argument("--update", type=float, default=0.001, help="update size as a fraction of --rows")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default=",".join(QUERIES), help="derivatives to measure, comma-separated")
    parser.add_argument(
        "--normal-only",
        action="store_true",
        help="time only the normal updates (a full refresh of a join at 10M rows takes minutes)",
    )
    parser.add_argument(
        "--dim-update",
        type=int,
        default=0,
        help="also time joined's update after N dimension rows are corrected (joined/dims)",
    )
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(QUERIES))
    if unknown:
        parser.error(f"--only: unknown derivative {', '.join(unknown)} (known: {', '.join(QUERIES)})")
    update_rows = max(20, int(args.rows * args.update))
    settings = SparkSettings(
        master="local[*]",
        app_name="bench-incremental",
        conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "6g"},
    )
    holder = SparkSessionHolder(settings)
    engine = SparkEngine(holder)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
        ws = Workspace(Path(tmp) / "ws")
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        source = setup(ws, scratch)
        for size in (args.rows, args.rows * args.growth):
            source.grow(size)
            started = time.perf_counter()
            for name in names:  # catch up with the growth (not timed per derivative)
                update_derivative(ws, name, engine, source.tick())
            print(
                f"grown to {size:,} rows; derivatives caught up in {time.perf_counter() - started:.1f}s",
                flush=True,
            )
            paths = (False,) if args.normal_only else (False, True)
            results[size] = measure(
                ws, engine, source, update_rows, args.rounds, names, paths, args.dim_update
            )
            for (name, full), (median, mode, all_times) in sorted(results[size].items()):
                label = "full refresh" if full else "normal"
                print(
                    f"  {size:>11,} {name:11} {label:12} mode={mode:9} median {median:6.2f}s  "
                    f"({', '.join(f'{t:.2f}' for t in all_times)})",
                    flush=True,
                )
    holder.stop()
    small, large = args.rows, args.rows * args.growth
    print(
        f"\nupdate of {update_rows:,} records; ratio large/small ({large:,}/{small:,}) of the normal update"
        + ("" if args.normal_only else ", and full refresh / normal at the large size")
        + ":"
    )
    measured = [*names, *(["joined/dims"] if args.dim_update and "joined" in names else [])]
    for name in measured:
        ratio = results[large][(name, False)][0] / results[small][(name, False)][0]
        line = f"  {name:11} mode={results[large][(name, False)][1]:9} {ratio:5.2f}x"
        if not args.normal_only:
            line += (
                f"   full/normal {results[large][(name, True)][0] / results[large][(name, False)][0]:5.2f}x"
            )
        print(line)


if __name__ == "__main__":
    main()
