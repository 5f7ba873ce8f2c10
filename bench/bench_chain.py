"""Long histories: every command of issue 36 point 4 on a root with 100, 1,000 and 10,000 blocks.

Two parts (``--part verify,commands``, both by default).

**verify**: ``verify --integrity`` on a root with 100, 1,000 and 10,000 blocks.

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

**commands**: a project whose root ``hourly`` has a push source (CSV, a Ledger keyed by ``id``) and
whose derivative ``doubled`` reads it. One real ``odfproj ingest`` makes the root's definitions and
data schema; the rest of its blocks (one one-record file each) are appended through the storage API,
as above; one ``odfproj run`` brings the derivative up to date. Then each command runs as ``odfproj``
itself in a fresh process, timed from the outside (start-up included), first with
``ODFPROJ_WARM_ENGINE=off``, then warm (a warm engine of the benchmark's own, ``ODFPROJ_ENGINE_DIR``,
stopped at the end): ``plan``, a no-op ``run``, ``ingest`` of one more block, ``query`` (the current
state), ``query --as-at`` the system time of the middle block, ``log`` and ``show``. Before each
mode an untimed ``ingest`` and ``run`` bring the project to the state of a dataset ingested hourly (the
merge of the ingest before brought any derived copy current, the derivative took in what was
ingested) and start the warm engine. ``--reuse`` times projects already in ``--keep DIR`` (copies of
one build, say, timed once with ``--source`` an older checkout and once with this one).

Usage: ``.venv/bin/python bench/bench_chain.py [--sizes 100,1000,10000] [--part verify,commands]
[--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
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


def append_hours(workspace_root: Path, scratch: Path, count: int, name: str = NAME) -> None:
    """Append ``count`` hourly AddData blocks, ``BATCH`` per transaction, one one-record file each.

    The records follow the dataset's own data schema: ``offset``, ``op``, ``system_time``,
    ``event_time`` and then integer columns, each the offset times its position (a new key per block).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from odfproj.odf import model
    from odfproj.storage.objects import describe_data_file
    from odfproj.storage.workspace import Workspace

    dataset = Workspace(workspace_root).open(name)
    schema = dataset.projection().arrow_schema
    assert schema is not None, "the dataset has no data schema"
    scratch.mkdir(parents=True, exist_ok=True)
    left = count
    while left:
        p = dataset.projection()
        offset = 0 if p.last_offset is None else p.last_offset + 1
        events, files = [], []
        for _ in range(min(BATCH, left)):
            hour = T0 + timedelta(hours=offset)
            path = scratch / f"{offset}.parquet"
            system = {"offset": offset, "op": 0, "system_time": hour, "event_time": hour}
            columns = [[system.get(f.name, offset * i)] for i, f in enumerate(schema)]
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
                    new_watermark=hour if p.watermark is not None or p.last_offset is None else None,
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


#: ``odfproj`` as this interpreter runs it; ``--source DIR`` puts another checkout first on its path.
ODFPROJ = (sys.executable, "-m", "odfproj")
ROOT, DERIVATIVE = "hourly", "doubled"
ROOT_MANIFEST = f"""kind: DatasetSnapshot
version: 1
content:
  name: {ROOT}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: readings
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - event_time TIMESTAMP
          - value BIGINT
      merge:
        kind: Ledger
        primaryKey: [id]
"""
DERIVATIVE_MANIFEST = f"""kind: DatasetSnapshot
version: 1
content:
  name: {DERIVATIVE}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {ROOT}
      transform:
        kind: Sql
        engine: spark
        query: SELECT event_time, id, value * 2 AS doubled FROM {ROOT}
"""
#: The commands of issue 36 point 4, in the order they run (``ingest`` adds a block to the root).
COMMANDS = ("plan", "run (no-op)", "ingest 1 block", "query", "query --as-at", "log", "show")


def _odfproj(project: Path, env: dict[str, str], *args: str) -> float:
    """``odfproj ARGS`` in ``project``, in a process of its own; its wall-clock seconds."""
    started = time.perf_counter()
    done = subprocess.run([*ODFPROJ, *args], cwd=project, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"odfproj {' '.join(args)} failed in {project}:\n{done.stdout}{done.stderr}")
    return seconds


def _environment(warm: bool, engine_dir: Path, source: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if source is not None:  # e.g. a worktree of an older commit, for "before" figures
        env["PYTHONPATH"] = str(source)
    env["ODFPROJ_WARM_ENGINE"] = "on" if warm else "off"
    env["ODFPROJ_ENGINE_DIR"] = str(engine_dir)
    return env


def build_project(project: Path, blocks: int, env: dict[str, str]) -> float:
    """The project with a root of ``blocks`` blocks and its derivative up to date; the seconds it took."""
    started = time.perf_counter()
    (project / "datasets").mkdir(parents=True)
    (project / "odfproj.yaml").write_text(
        "name: chain\nmanifests: [datasets/*.yaml]\nworkspace: .odf\n"
        "targets:\n  dev:\n    spark_master: local[2]\n    spark_conf:\n      spark.sql.shuffle.partitions: '2'\n"
    )
    (project / "datasets" / f"{ROOT}.yaml").write_text(ROOT_MANIFEST)
    (project / "datasets" / f"{DERIVATIVE}.yaml").write_text(DERIVATIVE_MANIFEST)
    (project / "first.csv").write_text(f"id,event_time,value\n-1,{T0:%Y-%m-%d %H:%M:%S},0\n")
    _odfproj(project, env, "ingest", ROOT, "first.csv")
    from odfproj.storage.workspace import Workspace

    have = Workspace(project / ".odf").open(ROOT).projection().block_count
    append_hours(project / ".odf", project / "scratch", blocks - have, ROOT)
    _odfproj(project, env, "run")
    return time.perf_counter() - started


def _middle_time(project: Path) -> str:
    """The system time of the root's middle block, as ``--as-at`` takes it."""
    from odfproj.odf.timestamps import format_rfc3339
    from odfproj.storage.workspace import Workspace

    dataset = Workspace(project / ".odf").open(ROOT)
    middle = dataset.projection().sequence_number // 2
    for _, block in dataset.iter_blocks():
        if block.sequence_number == middle:
            return format_rfc3339(block.system_time)
    raise AssertionError("no middle block")


def time_commands(project: Path, env: dict[str, str], new_id: int) -> dict[str, float]:
    """Each command of :data:`COMMANDS` once, in a process of its own; seconds by command."""
    # Untimed, the state an hourly dataset is in: an ingest before (its merge brought the compacted
    # copy current) and a run that took in what was ingested (and starts the warm engine).
    (project / "new.csv").write_text(f"id,event_time,value\n{new_id},2030-01-01 00:00:00,1\n")
    _odfproj(project, env, "ingest", ROOT, "new.csv")
    _odfproj(project, env, "run")
    (project / "new.csv").write_text(f"id,event_time,value\n{new_id + 1},2030-01-01 01:00:00,1\n")
    middle = _middle_time(project)
    args = {
        "plan": ("plan",),
        "run (no-op)": ("run",),
        "ingest 1 block": ("ingest", ROOT, "new.csv"),
        "query": ("query", ROOT),
        "query --as-at": ("query", ROOT, "--as-at", middle),
        "log": ("log", ROOT),
        "show": ("show", ROOT),
    }
    return {name: _odfproj(project, env, *args[name]) for name in COMMANDS}


def commands_part(folder: Path, sizes: list[int], source: Path | None, reuse: bool) -> None:
    """Build a project per size, then time :data:`COMMANDS` cold and warm; prints one table.

    ``source``: the odfproj checkout the commands run (default: this one); the chains are built
    with this one's storage API either way. ``reuse``: a project already in ``folder`` is timed as it
    is (e.g. a copy of one another run built), not built again.
    """
    engine_dir = folder / "engine"
    figures: dict[tuple[int, str], dict[str, float]] = {}
    try:
        for size in sizes:
            project = folder / f"project-{size}"
            if not (reuse and project.exists()):
                shutil.rmtree(project, ignore_errors=True)
                built = build_project(project, size, _environment(False, engine_dir, source))
                print(f"built {size:,} blocks in {built:.0f} s", file=sys.stderr, flush=True)
            for n, mode in enumerate(("cold", "warm")):
                env = _environment(mode == "warm", engine_dir, source)
                figures[size, mode] = time_commands(project, env, 10**9 + 10 * n)
                print(size, mode, json.dumps(figures[size, mode]), file=sys.stderr, flush=True)
    finally:
        stop = _environment(True, engine_dir, source)
        subprocess.run([*ODFPROJ, "engine", "stop"], env=stop, capture_output=True, check=False)
    print(
        "| command | mode | "
        + " | ".join(f"{s:,} blocks s" for s in sizes)
        + f" | {sizes[-1]:,} / {sizes[0]:,} |"
    )
    print("| --- | --- |" + " ---: |" * (len(sizes) + 1))
    for name in COMMANDS:
        for mode in ("cold", "warm"):
            row = [figures[s, mode][name] for s in sizes]
            print(
                f"| `{name}` | {mode} | "
                + " | ".join(f"{v:.2f}" for v in row)
                + f" | {row[-1] / row[0]:.2f} |"
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
    parser.add_argument(
        "--part", default="verify,commands", help="verify, commands, or both (comma-separated)"
    )
    parser.add_argument(
        "--source", type=Path, help="run the commands of this odfproj checkout (e.g. a worktree)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="time the projects already in --keep DIR as they are"
    )
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
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        if "verify" in args.part.split(","):
            verify_part(folder, sizes)
        if "commands" in args.part.split(","):
            commands_part(folder, sizes, args.source, args.reuse)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def verify_part(folder: Path, sizes: list[int]) -> None:
    """``verify --integrity`` four ways per size; prints one table."""
    print("| blocks | build s | check | blocks checked | seconds | RSS after imports MiB | peak RSS MiB |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for size in sizes:
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


if __name__ == "__main__":
    main()
