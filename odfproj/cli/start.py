"""The ``odfproj`` command's entry point: load the CLI with the garbage collector paused, then run it.

Loading the CLI creates objects (typer, rich, the command table) that live as long as the process and
form almost no garbage. The cyclic collector would still run full collections over them while they are
created, and every later full collection would walk them again. ``gc.freeze`` moves them out of the
collector's sight; objects created afterwards are collected as usual. When every command module was
imported at start, with the layers below, this was about 110,000 objects and 0.1 s of CPU in every
command's start (a no-op ``odfproj run`` spent 0.74 s importing, 0.63 s with this; bench/README.md,
"50-dataset DAG run"). Commands now load when they run (``cli/lazy.py``): the CLI itself is about
22,000 objects, and a command imports the layers it uses when it runs, with the collector on.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from odfproj.cli.main import main as run_command
    finally:
        gc.freeze()
        gc.enable()
    run_command()
