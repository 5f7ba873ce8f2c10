"""The state index of a stored dataset: read the chain into change batches, keep the index in ``info/``.

:func:`open_state_index` is the one entry point readers need. It loads the stored index, and uses it
only if it proves its integrity (see :mod:`odfproj.state.persistence`) *and* its stamp is a block of the
current chain at the sequence number the index claims: the head itself (used as is) or an ancestor of
it (the index lags; the blocks after the stamp are read from the chain and appended, which gives the
same index as a rebuild because a block hash fixes the whole chain before it). A stamp the chain does
not hold (the index leads, or belongs to another chain) or any damage means a full rebuild from the
chain. Saving is best effort, like the projection cache: a read-only or busy folder only costs time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.odf import model
from odfproj.odf.data_schema import OFFSET, OP, Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.state.errors import CorruptIndexError, StateIndexError
from odfproj.state.index import ChangeBatch, StateIndex, update
from odfproj.state.persistence import LOCK, has_leftovers, load_index, remove_index_leftovers, save_index
from odfproj.state.validity_log import DEFAULT_BASE_INTERVAL
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import StorageError
from odfproj.storage.locks import file_lock
from odfproj.storage.projection import DATA_EVENTS, ChainProjection

INDEX_DIR = "state-index"


def index_directory(dataset: Dataset) -> Path:
    return dataset.derived_dir(INDEX_DIR)


def primary_key_of(projection: ChainProjection) -> tuple[str, ...] | None:
    """The primary key a root dataset's merge strategy declares (polling source first), if any."""
    sources = [projection.set_polling_source, *projection.push_sources.values()]
    for source in sources:
        key = getattr(getattr(source, "merge", None), "primary_key", None)
        if key:
            return tuple(key)
    return None


def change_batches(
    dataset: Dataset, blocks: Iterable[tuple[Multihash, model.MetadataBlock]], key_columns: Sequence[str]
) -> Iterator[ChangeBatch]:
    """One :class:`ChangeBatch` per block (oldest first), reading only ``offset``, ``op`` and the keys.

    The files' system columns may be renamed by ``SetVocab``; the batches use the standard names.
    """
    vocab = Vocab.of(dataset.projection().set_vocab)
    columns = [vocab.offset, vocab.op, *key_columns]
    for block_hash, block in blocks:
        event = block.event
        offsets = records = None
        if isinstance(event, DATA_EVENTS) and event.new_data is not None:
            path = dataset.objects.data_path(event.new_data.physical_hash, event.new_data.size)
            try:
                records = pq.read_table(path, columns=columns).rename_columns([OFFSET, OP, *key_columns])
            except FileNotFoundError:
                raise StateIndexError(
                    f"dataset {dataset.name}: data file of block {block.sequence_number} is missing: {path}"
                ) from None
            except (pa.ArrowException, OSError) as e:
                raise StateIndexError(
                    f"dataset {dataset.name}: cannot read offset, op and key columns {list(key_columns)} "
                    f"of block {block.sequence_number}: {e}"
                ) from None
            interval = event.new_data.offset_interval
            offsets = (interval.start, interval.end)
        yield ChangeBatch(block.sequence_number, block_hash, block.system_time, offsets, records)


def rebuild_state_index(
    dataset: Dataset,
    key_columns: Sequence[str],
    *,
    base_interval: int = DEFAULT_BASE_INTERVAL,
    work_parent: Path | None = None,
) -> StateIndex:
    """A fresh index of the whole chain, not touching ``info/`` (see :func:`open_state_index`).

    A large key store is kept in a work folder under ``work_parent`` (default: the system's temporary
    folder), removed with the index.
    """
    blocks = list(dataset.iter_blocks())
    blocks.reverse()
    index = StateIndex(key_columns, base_interval, work_parent=work_parent)
    return update(index, change_batches(dataset, blocks, key_columns))


def open_state_index(
    dataset: Dataset,
    key_columns: Sequence[str],
    *,
    base_interval: int = DEFAULT_BASE_INTERVAL,
    persist: bool = True,
    known: StateIndex | None = None,
) -> StateIndex:
    """The index at the dataset's current head, from ``info/state-index/`` when it can be trusted.

    ``known`` is an index the caller already holds (e.g. the one a Snapshot merge read its previous
    state from, before committing): it is used instead of the stored one, under the same rule, so a
    commit advances the index by its own new blocks only. ``known`` is updated in place.
    """
    key_columns = tuple(key_columns)
    head = dataset.head()
    if head is None:
        raise StorageError(f"dataset {dataset.name}: {dataset.layout.head_ref} is missing (not a dataset)")
    directory = index_directory(dataset)
    stored: StateIndex | None = None
    if known is not None and known.key_columns == key_columns:
        stored = known
    else:
        try:
            stored = load_index(directory, key_columns)
        except CorruptIndexError:
            stored = None
    if stored is not None and stored.log.base_interval != base_interval:
        stored = None
    if stored is None:
        for theirs in dataset.pinned_info_dirs(INDEX_DIR):
            try:
                found = load_index(theirs, key_columns)
            except CorruptIndexError:
                continue
            if found.head == head and found.log.base_interval == base_interval:
                return found  # production's index at the pinned head: read there, never saved
    if stored is not None and stored.head == head:
        if persist and has_leftovers(stored, directory):
            _remove_leftovers_best_effort(directory)
        return stored
    newer, met = dataset.blocks_since(
        head, stored.head if stored else None, stored.block_count - 1 if stored else -1
    )
    base = stored if met else None
    if base is not None and newer and newer[0][1].sequence_number != base.block_count:
        # The stored log puts its head at another sequence number than the chain does: rebuild.
        base, (newer, _) = None, dataset.blocks_since(head, None)
    index = base if base is not None else StateIndex(key_columns, base_interval, work_parent=directory)
    try:
        update(index, change_batches(dataset, newer, key_columns))
    except CorruptIndexError:
        if base is None:
            raise
        # A stored key partition failed its check when the update opened it: rebuild from the chain.
        index = rebuild_state_index(dataset, key_columns, base_interval=base_interval, work_parent=directory)
    if persist:
        _save_best_effort(index, directory)
    return index


def _save_best_effort(index: StateIndex, directory: Path) -> None:
    """Save under the index lock (the save removes what killed writers left); skipped if busy."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _index_lock(directory):
            save_index(index, directory)
    except (OSError, StorageError):
        pass  # read-only workspace or another writer at work: the next reader tries again


def _remove_leftovers_best_effort(directory: Path) -> None:
    """A killed writer's leftovers removed by a reader that needs no save, under the index lock."""
    try:
        with _index_lock(directory):
            remove_index_leftovers(directory)
    except (OSError, StorageError):
        pass  # read-only workspace or a writer at work (whose save removes them)


def _index_lock(directory: Path) -> AbstractContextManager[None]:
    """The lock that serialises writers of the index folder; fails at once (as busy) if held."""
    return file_lock(directory / LOCK, purpose="state-index", busy=lambda _holder: StorageError("busy"))
