"""Benchmark: what Sedona's GIS functions cost a session, and when it is paid (issue 34).

Each round starts a fresh Python process with odfproj's local session (``local[2]``, as the tests) and
times, in it:

1. **start**: the session's creation (the JVM's start): Sedona is never on the class path at start;
2. **first query**: a first plain query (``SELECT sum(id) FROM range(1000)``), through ``SparkEngine``;
3. **load**: :func:`odfproj.engine.gis.ensure_gis`: the jars added to the running JVM, the allowed
   functions registered; what the first query naming an ``ST_`` function pays, once per JVM;
4. **first GIS query**: ``ST_AsText(ST_Transform(ST_Point(...)))`` (the first reprojection also opens
   the EPSG database), then **second GIS query**: the same over other numbers.

A project whose queries name no GIS function pays 1 and 2 only. The jars must be in the cache
(``./dev`` or ``python -m odfproj.engine.packages fetch sedona``). Figures are printed as JSON per
round and as medians.

Usage (run by hand; not a test):

    .venv/bin/python bench/bench_gis.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ROUND = r"""
import json, time
t0 = time.perf_counter()
from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.engine import gis
from odfproj.odf import model
holder = SparkSessionHolder(SparkSettings(master="local[2]"))
engine = SparkEngine(holder)
session = holder.get()
t1 = time.perf_counter()
def sql(q):
    return engine.query({}, model.TransformSql(engine="spark", query=q)).collect()
sql("SELECT sum(id) AS s FROM range(1000)")
t2 = time.perf_counter()
gis.ensure_gis(session)
t3 = time.perf_counter()
sql("SELECT ST_AsText(ST_Transform(ST_Point(500000.0, 5458000.0), 'epsg:3157', 'epsg:4326')) AS t")
t4 = time.perf_counter()
sql("SELECT ST_AsText(ST_Transform(ST_Point(491000.0, 5459000.0), 'epsg:3157', 'epsg:4326')) AS t")
t5 = time.perf_counter()
holder.stop()
print(json.dumps({"start": t1 - t0, "first query": t2 - t1, "load": t3 - t2,
                  "first GIS query": t4 - t3, "second GIS query": t5 - t4}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", ROUND], capture_output=True, text=True, check=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        figures["process"] = time.perf_counter() - started
        rounds.append(figures)
        print(json.dumps({k: round(v, 2) for k, v in figures.items()}))
    print("median:", json.dumps({k: round(statistics.median(r[k] for r in rounds), 2) for k in rounds[0]}))
    with open("/proc/loadavg") as f:
        print("load average:", f.read().strip())


if __name__ == "__main__":
    main()
