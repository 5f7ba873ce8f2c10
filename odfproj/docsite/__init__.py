"""The docs site (``odfproj docs build/serve``): a static, self-contained HTML page documenting a project.

:mod:`.collect` gathers one :class:`~.model.Site` value from manifests, chains and the last run;
:mod:`.layout` places the lineage graph; :mod:`.html` writes it as one page that opens from
``file://`` with nothing fetched at runtime; :mod:`.serve` serves the folder on 127.0.0.1.
"""
