"""One dataset on disk: read its chain, append validated blocks atomically, keep its projection cached.

A :class:`Dataset` is a handle (a name and a folder), not a value: every call reads the current head
from disk, so several handles and processes can share a dataset. Writers serialise on the dataset's
lock file; readers never lock, which is safe because blocks, data and checkpoints are immutable and
only become reachable once complete (see :mod:`odfproj.storage.commit`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash as hash_block_bytes
from odfproj.odf.flatbuffers_codec import decode_block, decode_manifest, encode_block
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import to_utc
from odfproj.storage.areas import ObjectAreas, ObjectOrigin
from odfproj.storage.chain import append_block
from odfproj.storage.commit import Transaction, clean_leftovers, find_leftovers
from odfproj.storage.derived_sync import bring_down
from odfproj.storage.errors import (
    ChainInvariantError,
    DatasetLockedError,
    HeadMovedError,
    IntegrityError,
    StorageError,
)
from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.head import read_head
from odfproj.storage.layout import PROJECTION_CACHE, DatasetLayout
from odfproj.storage.locks import LockHolder, file_lock
from odfproj.storage.projection import DATA_EVENTS, ChainProjection, ProjectionMemo

if TYPE_CHECKING:
    from odfproj.storage.objects import DescribedDataFile


class Dataset:
    """A dataset folder in the ODF reference layout."""

    def __init__(
        self,
        name: str,
        path: Path,
        projections: ProjectionMemo | None = None,
        *,
        read_areas: Sequence[Path] = (),
        pinned: str | None = None,
        pinned_head: Multihash | None = None,
        origin: ObjectOrigin | None = None,
    ) -> None:
        self.name = name
        self.path = Path(path)
        self.layout = DatasetLayout(self.path)
        #: Where objects are found: this folder first, then ``read_areas``, then fetched from ``origin``
        #: (a remote workspace's store; see ``storage.areas``).
        self.objects = ObjectAreas(self.layout, tuple(DatasetLayout(Path(p)) for p in read_areas), origin)
        #: Why this handle must not append (a dataset an environment reads from production at a
        #: pinned head); ``None`` for a writable dataset.
        self.pinned = pinned
        #: The pinned head, from the environment's record (its ``refs/head`` file only lists it).
        self._pinned_head = pinned_head
        self._projection: ChainProjection | None = None
        #: Projections already parsed by other handles of the same workspace (see ProjectionMemo).
        self._projections = projections
        #: Records derived from the chain that this handle already read (e.g. ``storage.data_index``),
        #: by name; each is stamped with the head it reflects and used only at that head.
        self.memo: dict[str, object] = {}
        #: The derived record kinds this handle already brought down from its origin (derived_dir).
        self._derived_synced: set[str] = set()

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {str(self.path)!r})"

    # --- reading ------------------------------------------------------------------------------------

    def head(self) -> Multihash | None:
        if self._pinned_head is not None:
            return self._pinned_head
        return read_head(self.layout.head_ref)

    def block_version(self, head: Multihash | None = None) -> int:
        """The manifest version of the chain's head block: the form every block appended keeps.

        A chain never mixes forms (see ``odf.odf_versions``): the setting chooses a new chain's form.
        """
        head = head or self.head()
        if head is None:
            raise StorageError(f"dataset {self.name}: {self.layout.head_ref} is missing (not a dataset)")
        return decode_manifest(self.read_block_bytes(head))[1]

    def read_block_bytes(self, block_hash: Multihash) -> bytes:
        """The stored manifest bytes of a block, checked against the hash that names them."""
        path = self.objects.block_path(block_hash)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise IntegrityError(f"{path}: block {block_hash} is missing") from None
        if hash_block_bytes(data) != block_hash:
            raise IntegrityError(f"{path}: block content does not match its hash (file corrupted)")
        return data

    def get_block(self, block_hash: Multihash) -> model.MetadataBlock:
        path = self.objects.block_path(block_hash)
        try:
            block, _version = decode_block(self.read_block_bytes(block_hash))
        except SerializationError as e:
            raise IntegrityError(f"{path}: cannot decode block: {e}") from None
        return block

    def iter_blocks(self) -> Iterator[tuple[Multihash, model.MetadataBlock]]:
        """Blocks newest to oldest, following ``prevBlockHash`` from the head."""
        current = self.head()
        while current is not None:
            block = self.get_block(current)
            yield current, block
            current = block.prev_block_hash

    def blocks_since(
        self, head: Multihash, known: Multihash | None, known_sequence: int = -1
    ) -> tuple[list[tuple[Multihash, model.MetadataBlock]], bool]:
        """The blocks after ``known`` up to ``head``, oldest first, and whether ``known`` was met.

        The one walk of every record kept by head beside the chain (the projection cache, the data
        index, the state index): from the head back only until the head the record reflects. A
        ``known`` block the walk passes below its sequence number ``known_sequence`` without meeting is
        no ancestor of the head (history rolled back, another chain): the walk goes on to the Seed,
        and the record is not to be used.
        """
        newer: list[tuple[Multihash, model.MetadataBlock]] = []
        current: Multihash | None = head
        while current is not None:
            if known is not None and current == known:
                newer.reverse()
                return newer, True
            block = self.get_block(current)
            if block.sequence_number < known_sequence:
                known = None
            newer.append((current, block))
            current = block.prev_block_hash
        newer.reverse()
        return newer, False

    def in_chain(self, block_hash: Multihash) -> bool:
        """Whether ``block_hash`` is the head or one of its ancestors.

        A rolled-back ``refs/head`` leaves the newer block files on disk, so a block that can be
        read is not necessarily in the chain: the walk from the head down to its sequence number
        decides, reading only the blocks after it.
        """
        try:
            target = self.get_block(block_hash).sequence_number
        except IntegrityError:
            return False
        for current, block in self.iter_blocks():
            if block.sequence_number <= target:
                return current == block_hash
        return False

    # --- projection ---------------------------------------------------------------------------------

    @property
    def dataset_id(self) -> DatasetId:
        return self.projection().dataset_id

    @property
    def kind(self) -> model.DatasetKind:
        return self.projection().kind

    def projection(self) -> ChainProjection:
        """The chain's state at the current head, from memory, the on-disk cache, or the chain."""
        head = self.head()
        if head is None:
            raise StorageError(f"dataset {self.name}: {self.layout.head_ref} is missing (not a dataset)")
        return self._projection_at(head, write_cache=True)

    def _projection_at(self, head: Multihash, *, write_cache: bool) -> ChainProjection:
        if self._projection is not None and self._projection.head == head:
            return self._projection
        shared = self._projections.get(self.path, head) if self._projections is not None else None
        if shared is not None:
            self._projection = shared
            return shared
        cached = self._projection if self._projection is not None else self._read_cache()
        # Walk back from the head until the cached head (incremental) or the Seed (full rebuild).
        newer, met = self.blocks_since(
            head, cached.head if cached else None, cached.sequence_number if cached else -1
        )
        projection = cached if met else None
        try:
            for block_hash, block in newer:
                projection = append_block(projection, block_hash, block)
        except ChainInvariantError as e:
            raise ChainInvariantError(f"dataset {self.name}: the stored chain is invalid: {e}") from None
        assert projection is not None
        self._projection = projection
        if self._projections is not None:
            self._projections.put(self.path, projection)
        if write_cache and newer:
            self._write_cache(projection)
        return projection

    def _read_cache(self) -> ChainProjection | None:
        """The cached projection: this folder's, else a read area's (an environment starts with none).

        A cache is only a starting point: the walk from the head checks that its head is an ancestor.
        """
        for layout in (self.layout, *self.objects.read):
            try:
                return ChainProjection.from_json(layout.projection_cache.read_bytes())
            except (OSError, InvalidValueError):
                continue  # missing or invalid: rebuilt from the chain
        return None

    def _write_cache(self, projection: ChainProjection) -> None:
        """Best effort: a cache that cannot be written (read-only workspace) only costs time."""
        try:
            self.layout.info_dir.mkdir(exist_ok=True)
            replace_atomic(self.layout.projection_cache, projection.to_json().encode(), durable=False)
        except OSError:
            pass

    # --- records kept beside the chain -------------------------------------------------------------

    def read_info(self, name: str) -> bytes | None:
        """A file of ``info/`` (derived or advisory records, never part of the chain); None if absent.

        This folder's, else a read area's: an environment's dataset starts with production's records,
        as with the projection cache. That is safe because every ``info/`` record is checked against
        the chain by its reader (stamped with the head or block it reflects, and rebuilt or ignored
        otherwise), and it is what spares an environment rebuilding, for each dataset it pins,
        records production already holds at that very head.
        """
        try:
            return self.info_path(name).read_bytes()
        except FileNotFoundError:
            return None

    def info_path(self, name: str) -> Path:
        """Where :meth:`read_info` would read ``name`` from now: this folder's file, else the first read
        area's that exists, else this folder's (where it would be written)."""
        file = _info_name(name)
        own = self.layout.info_dir / file
        if not self.objects.read or own.exists():
            return own
        for layout in self.objects.read:
            path = layout.info_dir / file
            if path.exists():
                return path
        return own

    def pinned_info_dirs(self, name: str) -> tuple[Path, ...]:
        """The read areas' ``info/NAME`` folders when this handle is pinned, else none.

        A pinned dataset (an environment reads it from production at a pinned head) never appends,
        so a derived record production keeps at exactly that head (a state index, a compacted copy)
        is its record too: read in place, never written, never cleaned. Any other handle keeps its
        derived folders to itself, since it would update them where it read them.
        """
        if self.pinned is None:
            return ()
        return tuple(layout.info_dir / name for layout in self.objects.read)

    def data_bytes_since(self, head: str | None) -> int:
        """The bytes of the data files the chain added after block ``head`` (multibase text; ``None``:
        every data file of the chain): what a reader of a derived record stamped there reads to catch it
        up (``storage.derived_sync``), or a derivative that consumed its input up to there (``run``). A
        head that is not a block of the chain: unbounded."""
        known = None
        if head is not None:
            try:
                known = Multihash.from_multibase(head)
            except InvalidValueError:
                return sys.maxsize
        current = self.head()
        if current is None:
            return sys.maxsize if head is not None else 0
        newer, met = self.blocks_since(current, known)
        if head is not None and not met:
            return sys.maxsize
        return sum(
            block.event.new_data.size
            for _, block in newer
            if isinstance(block.event, DATA_EVENTS) and block.event.new_data is not None
        )

    def derived_dir(self, kind: str) -> Path:
        """The folder of a derived record of ``kind`` (``info/<kind>/``: a state index, a group state...).

        In a remote workspace's cache, the store's copy of the record is brought down the first time
        a handle asks (``storage.derived_sync``), so a fresh runner updates the record instead of
        rebuilding it from history it would have to fetch. Not for an environment's dataset, whose
        records are its own (or, pinned, production's: :meth:`pinned_info_dirs`).
        """
        directory = self.layout.info_dir / kind
        origin = self.objects.origin
        if origin is not None and not self.objects.read and kind not in self._derived_synced:
            self._derived_synced.add(kind)
            bring_down(origin.store.child("info").child(kind), directory)
        return directory

    def write_info(self, name: str, data: bytes) -> None:
        """Replace a file of ``info/`` atomically and durably."""
        self.layout.info_dir.mkdir(exist_ok=True)
        replace_atomic(self.layout.info_dir / _info_name(name), data, durable=True)

    # --- locking and recovery -----------------------------------------------------------------------

    def lock(self, *, timeout: float | None = None, purpose: str = "write") -> AbstractContextManager[None]:
        """The dataset's writer lock; ``timeout=None`` fails at once with :class:`DatasetLockedError`."""

        def busy(holder: LockHolder) -> DatasetLockedError:
            who = f"pid {holder.pid}" if holder.pid is not None else "another process"
            return DatasetLockedError(f"dataset {self.name} is locked by {who}", holder.pid)

        return file_lock(self.layout.lock_file, purpose=purpose, timeout=timeout, busy=busy)

    def recover(self) -> list[Path]:
        """Clean up after an interrupted transaction if one is visible and nobody is writing.

        Returns the removed paths. Never waits: if a writer holds the lock, its transaction is not
        interrupted but in progress, and it is left alone.
        """
        if not find_leftovers(self.layout):
            return []
        try:
            with self.lock(purpose="recover"):
                return self._recover_locked()
        except (DatasetLockedError, OSError):
            return []  # busy, or a read-only workspace: readers are unaffected by leftovers

    def _recover_locked(self) -> list[Path]:
        leftovers = find_leftovers(self.layout)
        if not leftovers:
            return []
        reachable: set[str] | None = set()
        head = None
        try:
            head = self.head()
            for block_hash, block in self.iter_blocks():
                reachable.add(block_hash.to_multibase())
                event = block.event
                if isinstance(event, DATA_EVENTS):
                    if event.new_data is not None:
                        reachable.add(event.new_data.physical_hash.to_multibase())
                    if event.new_checkpoint is not None:
                        reachable.add(event.new_checkpoint.physical_hash.to_multibase())
        except StorageError:
            reachable = None  # a damaged chain: delete no object, leave it to `verify`
        if head is None:
            reachable = None
        head_block = self.layout.block_path(head) if head is not None else None
        return clean_leftovers(self.layout, leftovers, reachable, head_block)

    # --- writing ------------------------------------------------------------------------------------

    def append(
        self,
        events: Sequence[model.MetadataEvent],
        *,
        expected_head: Multihash | EllipsisType | None = ...,
        system_time: datetime | None = None,
        data_file: Path | None = None,
        checkpoint_file: Path | None = None,
        timeout: float | None = None,
        data_files: Sequence[Path | DescribedDataFile] = (),
    ) -> Multihash:
        """Append ``events`` as consecutive blocks in one atomic transaction; returns the new head.

        Every invariant is checked before anything becomes visible; on any error the chain and the
        dataset's files are as before. ``expected_head`` (unless ``...``) is compared with the head
        under the lock: a plan made against another head raises :class:`HeadMovedError`.
        ``data_file``/``checkpoint_file`` are the files described by the ``newData``/``newCheckpoint``
        of the last event that has one; they are copied in and their hashes and sizes checked. Other
        ``newData``/``newCheckpoint`` must name files the dataset already holds.
        ``data_files`` is the form for a batch cut into several slices: the files of the last
        ``len(data_files)`` events with ``newData``, in event order (give ``data_file`` or ``data_files``).
        A data file given as a :class:`DescribedDataFile` is not hashed again beyond its copy (see
        ``storage.objects``: the copy's physical hash proves it is the file described).
        ``system_time`` defaults to now, but never earlier than the head's (clock skew must not make
        appends fail); an explicit earlier time is an error. ``timeout`` is how long to wait for the
        dataset lock.
        """
        if not events:
            raise InvalidValueError("append needs at least one event")
        if data_file is not None and data_files:
            raise InvalidValueError("append takes data_file or data_files, not both")
        files: list[Path | DescribedDataFile] = [data_file] if data_file is not None else list(data_files)
        for event in events:
            if model.VARIANT_OF.get(type(event), ("",))[0] != "MetadataEvent":
                raise InvalidValueError(f"append takes metadata events, got {type(event).__name__}")
        if system_time is not None:
            system_time = to_utc(system_time)  # a naive time would be a guess
        if self.pinned is not None:
            raise StorageError(f"dataset {self.name}: {self.pinned}")
        with self.lock(timeout=timeout, purpose="append"):
            self._recover_locked()
            head = self.head()
            if expected_head is not ... and expected_head != head:
                raise HeadMovedError(
                    f"dataset {self.name}: head moved from {_describe(expected_head)} to {_describe(head)} "
                    "since the plan was made; plan again"
                )
            if head is None:
                raise StorageError(f"dataset {self.name}: {self.layout.head_ref} is missing (not a dataset)")
            projection = self._projection_at(head, write_cache=False)
            version = self.block_version(head)
            stamp = system_time if system_time is not None else max(datetime.now(UTC), projection.system_time)
            blocks: list[tuple[Multihash, bytes, model.MetadataBlock]] = []
            previous = head
            for event in events:
                block = model.MetadataBlock(
                    system_time=stamp,
                    prev_block_hash=previous,
                    sequence_number=projection.sequence_number + 1,
                    event=event,
                )
                try:
                    data = encode_block(block, version=version)
                except (TypeError, ValueError, OverflowError, SerializationError) as e:
                    raise InvalidValueError(
                        f"dataset {self.name}: cannot encode block {block.sequence_number} "
                        f"({type(event).__name__}): {e}"
                    ) from None
                block_hash = hash_block_bytes(data)
                try:
                    projection = append_block(projection, block_hash, block)
                except ChainInvariantError as e:
                    raise ChainInvariantError(f"dataset {self.name}: {e}") from None
                blocks.append((block_hash, data, block))
                previous = block_hash
            with Transaction(self.layout) as tx:
                self._stage_objects(tx, [b for _, _, b in blocks], files, checkpoint_file)
                for block_hash, data, _ in blocks:
                    tx.publish_as(
                        tx.stage_bytes(data, block_hash.to_multibase()), self.layout.block_path(block_hash)
                    )
                tx.commit(old_head=head, new_head=previous)
            self._projection = projection
            self._write_cache(projection)
            return previous

    def _stage_objects(
        self,
        tx: Transaction,
        blocks: list[model.MetadataBlock],
        data_files: list[Path | DescribedDataFile],
        checkpoint_file: Path | None,
    ) -> None:
        """Stage and check the given files; require every other referenced file to be present.

        Given files go into this dataset's own folder; a referenced one may be found in a read area.
        """
        # Imported here: the checks read Parquet (pyarrow, 0.1 s), which a handle that only reads
        # its chain (every plan) never needs.
        from odfproj.storage.objects import DescribedDataFile, checkpoint_file_problem, data_file_problem

        kinds = (
            ("data", "newData", "data_file", data_files, self.layout.data_path, data_file_problem),
            (
                "checkpoint",
                "newCheckpoint",
                "checkpoint_file",
                [checkpoint_file] if checkpoint_file is not None else [],
                self.layout.checkpoint_path,
                checkpoint_file_problem,
            ),
        )
        find = {"data": self.objects.data_path, "checkpoint": self.objects.checkpoint_path}
        for kind, field, argument, given, locate, check in kinds:
            described = [
                (b.sequence_number, getattr(b.event, _ATTRIBUTE[field]))
                for b in blocks
                if isinstance(b.event, DATA_EVENTS) and getattr(b.event, _ATTRIBUTE[field]) is not None
            ]
            if len(given) > len(described):
                raise InvalidValueError(
                    f"dataset {self.name}: {len(given)} {kind} file(s) given but only {len(described)} "
                    f"event(s) have {field}"
                )
            matched = described[len(described) - len(given) :]
            del described[len(described) - len(given) :]
            pairs = list(zip(given, matched, strict=True))
            staged_files = _staged(
                [(tx, kind if i == 0 else f"{kind}-{i}", f, e, check) for i, (f, (_, e)) in enumerate(pairs)]
            )
            for (path_given, (seq, expected)), (staged, problem) in zip(pairs, staged_files, strict=True):
                path_given = path_given.path if isinstance(path_given, DescribedDataFile) else path_given
                if problem:
                    raise IntegrityError(
                        f"dataset {self.name}: {kind} file {path_given} does not match {field} of block "
                        f"{seq}: {problem}"
                    )
                tx.publish_as(staged, locate(expected.physical_hash))
            for seq, expected in described:
                path = find[kind](expected.physical_hash)
                problem = check(path, expected, integrity=False)
                if problem:
                    raise IntegrityError(
                        f"dataset {self.name}: {field} of block {seq} refers to {path}: {problem} "
                        f"(pass {argument})"
                    )


#: The event attribute behind each file-naming field of a data event.
_ATTRIBUTE = {"newData": "new_data", "newCheckpoint": "new_checkpoint"}
#: Files of one append copied into the staging folder at once: the copy hashes what it writes (one
#: read), which keeps a core busy, so a batch of many files took one core for seconds (issue 36).
_STAGE_THREADS = 2


def _stage_file(
    tx: Transaction,
    name: str,
    given: Path | DescribedDataFile,
    expected: model.DataSlice | model.Checkpoint,
    check: Callable[..., str | None],
) -> tuple[Path, str | None]:
    """Copy one given file into the staging folder as ``name``; the staged path and how it differs from
    ``expected`` (``None``: it does not)."""
    from odfproj.storage.objects import DescribedDataFile, described_file_problem, staged_physical_hash

    if isinstance(given, DescribedDataFile):
        observe, staged_hash = staged_physical_hash()  # hashed as it is copied: one read
        staged = tx.stage_copy(given.path, name, observe)
        assert isinstance(expected, model.DataSlice)
        return staged, described_file_problem(staged, staged_hash(), given, expected)
    staged = tx.stage_copy(Path(given), name)
    return staged, check(staged, expected)


def _staged(
    jobs: list[tuple[Transaction, str, Path | DescribedDataFile, Any, Callable[..., str | None]]],
) -> list[tuple[Path, str | None]]:
    """:func:`_stage_file` of each job, in order; several files two at a time."""
    if len(jobs) <= 1:
        return [_stage_file(*job) for job in jobs]
    with ThreadPoolExecutor(_STAGE_THREADS, thread_name_prefix="stage") as pool:
        return list(pool.map(lambda job: _stage_file(*job), jobs))


def _describe(head: Multihash | None) -> str:
    return head.to_multibase() if head is not None else "(no head)"


def _info_name(name: str) -> str:
    if not name or "/" in name or name.startswith(".") or name == PROJECTION_CACHE:
        raise InvalidValueError(f"not a name for an info/ record: {name!r}")
    return name
