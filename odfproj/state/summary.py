"""A dataset at its head, in a few figures: what ``odfproj show`` prints and the docs site's data card shows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from odfproj.state.dataset_index import primary_key_of
from odfproj.storage.projection import ChainProjection

__all__ = ["ChainSummary"]


@dataclass(frozen=True)
class ChainSummary:
    """What a dataset's chain says about it, read from its projection (no block or data file is read).

    ``show`` and the docs site describe the same dataset; they share this value so that both count
    records and name the head, the watermark and the key the same way.
    """

    dataset_id: str
    """``did:odf:...``."""
    head: str
    """The head block's hash, multibase."""
    blocks: int
    watermark: datetime | None
    records: int
    """Records ever written (every ``+A/-R/-C/+C``): the changelog's next offset."""
    primary_key: tuple[str, ...]
    """The key a root's merge strategy declares; empty for the others."""

    @classmethod
    def of(cls, projection: ChainProjection) -> ChainSummary:
        return cls(
            dataset_id=projection.dataset_id.as_did_str(),
            head=projection.head.to_multibase(),
            blocks=projection.block_count,
            watermark=projection.watermark,
            records=projection.last_offset + 1 if projection.last_offset is not None else 0,
            primary_key=primary_key_of(projection) or (),
        )
