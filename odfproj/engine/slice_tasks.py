"""A large batch's data files joined and described in Spark tasks, on every core of a local session.

After Spark writes a batch on the grid of :mod:`odfproj.engine.slices`, each file must be made whole (the
pieces of a cell two read partitions shared, joined) and described (both hashes, size, records:
:func:`odfproj.storage.objects.describe_data_file`). In the driver that is one Python process working
one file after the other: at 20M rows (21 files, 600 MB) about 6 s of a 28 s Append ingest, one core
idle throughout. Here it is one Spark job with one task per file, run by Spark's Python workers on
every core the session has, so the driver neither decodes the files nor grows with them.

Only where that is sure to work: a classic session on a ``local`` master with two cores or more, whose
Python workers are forked from this interpreter (``PYSPARK_PYTHON``, set when the session starts) and
see the driver's disk. A cluster's executors may lack odfproj or the files, and a Spark Connect
server's workers run the server's Python, so there the driver does the work as before
(:func:`describes_in_tasks`). Small batches keep the driver too: a worker's start and imports cost
more than a file of a few MB takes to hash.

The job's rows are JSON specs, one per file, taken apart by :func:`_join_and_describe` in the task; its
answers are the descriptions' fields, rebuilt in the driver by :func:`_described`. Only the DataFrame
API is used (``mapInArrow``), no RDD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.cell_files import join_pieces
from odfproj.errors import EngineError
from odfproj.odf.multiformats import Multihash
from odfproj.storage.objects import DescribedDataFile, describe_data_file

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MIN_TASK_BYTES", "CellFile", "describe_cells_in_tasks", "describes_in_tasks"]

#: Below this many bytes of data files the driver describes them: a Python worker's start and its
#: imports (about 0.3 s each) cost more than the hashing they would share out.
MIN_TASK_BYTES = 64 << 20

_RESULT = pa.schema(
    [
        ("path", pa.string()),
        ("physical", pa.string()),
        ("logical", pa.string()),
        ("size", pa.int64()),
        ("records", pa.int64()),
    ]
)
#: The exception class in front of a Python error's message, as a task's traceback ends with it.
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): ")
_RESULT_DDL = "path string, physical string, logical string, size long, records long"


@dataclass(frozen=True)
class CellFile:
    """A data file to be: ``out`` made from ``pieces`` (in offset order; ``(out,)`` alone: it is whole)."""

    pieces: tuple[Path, ...]
    out: Path
    #: pyarrow's name of the codec to join with; only a file of several pieces needs one.
    codec: str | None

    def spec(self) -> str:
        return json.dumps(
            {"pieces": [str(p) for p in self.pieces], "out": str(self.out), "codec": self.codec}
        )


def describes_in_tasks(session: SparkSession, files: Sequence[CellFile]) -> bool:
    """Whether ``files`` are worth a Spark job of their own and the session's tasks can do it (see above)."""
    from odfproj.engine.session import is_connect_session

    if len(files) < 2 or is_connect_session(session):
        return False
    if sum(p.stat().st_size for f in files for p in f.pieces) < MIN_TASK_BYTES:
        return False
    context = session.sparkContext
    return str(context.master).strip().startswith("local") and context.defaultParallelism >= 2


def describe_cells_in_tasks(session: SparkSession, files: Sequence[CellFile]) -> list[DescribedDataFile]:
    """Make and describe every file of ``files`` in a Spark job of one task per file; in ``files``' order.

    A task that fails (a piece that is no Parquet, a full disk) fails the job, and the error names the
    file; nothing of the batch is committed, and the caller removes the folder.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    specs = F.array(*[F.lit(f.spec()) for f in files])
    jobs = session.range(0, len(files), 1, len(files)).select(
        F.element_at(specs, (F.col("id") + 1).cast("int")).alias("spec")
    )
    try:
        rows = jobs.mapInArrow(_join_and_describe, _RESULT_DDL).collect()
    except (Py4JJavaError, PySparkException) as e:
        raise EngineError(
            f"describing the batch's data files in Spark tasks failed: {_last_line(e)}"
        ) from None
    found = {row["path"]: _described(row) for row in rows}
    missing = [str(f.out) for f in files if str(f.out) not in found]
    if missing:
        raise EngineError(f"Spark's tasks did not describe {missing[0]}; nothing was committed")
    return [found[str(f.out)] for f in files]


def _join_and_describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a Spark task: join each spec's pieces into its file (when there are several), then describe it."""
    rows = []
    for batch in batches:
        for text in batch.column("spec").to_pylist():
            spec = json.loads(text)
            out = Path(spec["out"])
            if len(spec["pieces"]) > 1:
                join_pieces([Path(p) for p in spec["pieces"]], out, spec["codec"])
            described = describe_data_file(out)
            rows.append(
                {
                    "path": str(out),
                    "physical": described.physical_hash.to_multibase(),
                    "logical": described.logical_hash.to_multibase(),
                    "size": described.size,
                    "records": described.records,
                }
            )
    yield pa.RecordBatch.from_pylist(rows, schema=_RESULT)


def _described(row: object) -> DescribedDataFile:
    return DescribedDataFile(
        Path(row["path"]),  # type: ignore[index]
        Multihash.from_multibase(row["physical"]),  # type: ignore[index]
        Multihash.from_multibase(row["logical"]),  # type: ignore[index]
        int(row["size"]),  # type: ignore[index]
        int(row["records"]),  # type: ignore[index]
    )


def _last_line(error: BaseException) -> str:
    """The message of the Python error a task raised (the last such line of Spark's report, its exception
    class dropped), else the report's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    python = [line for line in lines if "Error: " in line and not line.startswith(("at ", "org.", "py4j"))]
    if not python:
        return (lines[0] if lines else type(error).__name__)[:300]
    return _RAISED.sub("", python[-1])[:300]
