"""``python -m odfproj`` runs the CLI, so tests and CI never depend on PATH."""

from odfproj.cli.main import main

main()
