"""The log file of one run: every event with its full message, and the warnings the console hides.

Like dbt's ``logs/``, each ``odfproj run`` writes ``<workspace>/logs/run-<UTC time>.log``. The
console shows one line per event or a live table; the file keeps the whole story for later: what
started when, each dataset's full error, the summary, and every warning logged in the process
meanwhile by odfproj, PySpark or py4j (they are silenced on the console unless ``-v``). The
workspace folder is git-ignored by the scaffold, so logs never reach a commit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

#: Under the workspace folder.
LOGS_DIR = "logs"

#: Loggers whose warnings go to the run's log file.
_CAPTURED = ("odfproj", "py4j", "pyspark", "py.warnings")

#: The names of the threads that work for some run start so (``run.run``'s workers, and a warm
#: server's thread running a run): a run's log takes the records of its own only.
RUN_THREADS = "odfproj-run"

_LOGGER = logging.getLogger("odfproj.run")


def log_path(workspace: Path, started: datetime) -> Path:
    return workspace / LOGS_DIR / f"run-{started.strftime('%Y%m%dT%H%M%S.%fZ')}.log"


@contextmanager
def run_log(path: Path, workers: str = RUN_THREADS) -> Iterator[logging.Logger]:
    """Log to ``path`` while the block runs: the run's own lines (INFO) and others' warnings.

    Loggers keep their levels for the console; the file handler is added beside whatever is
    there and removed afterwards, so a watch session's runs each get their own file. Records come
    from this thread, from the run's workers (threads named ``workers...``) and from threads that
    work for no run (Spark's log); never from another run's threads, which a warm server running two
    runs at once has.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    owner = threading.get_ident()

    def ours(record: logging.LogRecord) -> bool:
        name = record.threadName or ""
        return record.thread == owner or name.startswith(workers) or not name.startswith(RUN_THREADS)

    handler.addFilter(ours)
    loggers = [logging.getLogger(name) for name in _CAPTURED]
    previous_run_level = _LOGGER.level
    for logger in loggers:
        logger.addHandler(handler)
    _LOGGER.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        yield _LOGGER
    finally:
        logging.captureWarnings(False)
        _LOGGER.setLevel(previous_run_level)
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()
