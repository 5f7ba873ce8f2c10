"""Ctrl-C through a real SIGINT to a real ``odfproj run``: a clean stop, then a stop at once.

The signal is timed by the run's own output (one line per event off a terminal): it is sent once a
dataset has started, while others are still queued, and never after a blind sleep. What follows the
interrupted process (``verify``, the next ``run``) only reads the workspace it left on disk, so it runs
in-process on the shared Spark session (tests/cli_inprocess.py) rather than starting another JVM.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from odfproj.run.run import RUN_RESULTS_FILE
from tests.cli_inprocess import cli_in
from tests.run.test_run import ROOT

pytestmark = pytest.mark.spark

#: Enough roots that, after the second has started, several are still waiting.
ROOTS = 8


def _project(root: Path) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: interrupts\n")
    for i in range(ROOTS):
        name = f"city.r{i}"
        (root / "datasets" / f"{name}.yaml").write_text(ROOT.format(name=name))
        (root / "data" / name).mkdir(parents=True)
        (root / "data" / name / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    return root


class _Run:
    """``odfproj run`` as a child process whose stdout and stderr lines arrive on queues."""

    def __init__(
        self,
        root: Path,
        args: tuple[str, ...] = ("run", "--no-validate-queries"),
        env: dict[str, str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odfproj", *args],
            cwd=root,
            env=_env(root) if env is None else env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._lines: queue.SimpleQueue[tuple[str, str | None]] = queue.SimpleQueue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=("out", self.proc.stdout), daemon=True),
            threading.Thread(target=self._read, args=("err", self.proc.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: str, pipe: IO[bytes]) -> None:
        for raw in iter(pipe.readline, b""):
            self._lines.put((stream, raw.decode()))
        self._lines.put((stream, None))

    def wait_for(self, stream: str, text: str, timeout: float = 240) -> str:
        """Collect output until a line of ``stream`` contains ``text``; fail if the run ends first."""
        ended = set()
        while True:
            which, line = self._lines.get(timeout=timeout)
            if line is None:
                ended.add(which)
                if which == stream:
                    self.proc.kill()
                    pytest.fail(f"no {text!r} in {stream}:\n{''.join(self.out)}\n{''.join(self.err)}")
                continue
            (self.out if which == "out" else self.err).append(line)
            if which == stream and text in line:
                return line

    def finish(self, timeout: float = 240) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        while not self._lines.empty():
            which, line = self._lines.get()
            if line is not None:
                (self.out if which == "out" else self.err).append(line)
        return code

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)


def _env(root: Path) -> dict[str, str]:
    """A private TMPDIR: the machine's /tmp is shared with other test runs that may clean it."""
    scratch = root.parent / "tmp"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "COLUMNS": "200", "TMPDIR": str(scratch)}


def _verify_clean(odfproj: Callable[..., tuple[int, str]]) -> None:
    code, output = odfproj("verify", "--integrity")
    assert code == 0, output


def _results(root: Path) -> dict[str, dict]:
    saved = json.loads((root / ".odf" / RUN_RESULTS_FILE).read_text())
    assert saved["interrupted"] is True
    assert saved["metadata"]["target"] == "dev"  # the default target, named
    return {r["unique_id"]: r for r in saved["results"]}


def test_first_ctrl_c_finishes_the_dataset_in_progress_and_cancels_the_rest(spark, monkeypatch, tmp_path):
    root = _project(tmp_path / "proj")
    (root / ".odf").mkdir()
    (root / ".odf" / RUN_RESULTS_FILE).write_text('{"stale": true}\n')  # a previous run's results
    run = _Run(root)
    run.wait_for("out", "START city.r1 ")  # the second dataset is in progress, the rest queued
    run.interrupt()
    code = run.finish()
    out, err = "".join(run.out), "".join(run.err)
    assert code == 130, out + err
    assert "Traceback" not in out + err
    assert "interrupted: finishing the datasets in progress" in err
    assert "Run interrupted after" in out and "cancelled" in out
    results = _results(root)
    assert len(results) == ROOTS
    assert results["city.r0"]["status"] == "success", results["city.r0"]["message"]
    assert results["city.r1"]["status"] == "success", results["city.r1"]  # in flight: let finish
    cancelled = [n for n, r in results.items() if r["status"] == "cancelled"]
    assert cancelled and all(results[n]["message"].startswith("not started") for n in cancelled)
    for name in cancelled:  # each cancelled dataset is named with its reason in the summary
        assert f"cancelled {name}: not started" in out
    odfproj = cli_in(spark, monkeypatch, lambda: root)
    _verify_clean(odfproj)
    code, again = odfproj("run")
    assert code == 0, again
    assert "Run complete" in again


def test_second_ctrl_c_stops_at_once_and_leaves_the_workspace_valid(spark, monkeypatch, tmp_path):
    root = _project(tmp_path / "proj")
    run = _Run(root)
    run.wait_for("out", "START city.r1 ")
    run.interrupt()
    run.wait_for("err", "press Ctrl-C again")  # the first was handled: the next one is a second
    run.interrupt()
    code = run.finish()
    out, err = "".join(run.out), "".join(run.err)
    assert code == 130, out + err
    assert "Traceback" not in out + err
    assert err.rstrip().endswith("interrupted")
    assert "Run complete" not in out
    results = _results(root)
    assert len(results) == ROOTS
    assert any(r["status"] == "cancelled" for r in results.values())
    assert results["city.r0"]["status"] == "success", results["city.r0"]["message"]
    _verify_clean(cli_in(spark, monkeypatch, lambda: root))


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _wait_until(condition, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.1)


def test_ctrl_c_while_the_jvm_starts_says_interrupted_and_leaves_no_jvm(tmp_path):
    """`sql` starts the JVM on the main thread: the press is held until the launch returned."""
    root = _project(tmp_path / "proj")
    proc = subprocess.Popen(
        [sys.executable, "-m", "odfproj", "sql", "SELECT 1 AS one"],
        cwd=root,
        env=_env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_until(lambda: _children(proc.pid) or proc.poll() is not None, "the JVM to be launched")
    jvm = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=240)
    text = out.decode() + err.decode()
    assert proc.returncode == 130, text
    assert jvm, "the JVM was launched before the interrupt"
    assert "Traceback" not in text and "Java" not in text and "py4j" not in text.lower(), text
    assert err.decode().rstrip().endswith("interrupted"), text
    _wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in jvm), "the JVM to exit")
