"""Data tests: declarative checks of a dataset's data, kept in the project (never in the chain).

``definitions`` reads and validates the test files, ``checks`` turns each test into the query (or
metadata look-up) that finds its failing rows, ``execute`` runs them over a workspace's current state
or its state as at a system time. ``odfproj test`` and ``odfproj run`` both go through ``execute``.
"""
