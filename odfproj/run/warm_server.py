"""The warm engine's server process: ``python -m odfproj.run.warm_server serve DIR IDLE``.

The entry point is the lowest layer that knows every request the server answers: the plan's checks
and ``sql`` (:mod:`odfproj.plan.served_checks`), ``diff`` (:mod:`odfproj.run.data_diff`) and ``run`` (:mod:`odfproj.run.warm_run`). The
server itself (its JVM, socket, idle stop) is :mod:`odfproj.engine.warm.server`'s.
"""

from __future__ import annotations

import os
import sys

from odfproj.engine.warm.server import serve_main
from odfproj.plan import served_checks
from odfproj.project.config import WORKSPACE_ENV
from odfproj.run import data_diff
from odfproj.run.warm_run import streams

__all__ = ["ENTRY", "main"]

#: The module the warm server runs (``WarmEngine(entry=ENTRY)``).
ENTRY = "odfproj.run.warm_server"


def main(argv: list[str]) -> int:
    # The server's own environment is the command's that started it: a run must never see its workspace.
    os.environ.pop(WORKSPACE_ENV, None)
    handlers = {**served_checks.handlers(), **data_diff.handlers()}
    return serve_main(argv, handlers, served_checks.warm_up, streams())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
