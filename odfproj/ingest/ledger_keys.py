"""Whether a Ledger batch written in scan order holds a key twice, read off the written files' keys.

A Ledger keeps the first row per key. A batch whose rows share one event time keeps the scan's order,
so its records are the scan's rows minus the ones the Ledger drops; finding those takes every key of
the batch. In Spark that is an aggregation over the key columns in front of the write
(:func:`~odfproj.ingest.merge.ledger_in_batch_order`): a shuffle of every row's key, which the plain
job does not have, and which took longer than the rest of the ingest (bench/README.md, issue 36). A
batch for an empty dataset usually repeats no key, so it is written as it is and its files' key
columns are checked here, before anything is committed: only those columns are read, one file at a
time, reduced to 64-bit hashes (:func:`odfproj.state.keys.hash_keys`, the state index's, which takes a
null as a value and every NaN as one, as Spark's grouping does) and sorted. Equal neighbours mean a
key may repeat, and the caller redoes the batch the exact way; a hash collision costs only that redo,
and a repeated key always shows, since equal keys hash equally.

Memory stays bounded whatever the batch: past :data:`_BUCKET_ROWS` keys the hashes are spilled to
files by their top bits and each bucket is sorted on its own (a repeat lands in one bucket).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.state.errors import StateIndexError
from odfproj.state.keys import hash_keys, normalise_keys

__all__ = ["keys_may_repeat"]

#: Hashes sorted at once (16 MiB of them); more are spilled in buckets of about this size.
_BUCKET_ROWS = 1 << 21


def keys_may_repeat(files: Sequence[Path], key: Sequence[str], work_dir: Path) -> bool:
    """False only if no two records of ``files`` have the same ``key`` (compared null-safely).

    True also when the key's type is one this check does not hash as Spark compares (nested types):
    the caller then decides in Spark. ``work_dir`` holds the spilled hashes while the check runs.
    """
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    bits = 0
    while rows > (_BUCKET_ROWS << bits):
        bits += 1
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ledger-keys-", dir=work_dir)))
        spills = [stack.enter_context(open(folder / str(b), "wb")) for b in range(1 << bits)] if bits else []
        held: list[np.ndarray] = []
        for path in files:
            hashes = _hashes(path, key)
            if hashes is None:
                return True
            if not bits:
                held.append(hashes)
                continue
            bucket = hashes >> np.uint64(64 - bits)
            for b, spill in enumerate(spills):
                hashes[bucket == b].tofile(spill)
        if not bits:
            return _repeats(np.concatenate(held) if held else np.zeros(0, np.uint64))
        for spill in spills:
            spill.close()
        return any(_repeats(np.fromfile(folder / str(b), np.uint64)) for b in range(1 << bits))


def _hashes(path: Path, key: Sequence[str]) -> np.ndarray | None:
    """The 64-bit hash of each record's key in ``path``; ``None`` for a key type not hashed here."""
    table = pq.read_table(path, columns=list(key))
    if any(pa.types.is_nested(f.type) for f in table.schema):
        return None
    try:
        return hash_keys(normalise_keys(table, key))
    except StateIndexError:
        return None


def _repeats(hashes: np.ndarray) -> bool:
    hashes.sort()
    return bool(np.any(hashes[1:] == hashes[:-1]))
