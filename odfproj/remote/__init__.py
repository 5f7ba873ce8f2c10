"""Datasets away from this machine: object stores, ODF repositories, and the sync between them.

This layer sits right after :mod:`odfproj.storage`: it reads and writes the same reference layout
(``refs/head``, ``blocks/``, ``data/``, ``checkpoints/``) on a folder, an S3 bucket or an HTTP server,
and moves only what the other side lacks.
"""
