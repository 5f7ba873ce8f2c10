"""A join derivative's inputs' states on disk, bucketed by join key, stamped with the head it describes.

::

    info/join-index/
        manifest.json                       the only file replaced in place: format, fingerprint, head,
                                            the input offsets covered, every run's files and sizes
        <key>/r-<txid>/__odfproj_bucket=<b>/part-*.parquet

For every input column a join's equality reads (:mod:`odfproj.transform.incremental.join_keys`), the derivative
keeps the input's rows as *signed counts* (the state columns, standard names, and a net count: the
same netting as :func:`odfproj.state.projections.signed_counts`), cut into :data:`BUCKETS` buckets by a
type-stable hash of that column (:func:`key_bucket`; integers of every width hash as ``bigint``).
Rows with a null key are not kept: an equality never matches them. A key's rows are a list of
*runs*, each written once by Spark and never changed: an update appends the run of its new records'
counts, so keeping the index current costs what changed; when a run grows to half the size of the
one before it the two are merged (size-tiered, so a key has O(log) runs and every row is rewritten
O(log) times). The rows of a bucket are the sum of its runs' counts; a row is current while its sum
is positive. A lookup reads only the buckets of the keys it looks for.

Writers are serialised by the workspace lock (``odfproj run`` holds it); a save removes whatever its
manifest does not list (:func:`~odfproj.state.leftovers.remove_leftovers`), so runs written by a
writer killed before its manifest, and temporaries, do not outlive the next save.

Like the group state (:mod:`odfproj.state.group_state`) it is a cache: trusted only when its
manifest has this format and the caller's ``fingerprint`` (the query, the keys, the inputs and their
schemas), when its head is a block of the derivative's chain, and when every file it lists is there
with its size. A head behind the current one (a crash between a commit and the index's write) is
caught up by the caller from the inputs' records after the covered offsets; anything else reads as
``None`` and is rebuilt. A stale index costs time, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.engine.columns import column
from odfproj.engine.exchange import exchange_of
from odfproj.engine.spark import is_spark_error
from odfproj.odf.multiformats import Multihash
from odfproj.state.leftovers import remove_leftovers
from odfproj.state.projections import COUNT
from odfproj.state.stamped import MANIFEST, read_stamped, write_stamped
from odfproj.storage.dataset import Dataset
from odfproj.storage.fsutil import new_txid

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "BUCKET",
    "BUCKETS",
    "IndexedKey",
    "JoinIndex",
    "StoredRun",
    "add_run",
    "join_index_directory",
    "key_bucket",
    "key_value",
    "load_join_index",
    "read_buckets",
    "save_join_index",
]

JOIN_INDEX_DIR = "join-index"
#: Bumped whenever the stored files' meaning changes; other formats are rebuilt.
FORMAT = 1
#: How many buckets a key's rows are cut into: a lookup of a few keys reads about that share of them.
BUCKETS = 64
BUCKET = "__odfproj_bucket"


@dataclass(frozen=True)
class IndexedKey:
    """An input's rows kept by one of its columns (standard column name) and that column's kind of value."""

    alias: str
    column: str
    #: ``long`` for integers of any width, else the Spark type name (:func:`~odfproj.transform.incremental.join_keys.key_kind`).
    kind: str

    @property
    def name(self) -> str:
        """The key's folder: a digest, since aliases and column names may hold any character."""
        text = json.dumps([self.alias, self.column, self.kind])
        return "k-" + hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class StoredRun:
    """One run of a key's rows: its folder and every Parquet file in it (path below it, size)."""

    name: str
    files: tuple[tuple[str, int], ...]

    @property
    def size(self) -> int:
        return sum(size for _, size in self.files)

    def in_buckets(self, buckets: set[int]) -> list[str]:
        prefixes = tuple(f"{BUCKET}={b}/" for b in buckets)
        return [path for path, _ in self.files if path.startswith(prefixes)]


@dataclass(frozen=True)
class JoinIndex:
    """A loaded (or just written) index: its head, the input offsets it covers, each key's runs."""

    directory: Path
    head: Multihash
    #: Per input alias, the last offset whose records the runs hold (``None``: none).
    covered: Mapping[str, int | None]
    runs: Mapping[str, tuple[StoredRun, ...]]


def join_index_directory(dataset: Dataset) -> Path:
    return dataset.derived_dir(JOIN_INDEX_DIR)


def key_value(value: Column, kind: str) -> Column:
    """A key column as compared and hashed: integers widened to ``bigint`` (so ``int = bigint`` meets)."""
    return value.cast("long") if kind == "long" else value


def key_bucket(value: Column, kind: str) -> Column:
    """The bucket of a key value: a hash of its type-stable form, the same in every run and lookup."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(key_value(value, kind)), F.lit(BUCKETS)).cast("int")


def _files(run: Path) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(p.relative_to(run)), p.stat().st_size) for p in run.rglob("*.parquet")))


def load_join_index(dataset: Dataset, fingerprint: str) -> JoinIndex | None:
    """The stored index if it has this ``fingerprint``, a head in ``dataset``'s chain and all its files."""
    directory = join_index_directory(dataset)
    stamped = read_stamped(directory, FORMAT, fingerprint)
    if stamped is None or not dataset.in_chain(stamped.head):
        return None
    head, manifest = stamped.head, stamped.fields
    try:
        covered = {str(k): (None if v is None else int(v)) for k, v in manifest["covered"].items()}
        runs: dict[str, tuple[StoredRun, ...]] = {}
        for key, stored in manifest["runs"].items():
            listed = []
            for entry in stored:
                run = StoredRun(str(entry["name"]), tuple((str(p), int(s)) for p, s in entry["files"]))
                folder = directory / str(key) / run.name
                if folder.parent.parent != directory or not run.files or _files(folder) != run.files:
                    return None
                listed.append(run)
            runs[str(key)] = tuple(listed)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return JoinIndex(directory, head, covered, runs)


def read_buckets(
    session: SparkSession, index: JoinIndex, key: IndexedKey, schema: StructType, buckets: Iterable[int]
) -> DataFrame | None:
    """The signed counts the key's runs hold in ``buckets`` (not netted across runs), ``None`` if none.

    ``schema``: the state columns (standard names) and :data:`~odfproj.state.projections.COUNT`; a
    column the input added since a run was written reads as null, as in its own older files.
    """
    wanted = set(buckets)
    exchange = exchange_of(session)  # copies in the store for executors that cannot see this disk
    paths = [
        exchange.reads_at(index.directory / key.name / run.name / path)
        for run in index.runs.get(key.name, ())
        for path in run.in_buckets(wanted)
    ]
    return session.read.schema(schema).parquet(*paths) if paths else None


def _write(frame: DataFrame, folder: Path) -> StoredRun | None:
    """``frame`` (rows with their bucket) as a run in ``folder``: one file per bucket; ``None`` if empty."""
    exchange = exchange_of(frame.sparkSession)
    frame.repartition(column(BUCKET)).write.partitionBy(BUCKET).parquet(exchange.writes_at(folder))
    exchange.take(folder)
    files = _files(folder)
    if not files:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return StoredRun(folder.name, files)


def add_run(
    session: SparkSession,
    directory: Path,
    key: IndexedKey,
    runs: tuple[StoredRun, ...],
    counts: DataFrame,
    schema: StructType,
) -> tuple[StoredRun, ...]:
    """``runs`` and the run of ``counts`` (state columns and a signed count), merged size-tiered.

    Files are written under new names; nothing listed in the stored manifest is changed or removed.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    folder = directory / key.name
    keyed = counts.where(column(key.column).isNotNull() & (column(COUNT) != 0))
    run = _write(
        keyed.withColumn(BUCKET, key_bucket(column(key.column), key.kind)), folder / f"r-{new_txid()}"
    )
    result = list(runs) if run is None else [*runs, run]
    while len(result) >= 2 and result[-1].size * 2 >= result[-2].size:
        older, newer = result[-2], result[-1]
        names = [c.name for c in schema.fields if c.name != COUNT]
        with_bucket = T.StructType([*schema.fields, T.StructField(BUCKET, T.IntegerType())])
        # One read per run: Spark refuses two partitioned roots in one read.
        older_rows, newer_rows = (
            session.read.schema(with_bucket).parquet(exchange_of(session).reads_at(folder / r.name))
            for r in (older, newer)
        )
        stored = older_rows.unionByName(newer_rows)
        merged = (
            stored.groupBy(*[column(c) for c in (*names, BUCKET)])
            .agg(F.sum(column(COUNT)).cast("long").alias(COUNT))
            .where(column(COUNT) != 0)
            .select(*[column(c) for c in (*names, COUNT, BUCKET)])
        )
        written = _write(merged, folder / f"r-{new_txid()}")
        result[-2:] = [] if written is None else [written]
    return tuple(result)


def save_join_index(
    directory: Path,
    head: Multihash,
    fingerprint: str,
    covered: Mapping[str, int | None],
    runs: Mapping[str, tuple[StoredRun, ...]],
) -> JoinIndex:
    """Record ``runs`` as the index at ``head`` covering ``covered``; then remove every unlisted run.

    Best effort, like the state index: the commit it follows is durable, and an index whose manifest
    was not replaced is found behind (or missing) by the next update, which catches it up.
    """
    index = JoinIndex(directory, head, dict(covered), dict(runs))
    fields = {
        "covered": dict(covered),
        "runs": {
            key: [{"name": r.name, "files": [list(f) for f in r.files]} for r in listed]
            for key, listed in runs.items()
        },
    }
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_stamped(directory, FORMAT, head, fingerprint, fields)
    except OSError:
        return index
    # Unlisted keys and runs, and what killed writers left (a run never listed, a manifest's temporary).
    remove_leftovers(directory, (MANIFEST, *runs))
    for key, listed in runs.items():
        remove_leftovers(directory / key, [r.name for r in listed])
        with contextlib.suppress(OSError):
            (directory / key).rmdir()  # only if empty
    return index


def is_storage_failure(error: BaseException) -> bool:
    """Whether writing the index failed for a reason that makes it stale, not a bug: I/O or Spark."""
    return isinstance(error, OSError) or is_spark_error(error)
