"""Long histories: ``verify --integrity`` on a root with 100, 1,000 and 10,000 blocks (issue 36).

Each root is one dataset ingested "hourly": a SetDataSchema, then one AddData block per hour, each
with its own one-record Parquet file and a watermark an hour later than the last. The chains are built
through the storage API (``Dataset.append`` of 200 blocks per transaction, every file described once
with ``describe_data_file``): no Spark, about 3 s per 1,000 blocks.

For each size, four checks run the way ``odfproj verify --integrity [--full]`` runs them
(``run.verify.verify_datasets``, without the command's start-up), each in a fresh process so that
its peak RSS (``getrusage``) is its own (the chains are built and grown in processes of their own
too: a child's ``ru_maxrss`` starts at its parent's):

* ``first``: no record yet, so a full check (which leaves the record);
* ``again``: nothing changed since: the head is read and re-hashed, nothing else;
* ``one new``: one more block appended (by the parent, between the checks): that block, its file;
* ``--full``: everything again.

Usage: ``.venv/bin/python bench/bench_chain.py [--sizes 100,1000,10000] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
NAME = "hourly"
BATCH = 200
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _schema() -> pa.Schema:
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    return pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", ts, nullable=False),
            pa.field("event_time", ts),
            pa.field("value", pa.int64()),
        ]
    )


def append_hours(workspace_root: Path, scratch: Path, count: int) -> None:
    """Append ``count`` hourly AddData blocks, ``BATCH`` per transaction, one one-record file each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from odfproj.odf import model
    from odfproj.storage.objects import describe_data_file
    from odfproj.storage.workspace import Workspace

    schema = _schema()
    dataset = Workspace(workspace_root).open(NAME)
    scratch.mkdir(parents=True, exist_ok=True)
    left = count
    while left:
        p = dataset.projection()
        offset = 0 if p.last_offset is None else p.last_offset + 1
        events, files = [], []
        for _ in range(min(BATCH, left)):
            hour = T0 + timedelta(hours=offset)
            path = scratch / f"{offset}.parquet"
            columns = [[offset], [0], [hour], [hour], [offset * 7]]
            pq.write_table(pa.table(columns, schema=schema), path)
            described = describe_data_file(path)
            events.append(
                model.AddData(
                    prev_offset=offset - 1 if offset else None,
                    new_data=model.DataSlice(
                        logical_hash=described.logical_hash,
                        physical_hash=described.physical_hash,
                        offset_interval=model.OffsetInterval(start=offset, end=offset),
                        size=described.size,
                    ),
                    new_watermark=hour,
                )
            )
            files.append(described)
            offset += 1
        dataset.append(events, expected_head=p.head, data_files=files)
        for described in files:
            described.path.unlink()
        left -= len(events)


def build(workspace_root: Path, blocks: int) -> float:
    """A workspace holding one root of ``blocks`` blocks; the seconds it took."""
    from odfproj.odf import model
    from odfproj.odf.arrow_schema import encode_arrow_schema
    from odfproj.storage.workspace import Workspace

    started = time.perf_counter()
    dataset = Workspace(workspace_root).create(NAME, model.DatasetKind.Root)
    dataset.append([model.SetDataSchema(schema=encode_arrow_schema(_schema()))])
    append_hours(workspace_root, workspace_root.parent / "scratch", blocks - 2)
    return time.perf_counter() - started


def worker(workspace_root: Path, full: bool) -> None:
    """One ``verify --integrity [--full]`` of the root, as JSON on stdout."""
    from odfproj.run.verify import verify_datasets
    from odfproj.storage.workspace import Workspace

    workspace = Workspace(workspace_root)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    [result] = verify_datasets(workspace, [NAME], integrity=True, full=full)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert not result.problems, result.problems
    print(
        json.dumps(
            {
                "seconds": seconds,
                "blocks": result.blocks,
                "checked": result.checked,
                "full": result.full,
                "base_mib": base / 1024,
                "peak_mib": peak / 1024,
            }
        )
    )


def _run(*args: str) -> str:
    """This script in a fresh process: the parent stays small, since a child's ``ru_maxrss`` starts
    at its parent's (Linux keeps the high-water mark across ``fork`` and ``exec``)."""
    done = subprocess.run([sys.executable, __file__, *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout + done.stderr)
    return done.stdout


def _measure(workspace_root: Path, full: bool) -> dict[str, float]:
    return json.loads(_run("--worker", str(workspace_root), *(["--full"] if full else [])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="chain lengths, comma-separated")
    parser.add_argument("--keep", type=Path, help="build the workspaces here and keep them")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--append", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.full)
        return
    if args.build is not None:
        print(build(Path(args.build[0]), int(args.build[1])))
        return
    if args.append is not None:
        append_hours(args.append, args.append.parent / "scratch", 1)
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-chain-"))
    print("| blocks | build s | check | blocks checked | seconds | RSS after imports MiB | peak RSS MiB |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            root = folder / f"chain-{size}" / "ws"
            if root.parent.exists():
                shutil.rmtree(root.parent)
            root.parent.mkdir(parents=True)
            built = float(_run("--build", str(root), str(size)))
            rows = [("first (no record: full)", _measure(root, False))]
            rows.append(("again, nothing new", _measure(root, False)))
            _run("--append", str(root))
            rows.append(("one new block", _measure(root, False)))
            rows.append(("--full", _measure(root, True)))
            for label, m in rows:
                print(
                    f"| {size:,} | {built:.1f} | {label} | {int(m['checked']):,} of {int(m['blocks']):,} | "
                    f"{m['seconds']:.3f} | {m['base_mib']:.0f} | {m['peak_mib']:.0f} |",
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
