"""Write the analysed plans of tests/transform/mode_cases.py to tests/transform/fixtures/query_plans.json.

The JVM-free tests of ``odfproj.transform.modes`` classify these captured plans; the Spark tests
classify the same queries live, so a Spark upgrade that changes the plans' JSON shows up there.

    .venv/bin/python tools/capture_query_plans.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from odfproj.engine.session import SparkSessionHolder, SparkSettings  # noqa: E402
from odfproj.engine.spark import SparkEngine, analysed_plan_json  # noqa: E402
from odfproj.engine.types import spark_schema_from_arrow  # noqa: E402
from odfproj.odf import model  # noqa: E402
from tests.transform.mode_cases import CASES  # noqa: E402

INPUT = pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("k", pa.string()), ("v", pa.int64())])
OUT = ROOT / "tests" / "transform" / "fixtures" / "query_plans.json"


def transform_of(steps: tuple[tuple[str | None, str], ...]) -> model.TransformSql:
    return model.TransformSql(
        engine="spark", queries=tuple(model.SqlQueryStep(query=q, alias=a) for a, q in steps)
    )


def main() -> None:
    engine = SparkEngine(
        SparkSessionHolder(SparkSettings(master="local[1]", app_name="capture-plans", conf={}))
    )
    plans = {}
    for name, steps, _expected in CASES:
        with engine.scope() as scope:
            for alias in ("a", "b"):
                scope.register(alias, scope.session.createDataFrame([], spark_schema_from_arrow(INPUT)))
            plan = analysed_plan_json(scope.run(transform_of(steps)))
        assert plan is not None, name
        plans[name] = json.loads(plan)
    OUT.write_text(json.dumps(plans, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(plans)} plans, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
