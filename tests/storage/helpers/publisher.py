"""Publish an environment once, as ``odfproj publish`` does, for the kill tests.

Usage: ``python -m tests.storage.helpers.publisher PRODUCTION ENVIRONMENT``. Prints ``ready`` just
before publishing starts, so the test's SIGKILL can be timed to land while heads move.
"""

from __future__ import annotations

import sys
from pathlib import Path

from odfproj.storage.publish import publish_environment
from odfproj.storage.workspace import Workspace
from odfproj.workspace_paths import environment_root


def main() -> None:
    production = Workspace(Path(sys.argv[1]))
    environment = Workspace(environment_root(production.root, sys.argv[2]))
    print("ready", flush=True)
    publish_environment(production, environment)
    print("done", flush=True)


if __name__ == "__main__":
    main()
