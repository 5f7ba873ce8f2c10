"""The log file of one run: every event with its full message, and the warnings the console hides.

Like dbt's ``logs/``, each ``odfproj run`` writes ``<workspace>/logs/run-<UTC time>.log``. The
console shows one line per event or a live table; the file keeps the whole story for later: what
started when, each dataset's full error, the summary, and every warning logged in the process
meanwhile by odfproj, PySpark or py4j (they are silenced on the console unless ``-v``). The
workspace folder is git-ignored by the scaffold, so logs never reach a commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

#: Under the workspace folder.
LOGS_DIR = "logs"

#: Loggers whose warnings go to the run's log file.
_CAPTURED = ("odfproj", "py4j", "pyspark", "py.warnings")

_LOGGER = logging.getLogger("odfproj.run")


def log_path(workspace: Path, started: datetime) -> Path:
    return workspace / LOGS_DIR / f"run-{started.strftime('%Y%m%dT%H%M%S.%fZ')}.log"


@contextmanager
def run_log(path: Path) -> Iterator[logging.Logger]:
    """Log to ``path`` while the block runs: the run's own lines (INFO) and others' warnings.

    Loggers keep their levels for the console; the file handler is added beside whatever is
    there and removed afterwards, so a watch session's runs each get their own file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
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
