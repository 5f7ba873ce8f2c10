"""Reading and writing a chain in the ODF 0.35 form (manifest version 2) and the 0.39 form (version 3).

Builds one chain per form in a temporary workspace (a Seed, a SetDataSchema, then ``--blocks`` data-less
AddData blocks with rising watermarks), then times, best of ``--repeat``, in the same run:

- decoding every stored block (``decode_block``);
- rebuilding the chain's projection from its blocks (the cache removed first);
- appending one block (which reads the head block's manifest version first);
- the SetDataSchema's Arrow schema: stored bytes (0.35) or the ODF schema converted (0.39).

Usage: ``.venv/bin/python bench/bench_odf_versions.py [--blocks 2000] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import decode_block
from odfproj.odf.odf_schema import arrow_schema_bytes, set_data_schema
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("event_time", pa.timestamp("ms", tz="UTC")),
        *(pa.field(f"c{i}", pa.float64() if i % 2 else pa.string()) for i in range(16)),
    ]
)


def build(root: Path, odf_version: str, blocks: int) -> Dataset:
    ws = Workspace(root, odf_version=odf_version)
    schema_event = set_data_schema(SCHEMA, odf_schema=odf_version == "0.39")
    dataset = ws.create("bench", model.DatasetKind.Root, events=[schema_event], system_time=T0)
    batch = 500
    for start in range(0, blocks, batch):
        events = [model.AddData(new_watermark=T0 + timedelta(minutes=i)) for i in range(start, start + batch)]
        dataset.append(events, system_time=T0 + timedelta(days=1))
    return dataset


def best(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(dataset: Dataset, repeat: int) -> dict[str, float]:
    stored = [p.read_bytes() for p in dataset.layout.blocks_dir.iterdir()]

    def rebuild() -> None:
        dataset.layout.projection_cache.unlink(missing_ok=True)
        fresh = Dataset(dataset.name, dataset.path)
        fresh.projection()

    appended = [0]

    def append_one() -> None:
        appended[0] += 1
        dataset.append([model.SetInfo(description=f"n{appended[0]}")], system_time=T0 + timedelta(days=2))

    event = next(
        d.event for d in dataset.projection().definition_events if isinstance(d.event, model.SetDataSchema)
    )
    return {
        "decode all blocks": best(repeat, lambda: [decode_block(b) for b in stored]),
        "rebuild projection": best(repeat, rebuild),
        "append one block": best(repeat, append_one),
        "SetDataSchema -> Arrow (x1000)": best(
            repeat, lambda: [arrow_schema_bytes(event) for _ in range(1000)]
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odfproj-bench-versions-") as tmp:
        results = {v: measure(build(Path(tmp) / v, v, args.blocks), args.repeat) for v in ("0.35", "0.39")}
    print(f"{args.blocks + 2} blocks per chain, best of {args.repeat}")
    print(f"{'':34} {'0.35 (v2)':>12} {'0.39 (v3)':>12} {'ratio':>7}")
    for what in results["0.35"]:
        old, new = results["0.35"][what], results["0.39"][what]
        print(f"{what:34} {old * 1000:10.1f}ms {new * 1000:10.1f}ms {new / old:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
