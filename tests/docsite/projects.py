"""Small projects for the docs-site tests, written into a temporary folder."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import BASE_TIME, Writer, schema_with, set_schema

#: A description that would run script if any manifest string reached the page unescaped.
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'

ORDERS = "com.example.orders"
DAILY = "com.example.orders.daily"
REGIONS = "com.example.regions"

_CONFIG = """name: shop
manifests:
  - datasets/*.yaml
workspace: .odf
"""

_ORDERS = f"""kind: DatasetSnapshot
version: 1
content:
  name: {ORDERS}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.invalid/orders.csv
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - region STRING
          - amount DOUBLE
          - placed TIMESTAMP
      preprocess:
        kind: Sql
        engine: datafusion
        query: SELECT id, region, amount, placed AS event_time, strpos(region, 'e') AS e_at FROM input
      merge:
        kind: Ledger
        primaryKey:
          - id
    - kind: SetInfo
      description: '{HOSTILE}'
      keywords:
        - sales
        - "<b>bold</b>"
    - kind: SetLicense
      shortName: CC-BY-4.0
      name: Creative Commons Attribution 4.0
      websiteUrl: https://creativecommons.org/licenses/by/4.0/
      spdxId: CC-BY-4.0
"""

_REGIONS = f"""kind: DatasetSnapshot
version: 1
content:
  name: {REGIONS}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.invalid/regions.csv
      read:
        kind: Csv
        header: true
        schema:
          - region STRING
          - country STRING
      merge:
        kind: Snapshot
        primaryKey:
          - region
    - kind: SetInfo
      description: Sales regions and their country (a lookup table).
      keywords:
        - geography
"""

_DAILY = f"""kind: DatasetSnapshot
version: 1
content:
  name: {DAILY}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {ORDERS}
          alias: orders
        - datasetRef: {REGIONS}
      transform:
        kind: Sql
        engine: spark
        query: |
          SELECT date_trunc('DAY', o.event_time) AS event_time, r.country, sum(o.amount) AS revenue
          FROM orders o JOIN `{REGIONS}` r ON o.region = r.region
          GROUP BY 1, 2
    - kind: SetInfo
      description: Revenue per day and country.
      keywords:
        - sales
        - daily
"""


def write_shop(root: Path) -> Path:
    """A three-dataset project (two roots, one derivative reading both) that has never run."""
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text(_CONFIG)
    (root / "datasets" / "orders.yaml").write_text(_ORDERS)
    (root / "datasets" / "regions.yaml").write_text(_REGIONS)
    (root / "datasets" / "daily.yaml").write_text(_DAILY)
    return root


def add_orders_data(project: Path, scratch: Path) -> None:
    """Give the project's workspace an orders chain with two data blocks (written without Spark)."""
    orders = Workspace(project / ".odf").create(ORDERS, model.DatasetKind.Root)
    source = model.SetPollingSource(
        fetch=model.FetchStepUrl(url="https://example.invalid/orders.csv"),
        read=model.ReadStepCsv(header=True),
        merge=model.MergeStrategyLedger(primary_key=("id",)),
    )
    orders.append([source, set_schema(schema_with(("id", pa.int64()), ("region", pa.string())))])
    writer = Writer(orders, scratch)
    writer.add_data(3, watermark=BASE_TIME)
    writer.add_data(2, watermark=BASE_TIME + timedelta(days=1))
