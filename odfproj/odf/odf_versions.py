"""The ODF versions odfproj writes, and the block form each means.

odfproj reads chains of every ODF version from 0.35 to 0.39; it writes one of two forms, chosen by the
workspace setting ``odf_version`` (``odfproj.yaml``) when a dataset is created:

- ``"0.35"`` (default): manifest version 2 blocks (``Timestamp`` placed unaligned, as every block of
  the 0.34/0.35 era), ``SetDataSchema`` with the raw Arrow schema bytes: what kamu up to v0.264 writes
  and what every kamu version reads;
- ``"0.39"``: manifest version 3 blocks (``Timestamp`` aligned, kamu issue #1084) and ``SetDataSchema``
  with the ODF schema, byte for byte what kamu v0.265 and later write.

A chain keeps the form of its Seed: blocks appended later are written in the manifest version of the
chain's head, whatever the setting says now, so no chain mixes forms (``plan`` says when the setting
and a dataset's chain disagree).
"""

from __future__ import annotations

#: ``odf_version`` setting -> manifest version of the blocks written.
BLOCK_VERSION_OF = {"0.35": 2, "0.39": 3}
DEFAULT_ODF_VERSION = "0.35"


def block_version_for(odf_version: str) -> int:
    """The manifest version of the blocks a workspace set to ``odf_version`` writes."""
    return BLOCK_VERSION_OF[odf_version]


def odf_version_of(block_version: int) -> str:
    """The ``odf_version`` setting that writes blocks of ``block_version`` (another version is read only:
    named by its manifest version, e.g. a chain an older tool wrote)."""
    return next(
        (odf for odf, v in BLOCK_VERSION_OF.items() if v == block_version),
        f"manifest version {block_version}",
    )


def writes_odf_schema(block_version: int) -> bool:
    """Whether a chain of ``block_version`` blocks records a data schema as an ODF schema (0.38+)."""
    return block_version >= BLOCK_VERSION_OF["0.39"]
