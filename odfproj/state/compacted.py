"""A compacted copy of a dataset's records: a few Parquet files instead of one small file per block.

An hourly root has 8,760 data files after a year. Spark lists, opens and plans every one of them for
a read of its history (a Ledger merge, a full-path derivative's input, ``odfproj sql``), which costs
seconds that grow with the chain, whatever the files hold. The compacted copy holds the same records
(every column, ``offset``/``op``/``system_time`` included, under the current data schema) in a few
files, and is kept current the way the state index is:

::

    info/compacted/
        manifest.json                 the only file replaced; the head it reflects and its parts
        part-<first>-<last>-<crc>.parquet   the records with offsets first..last, in offset order
        .lock                         serialises writers

* **Keyed by the head it reflects.** It is used only when that head is the chain's head or one of
  its ancestors (the data index says so for the head's sequence number, without a walk); a copy whose
  head left the chain (history rolled back, another dataset's folder) is never read, but rebuilt.
* **Updated incrementally.** The blocks appended since its head add one part of their records; parts
  are merged in runs of :data:`FANOUT` of the same level (a binary counter in base ``FANOUT``), so a
  chain of ``n`` slices is held in at most ``(FANOUT - 1) * log_FANOUT(n)`` files and each record is
  rewritten about ``log_FANOUT(n)`` times over the chain's life.
* **Rebuilt from the chain** when it is missing, fails a size or CRC check, is of another format, or
  was written under another data schema (a schema only gains columns, rarely).
* **Crash-safe like the state index.** Parts are written under new names (temporary file, fsync,
  rename), the manifest is replaced last, and only then are retired parts removed: a writer killed
  at any moment leaves the old copy or the new one. Retired parts stay :data:`RETIRED_GRACE` seconds,
  so a reader (a Spark job of another process) that listed them before the swap can finish.

The chain is never rewritten and ``verify --integrity`` checks the chain's own data files: the copy is
a cache, rebuilt whenever it cannot prove itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multihash
from odfproj.state.errors import CorruptIndexError
from odfproj.state.leftovers import remove_leftovers
from odfproj.state.stored_files import MANIFEST, StoredFile, check_content, write_content
from odfproj.storage.data_index import data_index
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import StorageError
from odfproj.storage.fsutil import fsync_dir, replace_atomic
from odfproj.storage.locks import file_lock
from odfproj.storage.objects import read_data_file
from odfproj.storage.slices import SliceFile, data_as_of

__all__ = ["COMPACT_ABOVE", "FANOUT", "CompactedCopy", "compacted_copy", "compacted_directory"]

COMPACTED_DIR = "compacted"
LOCK = ".lock"
#: Bumped whenever the layout changes; a copy of another format is rebuilt.
_FORMAT = 1
#: Parts of one level merged into one part of the next.
FANOUT = 8
#: Readers go through the copy only for more data files than this: below, the files are few anyway.
COMPACT_ABOVE = 32
#: At most this many bytes of files are read into one part (a merge or a batch of new slices).
MERGE_LIMIT = 64 << 20
#: Seconds a retired part is kept after the manifest stopped naming it.
RETIRED_GRACE = 3600.0


@dataclass(frozen=True)
class Part:
    """One file of the copy: the records with offsets ``first..last`` (all of them, dense)."""

    file: StoredFile
    first: int
    last: int
    level: int


@dataclass(frozen=True)
class CompactedCopy:
    """The copy as a manifest describes it; ``directory`` holds the parts."""

    directory: Path
    head: Multihash
    block_count: int
    #: The data schema the parts were written under (Arrow schema bytes).
    schema: bytes
    parts: tuple[Part, ...]
    #: Parts no longer named, and since when (epoch seconds): removed after :data:`RETIRED_GRACE`.
    retired: tuple[tuple[str, float], ...] = ()

    @property
    def last_offset(self) -> int | None:
        return self.parts[-1].last if self.parts else None

    def paths(self, after: int | None, offset: int | None) -> tuple[Path, ...]:
        """The parts holding any record with an offset in ``(after, offset]`` (``after`` None: from 0)."""
        if offset is None:
            return ()
        return tuple(
            self.directory / p.file.name
            for p in self.parts
            if p.first <= offset and (after is None or p.last > after)
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _FORMAT,
                "head": self.head.to_multibase(),
                "block_count": self.block_count,
                "schema": self.schema.hex(),
                "parts": [
                    {**p.file.to_json(), "first": p.first, "last": p.last, "level": p.level}
                    for p in self.parts
                ],
                "retired": [{"name": name, "since": since} for name, since in self.retired],
            },
            indent=1,
        )

    @staticmethod
    def from_json(directory: Path, text: bytes) -> CompactedCopy:
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise CorruptIndexError("compacted copy: a manifest of another format")
            parts = tuple(
                Part(StoredFile.from_json(p), int(p["first"]), int(p["last"]), int(p["level"]))
                for p in data["parts"]
            )
            copy = CompactedCopy(
                directory=directory,
                head=Multihash.from_multibase(data["head"]),
                block_count=int(data["block_count"]),
                schema=bytes.fromhex(data["schema"]),
                parts=parts,
                retired=tuple((str(r["name"]), float(r["since"])) for r in data["retired"]),
            )
        except CorruptIndexError:
            raise
        except (ValueError, KeyError, TypeError, InvalidValueError) as e:
            raise CorruptIndexError(f"compacted copy: manifest: {type(e).__name__}: {e}") from None
        expected = 0
        for p in parts:
            if p.first != expected or p.last < p.first:
                raise CorruptIndexError("compacted copy: its parts do not cover consecutive offsets")
            expected = p.last + 1
        return copy

    def names(self) -> frozenset[str]:
        """Every name the folder holds while this is its manifest."""
        return frozenset((MANIFEST, LOCK, *(p.file.name for p in self.parts), *(n for n, _ in self.retired)))


def compacted_directory(dataset: Dataset) -> Path:
    return dataset.derived_dir(COMPACTED_DIR)


def compacted_copy(dataset: Dataset) -> CompactedCopy | None:
    """The copy at the dataset's current head, updated or rebuilt as needed; ``None`` if it cannot be
    brought there now (another writer holds its lock, a read-only workspace, no data schema yet).

    Whoever gets ``None`` reads the chain's own files instead: the copy only ever saves time.
    """
    projection = dataset.projection()
    if projection.schema is None or projection.last_offset is None:
        return None
    directory = compacted_directory(dataset)
    stored = _load(directory)
    index = data_index(dataset)
    if stored is not None and _current(stored, index.head, projection.schema):
        return stored
    for theirs in dataset.pinned_info_dirs(COMPACTED_DIR):
        found = _load(theirs)
        if found is not None and _current(found, index.head, projection.schema):
            return found  # production's copy at the pinned head: read there, never updated
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with file_lock(directory / LOCK, purpose="compacted copy", busy=lambda _h: StorageError("busy")):
            stored = _load(directory)  # again, under the lock: another writer may have moved it
            if stored is not None and _current(stored, index.head, projection.schema):
                return stored
            usable = (
                stored is not None
                and stored.schema == projection.schema
                and stored.block_count <= index.block_count
                and index.block_hash(stored.block_count - 1) == stored.head.to_bytes()
            )
            return _update(dataset, directory, stored if usable else None, projection.schema)
    except (OSError, StorageError):
        return None


def _current(copy: CompactedCopy, head: Multihash, schema: bytes) -> bool:
    return copy.head == head and copy.schema == schema


def _load(directory: Path) -> CompactedCopy | None:
    """The stored copy, once its manifest parses and every part matches its size and CRC."""
    try:
        copy = CompactedCopy.from_json(directory, (directory / MANIFEST).read_bytes())
        for part in copy.parts:
            check_content(directory, part.file)
    except (OSError, CorruptIndexError):
        return None
    return copy


def _update(dataset: Dataset, directory: Path, base: CompactedCopy | None, schema: bytes) -> CompactedCopy:
    """Add the records after ``base`` (all of them without one) as parts, merge full runs, save."""
    data = data_as_of(dataset)
    projection = dataset.projection()
    assert data is not None and projection.arrow_schema is not None
    parts = list(base.parts) if base is not None else []
    retired: list[tuple[str, float]] = []
    new = data.between(base.last_offset if base is not None else None, projection.last_offset)
    for batch in _batches(new):
        table = pa.concat_tables([read_data_file(s.path, projection.arrow_schema) for s in batch])
        parts.append(_write_part(directory, [table], batch[0].start, batch[-1].end))
        while len(parts) >= FANOUT and len({p.level for p in parts[-FANOUT:]}) == 1:
            run = parts[-FANOUT:]
            if sum(p.file.size for p in run) > MERGE_LIMIT:
                break  # large parts are few anyway: merging them would hold too much at once
            tables = [pq.read_table(directory / p.file.name) for p in run]
            parts[-FANOUT:] = [_write_part(directory, tables, run[0].first, run[-1].last)]
            retired.extend((p.file.name, time.time()) for p in run)
    now = time.time()
    earlier = [
        (n, since) for n, since in (base.retired if base is not None else ()) if now - since < RETIRED_GRACE
    ]
    named = {p.file.name for p in parts}
    copy = CompactedCopy(
        directory,
        data.block_hash,
        data.index.block_count,
        schema,
        tuple(parts),
        tuple(r for r in (*earlier, *retired) if r[0] not in named),
    )
    fsync_dir(directory)
    replace_atomic(directory / MANIFEST, copy.to_json().encode())
    remove_leftovers(directory, copy.names())
    return copy


def _batches(slices: Sequence[SliceFile]) -> list[Sequence[SliceFile]]:
    """``slices`` cut into runs of at most :data:`MERGE_LIMIT` bytes of files (one part each)."""
    batches: list[Sequence[SliceFile]] = []
    first, size = 0, 0
    for i, s in enumerate(slices):
        if i > first and size + s.data.size > MERGE_LIMIT:
            batches.append(slices[first:i])
            first, size = i, 0
        size += s.data.size
    if first < len(slices):
        batches.append(slices[first:])
    return batches


def _level(rows: int) -> int:
    """A part's level: ``k`` for ``FANOUT**k <= rows < FANOUT**(k+1)``, so runs merge by size."""
    level = 0
    while rows >= FANOUT ** (level + 1):
        level += 1
    return level


def _write_part(directory: Path, tables: Sequence[pa.Table], first: int, last: int) -> Part:
    rows = sum(t.num_rows for t in tables)
    if rows != last - first + 1:
        raise StorageError(f"compacted copy: {rows} records for offsets {first}..{last}")
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, tables[0].schema) as writer:
        for table in tables:
            writer.write_table(table)
    stored = write_content(
        directory, f"part-{first:012d}-{last:012d}", ".parquet", sink.getvalue().to_pybytes()
    )
    return Part(stored, first, last, _level(rows))
