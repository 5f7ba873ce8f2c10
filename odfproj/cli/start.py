"""The ``odfproj`` command's entry point: load the CLI with the garbage collector paused, then run it.

Loading the CLI creates about 110,000 objects (typer, rich, sqlglot, pyarrow, the ODF model) that
live as long as the process and form almost no garbage. The cyclic collector would still run full
collections over them while they are created, and every later full collection would walk them
again: about 0.1 s of CPU in every command's start (a no-op ``odfproj run`` spent 0.74 s importing,
0.63 s with this; bench/README.md, "50-dataset DAG run"). ``gc.freeze`` moves them out of the
collector's sight; objects created afterwards are collected as usual.
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
