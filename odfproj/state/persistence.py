"""The state index on disk: immutable content files plus one manifest that names them.

::

    info/state-index/
        manifest.json                    the only file that is replaced; names every file below
        log-<segment>-<crc>.arrow        validity log entries of blocks [segment*N, segment*N + N)
        base-<block>-<crc>.roaring       the valid set after block <block> (every N-th block)
        current-<crc>.roaring            the valid set at the stamped head
        keys-<part>-<crc>.arrow          the key store, one file per hash range: hash, row, key columns
        .lock                            serialises writers of this folder
        .work-*/                         an update's new partitions and spilled changes, until saved

Why this shape: a sealed log segment and a base bitmap never change, so an update rewrites only the
open segment, the current bitmap and the key store partitions a run of blocks touched - work bounded by
N blocks and by the number of keys, never by the length of the history. Content files are written under new names (temp + fsync +
rename), then the manifest is replaced atomically, then unreferenced files are removed: a reader sees
the old index or the new one, and a crash leaves at worst orphans (temporary files, unreferenced
content files, a dead writer's work folder) that the next save removes, or the next open that finds
them (:func:`remove_index_leftovers`, under the lock; see :mod:`odfproj.state.leftovers`).

The manifest records the head block hash the index reflects (its *stamp*), the key columns, and the
size and CRC-32 of every file. Loading checks all of it and raises :class:`CorruptIndexError` on any
mismatch: the index is a cache, and a cache that does not prove its integrity is rebuilt, never trusted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64, FrozenBitMap64

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multihash
from odfproj.state.errors import CorruptIndexError, StateIndexError
from odfproj.state.index import StateIndex
from odfproj.state.key_partitions import stored_store
from odfproj.state.leftovers import remove_leftovers
from odfproj.state.stored_files import MANIFEST, StoredFile, check_content, read_content, write_content
from odfproj.state.validity_log import LogEntry
from odfproj.storage.fsutil import fsync_dir, replace_atomic

#: Bumped whenever a file's layout or the index's semantics change; other formats are rebuilt.
INDEX_FORMAT = 2
LOCK = ".lock"

_LOG_SCHEMA = pa.schema(
    [
        pa.field("sequence_number", pa.int64(), nullable=False),
        pa.field("block_hash", pa.string(), nullable=False),
        pa.field("system_time_us", pa.int64(), nullable=False),
        pa.field("valid_from", pa.binary(), nullable=False),
        pa.field("valid_until", pa.binary(), nullable=False),
    ]
)


# --- encoding -------------------------------------------------------------------------------------


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _ipc_table(data: bytes) -> pa.Table:
    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def _encode_segment(entries: list[LogEntry]) -> bytes:
    table = pa.table(
        [
            pa.array([e.sequence_number for e in entries], pa.int64()),
            pa.array([e.block_hash.to_multibase() for e in entries], pa.string()),
            pa.array([e.system_time_us for e in entries], pa.int64()),
            pa.array([e.valid_from.serialize() for e in entries], pa.binary()),
            pa.array([e.valid_until.serialize() for e in entries], pa.binary()),
        ],
        schema=_LOG_SCHEMA,
    )
    return _ipc_bytes(table)


def _segment_table(data: bytes) -> pa.Table:
    table = _ipc_table(data)
    if not table.schema.equals(_LOG_SCHEMA):
        raise CorruptIndexError("a log segment has an unexpected schema")
    return table


def _decode_segment(table: pa.Table) -> list[LogEntry]:
    """A segment's entries (its bitmaps and hashes decoded): when a read first needs one of them."""
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [
        LogEntry(
            sequence_number=seq,
            block_hash=Multihash.from_multibase(block_hash),
            system_time_us=time_us,
            valid_from=FrozenBitMap64.deserialize(valid_from),
            valid_until=FrozenBitMap64.deserialize(valid_until),
        )
        for seq, block_hash, time_us, valid_from, valid_until in zip(*columns, strict=True)
    ]


# --- files ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` says; ``segments[i]`` covers blocks ``[i*N, min((i+1)*N, block_count))``."""

    head: Multihash | None
    block_count: int
    next_offset: int
    key_columns: tuple[str, ...]
    key_types: tuple[str, ...] | None
    base_interval: int
    segments: tuple[StoredFile, ...]
    bases: tuple[tuple[int, StoredFile], ...]
    current: StoredFile
    #: The key store's partitions (``2 ** key_bits`` of them, by hash range), each with its key count.
    key_bits: int
    keys: tuple[tuple[StoredFile, int], ...]

    def file_names(self) -> frozenset[str]:
        """Every name the index folder holds while this is its manifest: the manifest, the lock, the files."""
        files = (*self.segments, *(f for _, f in self.bases), self.current, *(f for f, _ in self.keys))
        return frozenset((MANIFEST, LOCK, *(f.name for f in files)))

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": INDEX_FORMAT,
                "head": self.head.to_multibase() if self.head is not None else None,
                "block_count": self.block_count,
                "next_offset": self.next_offset,
                "key_columns": list(self.key_columns),
                "key_types": list(self.key_types) if self.key_types is not None else None,
                "base_interval": self.base_interval,
                "segments": [s.to_json() for s in self.segments],
                "bases": [{"block": b, **f.to_json()} for b, f in self.bases],
                "current": self.current.to_json(),
                "key_bits": self.key_bits,
                "keys": [{**f.to_json(), "count": count} for f, count in self.keys],
            },
            indent=1,
        )

    @staticmethod
    def from_json(text: bytes) -> Manifest:
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
                raise CorruptIndexError("manifest: missing or of another format")
            head = data["head"]
            key_types = data["key_types"]
            manifest = Manifest(
                head=Multihash.from_multibase(head) if head is not None else None,
                block_count=int(data["block_count"]),
                next_offset=int(data["next_offset"]),
                key_columns=tuple(str(c) for c in data["key_columns"]),
                key_types=tuple(str(t) for t in key_types) if key_types is not None else None,
                base_interval=int(data["base_interval"]),
                segments=tuple(StoredFile.from_json(s) for s in data["segments"]),
                bases=tuple((int(b["block"]), StoredFile.from_json(b)) for b in data["bases"]),
                current=StoredFile.from_json(data["current"]),
                key_bits=int(data["key_bits"]),
                keys=tuple((StoredFile.from_json(k), int(k["count"])) for k in data["keys"]),
            )
        except CorruptIndexError:
            raise
        except (ValueError, KeyError, TypeError, InvalidValueError) as e:
            raise CorruptIndexError(f"manifest: {type(e).__name__}: {e}") from None
        if manifest.base_interval < 1 or manifest.block_count < 0:
            raise CorruptIndexError("manifest: bad block count or base interval")
        if not 0 <= manifest.key_bits <= 32 or len(manifest.keys) != 1 << manifest.key_bits:
            raise CorruptIndexError("manifest: the key partitions do not match the partition bits")
        return manifest


# --- saving and loading ---------------------------------------------------------------------------


def save_index(index: StateIndex, directory: Path) -> Manifest:
    """Persist ``index`` under ``directory``, rewriting only what changed since it was last stored there.

    The caller serialises writers (see :func:`odfproj.state.dataset_index.open_state_index`).
    """
    directory.mkdir(parents=True, exist_ok=True)
    known: dict[str, StoredFile] = index.stored_files if index.stored_directory == directory else {}
    n = index.log.base_interval
    entries = index.log.entries
    segments = []
    for s in range(0, (len(entries) + n - 1) // n):
        sealed = len(entries) - s * n >= n
        key = f"log-{s:06d}"
        if not (sealed and key in known):  # a sealed segment already stored is not even decoded
            known[key] = write_content(
                directory, key, ".arrow", _encode_segment(entries[s * n : (s + 1) * n])
            )
        segments.append(known[key])
    bases = []
    for block, bitmap in sorted(index.log.bases.items()):
        key = f"base-{block:09d}"
        if key not in known:
            known[key] = write_content(directory, key, ".roaring", bitmap.serialize())
        bases.append((block, known[key]))
    current = write_content(directory, "current", ".roaring", BitMap64(index.current).serialize())
    keys = tuple(index.key_store.save_parts(directory))
    schema = index.key_store.schema
    manifest = Manifest(
        head=index.head,
        block_count=index.block_count,
        next_offset=index.next_offset,
        key_columns=index.key_columns,
        key_types=tuple(str(f.type) for f in schema) if schema is not None else None,
        base_interval=n,
        segments=tuple(segments),
        bases=tuple(bases),
        current=current,
        key_bits=index.key_store.bits,
        keys=keys,
    )
    fsync_dir(directory)
    replace_atomic(directory / MANIFEST, manifest.to_json().encode())
    fsync_dir(directory)
    remove_leftovers(directory, manifest.file_names())
    index.key_store.discard_work_dir()
    index.stored_directory = directory
    index.stored_names = manifest.file_names()
    index.stored_files = {k: v for k, v in known.items() if k.startswith(("log-", "base-"))}
    return manifest


def read_manifest(directory: Path) -> Manifest:
    try:
        text = (directory / MANIFEST).read_bytes()
    except OSError as e:
        raise CorruptIndexError(f"no readable manifest: {e}") from None
    return Manifest.from_json(text)


def load_index(directory: Path, key_columns: tuple[str, ...]) -> StateIndex:
    """The index stored under ``directory``; :class:`CorruptIndexError` unless every check passes.

    Checks: manifest format, key columns, every file's size and CRC, contiguous log entries covering
    exactly ``block_count`` blocks, one base per due block, sorted key hashes. The stamp is *not*
    compared with any chain here: that is the caller's job.
    """
    manifest = read_manifest(directory)
    if manifest.key_columns != tuple(key_columns):
        raise CorruptIndexError(
            f"the stored index is keyed by {list(manifest.key_columns)}, not {list(key_columns)}"
        )
    try:
        return _load(directory, manifest)
    except (CorruptIndexError, StateIndexError):
        raise
    except (pa.ArrowException, ValueError, KeyError, TypeError, OverflowError, InvalidValueError) as e:
        raise CorruptIndexError(f"cannot decode the stored index: {type(e).__name__}: {e}") from None


def _load(directory: Path, manifest: Manifest) -> StateIndex:
    n = manifest.base_interval
    index = StateIndex(manifest.key_columns, n)
    segments: list[Callable[[], list[LogEntry]]] = []
    times: list[int] = []
    hashes: list[str] = []
    stored: dict[str, StoredFile] = {}
    for s, segment in enumerate(manifest.segments):
        # Proven (size, CRC, sequence numbers) now; its entries are decoded only when a read needs them.
        table = _segment_table(read_content(directory, segment))
        numbers = table.column("sequence_number").to_numpy()
        if not np.array_equal(numbers, np.arange(s * n, s * n + len(numbers))) or (
            len(numbers) != n and s != len(manifest.segments) - 1
        ):
            raise CorruptIndexError(f"{segment.name}: log entries are not the blocks the manifest says")
        if len(numbers) == n:
            stored[f"log-{s:06d}"] = segment
        segments.append(partial(_decode_segment, table))
        times.extend(table.column("system_time_us").to_pylist())
        hashes.extend(table.column("block_hash").to_pylist())
    if len(times) != manifest.block_count:
        raise CorruptIndexError(
            f"the log holds {len(times)} blocks, the manifest says {manifest.block_count}"
        )
    if (hashes[-1] if hashes else None) != (manifest.head.to_multibase() if manifest.head else None):
        raise CorruptIndexError("the log's last block is not the manifest's head")
    if len(times) > 1 and bool((np.diff(np.asarray(times, np.int64)) < 0).any()):
        raise CorruptIndexError("the log's system times go backwards")
    due = list(range(n - 1, manifest.block_count, n))  # the blocks is_base_block names
    if [b for b, _ in manifest.bases] != due:
        raise CorruptIndexError("base bitmaps missing or unexpected")
    bases = {}
    for block, f in manifest.bases:
        bases[block] = FrozenBitMap64.deserialize(read_content(directory, f))
        stored[f"base-{block:09d}"] = f
    index.log.restore(segments, times, hashes, bases)
    index.current = BitMap64.deserialize(read_content(directory, manifest.current))
    if manifest.key_bits:  # (one partition is read whole, and proven, by stored_store)
        for f, _ in manifest.keys:
            check_content(directory, f)  # streamed: proven now, decoded only when an update needs it
    index.key_store = stored_store(
        manifest.key_columns, manifest.key_types, manifest.key_bits, manifest.keys, directory
    )
    if len(index.key_store) != len(index.current):
        raise CorruptIndexError("the key store and the current bitmap disagree on the number of valid rows")
    index.next_offset = manifest.next_offset
    index.stored_directory = directory
    index.stored_files = stored
    index.stored_names = manifest.file_names()
    return index


def has_leftovers(index: StateIndex, directory: Path) -> bool:
    """Whether ``directory`` holds a name the manifest ``index`` was loaded from or saved as does not.

    One listing, no lock: what a reader checks before it takes the lock to remove leftovers.
    """
    if index.stored_directory != directory:
        return False
    try:
        return any(name not in index.stored_names for name in os.listdir(directory))
    except OSError:
        return False


def remove_index_leftovers(directory: Path) -> list[Path]:
    """Remove what the manifest stored in ``directory`` does not name (temporary files, orphans, dead
    writers' work folders); the caller holds the index lock (:data:`LOCK`), like a writer.

    The manifest is read again here, under the lock: it is the truth only while no save can replace
    it. Without a readable manifest nothing is removed: the index is rebuilt, and that save sweeps.
    """
    try:
        manifest = read_manifest(directory)
    except CorruptIndexError:
        return []
    return remove_leftovers(directory, manifest.file_names())
