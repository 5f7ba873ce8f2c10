"""The live progress view of ``odfproj run`` on a terminal: a counter, clocks, the Spark start."""

from __future__ import annotations

from rich.console import Console

from odfproj.cli.run import FIRST_INTERRUPT, _LiveView
from odfproj.run.run import DatasetRun, RunEvent, Status, Work


def _render(view: _LiveView) -> str:
    console = Console(record=True, width=200, force_terminal=False)
    console.print(view)
    return console.export_text()


def test_live_view_counts_shows_clocks_and_the_spark_start() -> None:
    view = _LiveView()
    names = ["a.root", "b.root", "c.view"]
    for name in names:
        view.update(RunEvent(name, "queued", Work.NONE))
    assert "0 of 3 done, 0 running" in _render(view)
    view.update(RunEvent("a.root", "start", Work.INGEST))
    view.update(RunEvent("a.root", "spark", Work.INGEST))
    text = _render(view)
    assert "0 of 3 done, 1 running" in text
    row = next(line for line in text.splitlines() if line.startswith("a.root"))
    assert "starting Spark (ingest)" in row and row.rstrip().endswith("s")  # its clock runs
    done = DatasetRun("a.root", Work.INGEST, Status.SUCCESS, records_added=2, seconds=1.0)
    view.update(RunEvent("a.root", "finish", Work.INGEST, done))
    view.update(RunEvent("b.root", "start", Work.INGEST))
    text = _render(view)
    assert "1 of 3 done, 1 running" in text and "2 record(s)" in text
    assert next(line for line in text.splitlines() if line.startswith("c.view")).split()[1] == "queued"
    view.interrupt(FIRST_INTERRUPT)
    assert "press Ctrl-C again to stop at once" in _render(view)
