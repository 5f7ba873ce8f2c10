"""Changelog histories for the state index tests, and the reference projection they are checked against.

A history is a list of blocks; each block is a list of records ``(op, key, value)`` or ``None`` for a
block without data (a metadata-only block). :func:`reference_state` replays records in offset order
the plain way - a dict from key to the offset of its latest valid row - and shares no code with the
index.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.state.index import ChangeBatch, bitmap_to_numpy
from odfproj.state.key_partitions import PartitionedKeyStore
from odfproj.storage.dataset import Dataset
from tests.storage.helpers.chains import data_slice, schema_with

TS = pa.timestamp("ms", tz="UTC")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
KEY_COLUMNS = ("region", "code")
SCHEMA = schema_with(("region", pa.string()), ("code", pa.int64()), ("value", pa.int64()))

Key = tuple[str | None, int | None]
Record = tuple[int, Key, int]
Block = list[Record] | None

# Small key domains so that keys come back after a retraction; null is a value in both columns.
REGIONS = st.sampled_from([None, "eu", "us", "ü-ß", ""])
CODES = st.sampled_from([None, 0, 1, -7])
KEYS = st.tuples(REGIONS, CODES)


@dataclass(frozen=True)
class Action:
    """What a snapshot diff does to one key: ``upsert`` (insert or correct), ``retract``, or a raw op."""

    kind: str
    key: Key
    value: int


@st.composite
def histories(draw: st.DrawFn, max_blocks: int = 12) -> list[Block]:
    """Snapshot-style changelogs: +A for new keys, -C/+C pairs for changed ones, -R for removed ones.

    A few blocks also carry records a snapshot merge would not write (``+A`` over a live key: an
    upsert stream; ``-R`` of a key without a row), which the index must treat like the reference.
    """
    live: dict[Key, int] = {}
    blocks: list[Block] = []
    for _ in range(draw(st.integers(0, max_blocks))):
        if draw(st.integers(0, 5)) == 0:
            blocks.append(None)
            continue
        records: list[Record] = []
        for action in draw(
            st.lists(st.tuples(st.sampled_from("uuurxa"), KEYS, st.integers(0, 99)), max_size=8)
        ):
            kind, key, value = action
            if kind == "u" and key in live:
                records += [(2, key, live[key]), (3, key, value)]
                live[key] = value
            elif kind == "u":
                records.append((0, key, value))
                live[key] = value
            elif kind == "r" and key in live:
                records.append((1, key, live.pop(key)))
            elif kind == "x":  # retraction of whatever the key holds, even nothing
                records.append((1, key, live.pop(key, value)))
            elif kind == "a":  # upsert-stream append over a possibly live key
                records.append((0, key, value))
                live[key] = value
        blocks.append(records)
    return blocks


def block_times(count: int, gaps: list[int] | None = None) -> list[datetime]:
    """Non-decreasing block system times (equal neighbours allowed: several blocks per commit)."""
    gaps = gaps if gaps is not None else [1] * count
    times, t = [], T0
    for i in range(count):
        t += timedelta(seconds=gaps[i % len(gaps)] if gaps else 1)
        times.append(t)
    return times


def block_hash(n: int) -> Multihash:
    return Multihash.sha3_256(f"state index test block {n}".encode())


def record_table(records: list[Record], start: int, time: datetime) -> pa.Table:
    n = len(records)
    return pa.Table.from_arrays(
        [
            pa.array(range(start, start + n), pa.int64()),
            pa.array([r[0] for r in records], pa.int32()),
            pa.array([time] * n, TS),
            pa.array([T0 + timedelta(minutes=i) for i in range(start, start + n)], TS),
            pa.array([r[1][0] for r in records], pa.string()),
            pa.array([r[1][1] for r in records], pa.int64()),
            pa.array([r[2] for r in records], pa.int64()),
        ],
        schema=SCHEMA,
    )


def change_batches(blocks: list[Block], times: list[datetime]) -> list[ChangeBatch]:
    """In-memory batches (sequence numbers from 0, as a chain whose first block has data or not)."""
    batches, start = [], 0
    for seq, (records, time) in enumerate(zip(blocks, times, strict=True)):
        if not records:
            batches.append(ChangeBatch(seq, block_hash(seq), time))
            continue
        table = record_table(records, start, time)
        batches.append(ChangeBatch(seq, block_hash(seq), time, (start, start + len(records) - 1), table))
        start += len(records)
    return batches


def reference_states(blocks: list[Block]) -> list[dict[Key, int]]:
    """Key -> offset of its latest valid row, after each block; replayed one record at a time."""
    state: dict[Key, int] = {}
    after: list[dict[Key, int]] = []
    offset = 0
    for records in blocks:
        for op, key, _value in records or []:
            if op in (0, 3):
                state[key] = offset
            else:
                state.pop(key, None)
            offset += 1
        after.append(dict(state))
    return after


def commit_history(dataset: Dataset, blocks: list[Block], scratch: Path) -> list[Multihash]:
    """Append each block to a stored dataset as an AddData (a SetInfo for blocks without data)."""
    scratch.mkdir(parents=True, exist_ok=True)
    heads = []
    for n, records in enumerate(blocks):
        p = dataset.projection()
        time = p.system_time + timedelta(seconds=n % 2)  # equal neighbouring times too
        if not records:
            heads.append(dataset.append([model.SetInfo(description=f"block {n}")], system_time=time))
            continue
        start = 0 if p.last_offset is None else p.last_offset + 1
        path = scratch / f"{n}.parquet"
        pq.write_table(record_table(records, start, time), path)
        event = model.AddData(prev_offset=p.last_offset, new_data=data_slice(path, start, len(records)))
        heads.append(dataset.append([event], data_file=path, system_time=time))
    return heads


def offsets(bitmap) -> set[int]:
    return set(bitmap_to_numpy(bitmap).tolist())


def key_entries(index) -> list[tuple[int, int]]:
    """Every (hash, row) of the index's key store in hash order, across its partitions."""
    return [
        (int(h), int(r))
        for part in index.key_store.partitions()
        for h, r in zip(part.hashes, part.rows, strict=True)
    ]


def same_index(a, b) -> None:
    assert a.head == b.head and a.block_count == b.block_count and a.next_offset == b.next_offset
    assert offsets(a.current_offsets()) == offsets(b.current_offsets())
    assert key_entries(a) == key_entries(b)
    for k in range(-1, a.block_count):
        assert offsets(a.offsets_after_block(k)) == offsets(b.offsets_after_block(k))


@contextmanager
def small_partitions(partition_keys: int, spill_rows: int) -> Iterator[None]:
    """Every key store made meanwhile (new, loaded or rebuilt) splits, merges and spills at these sizes.

    The sizes are keyword-only defaults of :class:`PartitionedKeyStore`, which every path that makes
    a store (``StateIndex``, ``stored_store``) leaves as they are: changing the defaults reaches them all.
    """
    defaults = PartitionedKeyStore.__init__.__kwdefaults__
    assert defaults is not None
    saved = dict(defaults)
    defaults.update(partition_keys=partition_keys, spill_rows=spill_rows)
    try:
        yield
    finally:
        defaults.clear()
        defaults.update(saved)
