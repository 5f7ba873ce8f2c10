"""``python -m odfproj`` runs the CLI, so tests and CI never depend on PATH."""

from odfproj.cli.start import main

main()
