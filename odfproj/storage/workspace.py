"""The workspace: a folder of datasets in the reference layout, their private keys, and the apply lock.

::

    <root>/
        datasets/<name>/...        one folder per dataset (see :mod:`odfproj.storage.layout`)
        keys/<dataset id>.pem      each dataset's ed25519 private key (mode 0600)
        .names/<name>              the did:odf of the dataset created under that name (lower case)
        .lock                      the workspace lock held by ``odfproj apply``
        .names.lock                serialises creating and deleting datasets (held briefly)

The workspace sits outside the project's git tree by design (the default ``.odf/`` is gitignored),
so private keys never end up in a commit. Dataset names keep the spelling they were created with
but are looked up case-insensitively, like ODF dataset names.

``.names/`` lies outside the dataset folders on purpose: ``verify`` compares each dataset's Seed with
it, so a dataset folder replaced by another dataset's whole chain (which verifies clean on its own)
is caught.

A workspace made by an odfproj older than the records has datasets and no record at all;
:meth:`Workspace.adopt_unrecorded` records them once, from each one's Seed and key (see there).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from odfproj.errors import InvalidValueError, StorageError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, encode_block
from odfproj.odf.identity import DatasetId, DatasetKeyPair
from odfproj.odf.multiformats import Multihash
from odfproj.odf.odf_versions import DEFAULT_ODF_VERSION, block_version_for
from odfproj.odf.refs import DatasetName
from odfproj.odf.timestamps import to_utc
from odfproj.storage.areas import ObjectOrigin
from odfproj.storage.chain import append_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.env_record import (
    RECORD_FILE,
    EnvironmentRecord,
    Pin,
    PreviewEnvironmentError,
    read_record,
    write_record,
)
from odfproj.storage.errors import (
    ChainInvariantError,
    DatasetExistsError,
    DatasetNotFoundError,
    LockedError,
    WorkspaceLockedError,
)
from odfproj.storage.fsutil import fsync_dir, new_txid, remove_tree, replace_atomic, write_durable
from odfproj.storage.layout import DATASET_DIRS, HEAD_REF, LOCK_FILE, STAGING_DIR, DatasetLayout
from odfproj.storage.locks import LockHolder, file_lock
from odfproj.storage.origin import Origin, read_origin
from odfproj.storage.projection import ProjectionMemo
from odfproj.workspace_paths import production_root

#: Prefixes of the workspace's own temporary folders inside ``datasets/`` (never dataset names,
#: which cannot start with a dot).
_CREATING = ".creating-"
_DELETING = ".deleting-"
#: Prefix of the folder an adoption writes its records into before renaming it to ``.names``.
_ADOPTING = ".names.adopting-"


#: The second line of a ``.names/`` record for a dataset that arrived by ``odfproj pull``.
RECEIVED = "received"

#: How many names an adoption's line lists before it only counts the rest.
_NAMES_SHOWN = 5


@dataclass(frozen=True)
class Adoption:
    """What adopting a workspace made before name records did (see :meth:`Workspace.adopt_unrecorded`).

    ``adopted``: the datasets recorded; ``left``: (name, why) of each one left unrecorded, for
    ``verify`` to report.
    """

    adopted: tuple[str, ...]
    left: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        """The one line a command says about it."""
        left = ""
        if self.left:
            shown = [f"{name} ({why})" for name, why in self.left[:_NAMES_SHOWN]]
            more = len(self.left) - _NAMES_SHOWN
            left = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
        if not self.adopted:
            return (
                f"a workspace made before name records: none of its {len(self.left)} dataset(s) could be "
                f"adopted, `odfproj verify` reports them: {left}"
            )
        noun = "dataset" if len(self.adopted) == 1 else "datasets"
        line = f"adopted {len(self.adopted)} {noun} of a workspace made before name records (.names/ written)"
        return f"{line}; left unrecorded for `odfproj verify` to report: {left}" if left else line


class Workspace:
    """A handle on a workspace folder; creates nothing until a dataset is created."""

    def __init__(self, root: Path, *, odf_version: str = DEFAULT_ODF_VERSION) -> None:
        self.root = Path(root)
        #: The ODF version new chains are written in (``odfproj.yaml`` ``odf_version``); an existing
        #: chain keeps the form of its head (``Dataset.block_version``).
        self.block_version = block_version_for(odf_version)
        # dataset id -> name as of the last scan (see find_by_id); a hint, always re-checked.
        self._names_by_id: dict[DatasetId, str] | None = None
        self._ids_lock = threading.Lock()
        self._projections = ProjectionMemo()
        # env.json as last read, by its (mtime, size): an environment's record (see ``environment``).
        self._record: tuple[tuple[int, int], EnvironmentRecord] | None = None

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def environment(self) -> EnvironmentRecord | None:
        """This workspace's record when it is a preview environment (``storage.environment``), else None.

        Read again only when ``env.json`` changed, so opening a thousand datasets parses it once.
        """
        path = self.root / RECORD_FILE
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._record is None or self._record[0] != stamp:
            record = read_record(self.root)
            if record is None:
                return None
            self._record = (stamp, record)
        return self._record[1]

    @property
    def production(self) -> Workspace | None:
        """The production workspace an environment lies over; ``None`` for production itself."""
        if self.environment is None:
            return None
        return Workspace(production_root(self.root))

    @property
    def datasets_dir(self) -> Path:
        return self.root / "datasets"

    @property
    def keys_dir(self) -> Path:
        return self.root / "keys"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @property
    def names_dir(self) -> Path:
        return self.root / ".names"

    def name_record(self, name: str) -> Path:
        """Where the id of the dataset created as ``name`` is recorded (names compare case-insensitively)."""
        return self.names_dir / name.lower()

    def recorded_id(self, name: str) -> DatasetId | None:
        """The id this workspace gave the dataset ``name`` when it created it; ``None`` if unrecorded.

        Raises :class:`InvalidValueError` when the record exists but does not hold a ``did:odf``.
        """
        lines = self._name_record_lines(name)
        return None if lines is None else DatasetId.from_did_str(lines[0] if lines else "")

    def is_received(self, name: str) -> bool:
        """Whether ``name`` arrived by ``odfproj pull`` rather than being created here: then its private
        key stays with its creator, and ``verify`` does not ask for it."""
        lines = self._name_record_lines(name)
        return lines is not None and RECEIVED in lines[1:]

    def _name_record_lines(self, name: str) -> list[str] | None:
        try:
            text = self.name_record(name).read_bytes().decode("ascii", "replace")
        except FileNotFoundError:
            production = self.production  # an environment records only what it created
            return production._name_record_lines(name) if production is not None else None
        return [line.strip() for line in text.strip().splitlines()]

    def key_path(self, dataset_id: DatasetId) -> Path:
        """Where a dataset's private key is kept: named by the multibase part of its ``did:odf``.

        In an environment, production's key of a dataset the environment did not create.
        """
        own = self.keys_dir / f"{dataset_id.as_did_str().removeprefix('did:odf:')}.pem"
        production = self.production if not own.exists() else None
        return production.key_path(dataset_id) if production is not None else own

    def has_name_records(self) -> bool:
        """Whether ``.names/`` holds any record: one directory read, stopped at the first entry."""
        try:
            with os.scandir(self.names_dir) as entries:
                return next(entries, None) is not None
        except (FileNotFoundError, NotADirectoryError):
            return False

    # --- adopting a workspace made before name records ---------------------------------------------

    def adopt_unrecorded(self) -> Adoption | None:
        """Record the datasets of a workspace an older odfproj made, before ``.names/`` existed.

        Such a workspace has datasets and no name record at all (no ``.names/``, or an empty one);
        ``verify`` would report every dataset as unrecorded, and nothing else would ever record them.
        Each dataset is recorded from its own Seed (the first block of its chain, reached by the
        walk from the head) once the key ``keys/`` holds under that id is found to derive it, as
        ``verify`` checks it. A dataset with no key, an unreadable or foreign key, or a chain that
        cannot be read down to its Seed is left unrecorded, for ``verify`` to report. An odfproj
        that predates name records also predates ``odfproj pull``, so a dataset without a key was
        not pulled by odfproj: it is left unrecorded too.

        ``None`` (and nothing written) when the workspace has any record, or no dataset: the check
        is one directory read of ``.names/`` (plus one of ``datasets/`` when it has no record), so
        calling it on every command that writes costs nothing. A workspace with some records and
        some missing is not adopted: that is what ``verify`` exists to report.

        It runs under the names lock, the lock every record is written under (``create``,
        ``receive``, ``rename``, ``delete``): held for instants, so this never waits for a long
        ``apply`` or ``run`` holding the workspace lock, and nothing records or removes a name
        meanwhile. Storage says nothing: the caller (the CLI) shows :meth:`Adoption.line` once.
        The lock cannot be taken in a read-only workspace: then nothing is adopted (``None``) and
        ``verify`` reports the datasets as before.
        """
        if self.environment is not None:
            return None  # an environment records only what it creates; production's records are read
        if self.has_name_records() or next(self._dataset_dirs(), None) is None:
            return None
        try:
            with self._names_lock():
                return self._adopt_locked()
        except (LockedError, OSError):
            return None

    def _adopt_locked(self) -> Adoption | None:
        """Adopt under the names lock (see :meth:`adopt_unrecorded`); re-checks, as anyone may have
        recorded a name since the caller looked.

        All or nothing: every record is written into a folder beside ``.names/`` that is then
        renamed onto it (absent or empty, which ``rename(2)`` replaces), so a crash or a full disk
        never leaves some records, which would make the workspace look adopted with datasets missing.
        """
        if self.has_name_records():
            return None
        for stray in self.root.glob(f"{_ADOPTING}*"):
            remove_tree(stray)  # a crashed adoption's; nothing reads it
        names = self.list_datasets()
        if not names:
            return None
        spellings: dict[str, int] = {}
        for name in names:
            spellings[name.lower()] = spellings.get(name.lower(), 0) + 1
        adopted: list[tuple[str, DatasetId]] = []
        left: list[tuple[str, str]] = []
        for name in names:
            if spellings[name.lower()] > 1:
                left.append((name, "another folder has the same name in another case"))
                continue
            seed_id, why = self._adoptable_id(name)
            if seed_id is None:
                left.append((name, why))
            else:
                adopted.append((name, seed_id))
        if adopted:
            staging = self.root / f"{_ADOPTING}{new_txid()}"
            try:
                staging.mkdir()
                for name, seed_id in adopted:
                    write_durable(staging / name.lower(), _record_text(seed_id))
                fsync_dir(staging)
                os.rename(staging, self.names_dir)
            except BaseException:
                remove_tree(staging)
                raise
            fsync_dir(self.root)
        return Adoption(tuple(name for name, _ in adopted), tuple(left))

    def _adoptable_id(self, name: str) -> tuple[DatasetId | None, str]:
        """The id of ``name``'s Seed if its key under ``keys/`` derives it; else ``None`` and why not."""
        try:
            dataset = self.open(name, recover=False)
            seed: model.MetadataBlock | None = None
            for _hash, block in dataset.iter_blocks():
                seed = block
        except (StorageError, OSError):
            return None, "its chain cannot be read down to its Seed"
        if seed is None or not isinstance(seed.event, model.Seed) or seed.sequence_number != 0:
            return None, "its chain does not start with a Seed"
        seed_id = seed.event.dataset_id
        try:
            key = DatasetKeyPair.from_pem(self.key_path(seed_id).read_bytes())
        except FileNotFoundError:
            return None, "no private key"
        except (OSError, InvalidValueError):
            return None, "its private key is unreadable"
        if key.dataset_id != seed_id:
            return None, "its private key is of another dataset"
        return seed_id, ""

    # --- lookup -------------------------------------------------------------------------------------

    def _dataset_dirs(self) -> Iterator[Path]:
        """Folders that are datasets: a visible name and a head ref (a half-created one has none).

        One ``scandir`` and one ``stat`` per folder, in strings: a workspace of ten thousand datasets is
        listed on every plan.
        """
        try:
            entries = os.scandir(self.datasets_dir)
        except (FileNotFoundError, NotADirectoryError):
            return
        with entries:
            for entry in entries:
                if (
                    not entry.name.startswith(".")
                    and entry.is_dir()
                    and os.path.isfile(os.path.join(entry.path, "refs", HEAD_REF))
                ):
                    yield Path(entry.path)

    def stored_data_bytes(self, limit: int) -> int:
        """The bytes of the data files this machine holds for the workspace's datasets, counted until
        ``limit`` is reached: a rough size of the data, from one ``scandir`` per dataset (no chain read)."""
        total = 0
        for folder in self._dataset_dirs():
            try:
                entries = os.scandir(DatasetLayout(folder).data_dir)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        total += entry.stat().st_size if entry.is_file() else 0
            if total >= limit:
                break
        return total

    def list_datasets(self) -> list[str]:
        """Dataset names as spelled on disk, sorted case-insensitively."""
        return sorted((p.name for p in self._dataset_dirs()), key=lambda n: (n.lower(), n))

    def read_handles(self) -> list[Dataset]:
        """A read-only handle on every dataset, in ``list_datasets`` order, from one listing (``open``
        looks each name up again). Nothing is recovered: a reader never sees an interrupted commit."""
        dirs = sorted(self._dataset_dirs(), key=lambda p: (p.name.lower(), p.name))
        record = self.environment  # one look at env.json for the whole listing, not one per dataset
        return [self._dataset_in(path, record) for path in dirs]

    def _find(self, name: str) -> Path | None:
        exact = self.datasets_dir / name
        if not name.startswith(".") and "/" not in name and (exact / "refs" / HEAD_REF).is_file():
            return exact  # the name as spelled on disk: no need to scan the whole folder
        key = name.lower()
        for path in self._dataset_dirs():
            if path.name.lower() == key:
                return path
        return None

    def exists(self, name: str) -> bool:
        return self._find(name) is not None

    def open(self, name: str, *, recover: bool = True) -> Dataset:
        """Open a dataset by name (case-insensitive), cleaning up after an interrupted commit.

        ``recover=False`` opens it strictly read-only (plan must not write): leftovers of an
        interrupted commit are invisible to readers anyway, since the head never points at them.
        """
        path = self._find(name)
        if path is None:
            raise DatasetNotFoundError(f"dataset {name!r} not found in workspace {self.root}")
        dataset = self._dataset(path)
        if recover:
            dataset.recover()
        return dataset

    @cached_property
    def origin(self) -> Origin | None:
        """The store this workspace mirrors when it is a remote workspace's cache (its environments:
        production's), else ``None``; read once per handle, on its first dataset (see ``storage.origin``):
        a handle opened before a checkout recorded the origin does not fetch."""
        return read_origin(self.root if self.environment is None else production_root(self.root))

    def _dataset(self, path: Path) -> Dataset:
        return self._dataset_in(path, self.environment)

    def _dataset_in(self, path: Path, record: EnvironmentRecord | None) -> Dataset:
        """The handle on the dataset folder ``path``: in an environment (``record``, as just read), over
        production's folder; in a remote workspace's cache, fetching the objects it lacks from the store."""
        pin = record.pin(path.name) if record is not None else None
        origin = self._object_origin(path.name, path if record is None else None)
        if record is None or pin is None or pin.state == "created":
            return Dataset(path.name, path, self._projections, origin=origin)
        pinned = None
        if pin.state == "pinned":
            pinned = (
                f"read from production at its pinned head in environment {record.name!r}: only a changed "
                "dataset and its downstream are computed in an environment"
            )
        production = production_root(self.root) / "datasets" / path.name
        return Dataset(
            path.name,
            path,
            self._projections,
            read_areas=(production,),
            pinned=pinned,
            pinned_head=pin.base if pinned is not None else None,
            origin=origin,
        )

    def _object_origin(self, name: str, folder: Path | None) -> ObjectOrigin | None:
        """Where dataset ``name`` fetches the objects it lacks: its prefix in the store this cache mirrors,
        into ``folder`` (production's own folder of the dataset; for an environment, production's)."""
        origin = self.origin
        if origin is None:
            return None
        mirror = folder if folder is not None else production_root(self.root) / "datasets" / name
        return ObjectOrigin(origin.dataset_store(name), DatasetLayout(mirror))

    def find_by_id(self, dataset_id: DatasetId) -> Dataset | None:
        """The dataset with this id, or None (read-only open, as ``open(recover=False)``).

        Ids live in each chain's Seed, so finding one means reading every dataset's projection. A
        run resolves the inputs of every derivative, so the id -> name map of the last scan is kept
        on this handle; a hit is re-checked against the dataset's own id and a miss rescans, so a
        dataset created, deleted or renamed since never gives a wrong answer, it only costs a scan.
        """
        with self._ids_lock:
            names = self._names_by_id
        if names is not None:
            found = self._open_if_id(names, dataset_id)
            if found is not None:
                return found
        return self._open_if_id(self._scan_ids(), dataset_id)

    def remember_ids(self, names: Mapping[DatasetId, str]) -> None:
        """Start ``find_by_id`` from ids the caller has already read (a plan's views of the chains),
        instead of a scan of every dataset at the first lookup. Safe with any map: a hit is checked
        against the dataset's own id and a miss rescans."""
        with self._ids_lock:
            if self._names_by_id is None:
                self._names_by_id = dict(names)

    def _open_if_id(self, names: dict[DatasetId, str], dataset_id: DatasetId) -> Dataset | None:
        name = names.get(dataset_id)
        if name is None:
            return None
        try:
            dataset = self.open(name, recover=False)
        except DatasetNotFoundError:  # deleted since the scan
            return None
        return dataset if dataset.dataset_id == dataset_id else None

    def _scan_ids(self) -> dict[DatasetId, str]:
        names: dict[DatasetId, str] = {}
        for name in self.list_datasets():
            try:
                names[self.open(name, recover=False).dataset_id] = name
            except Exception:  # a damaged dataset is reported by verify, not here
                continue
        with self._ids_lock:
            self._names_by_id = names
        return names

    # --- creating and deleting ----------------------------------------------------------------------

    def create(
        self,
        name: str,
        kind: model.DatasetKind,
        *,
        events: Sequence[model.MetadataEvent] = (),
        system_time: datetime | None = None,
    ) -> Dataset:
        """Create a dataset with a fresh identity: its Seed block and then ``events``, atomically.

        The whole folder is built under ``datasets/.creating-<txid>/`` and renamed into place, so a
        crash leaves either no dataset or a complete one: a dataset never exists with only part of
        its manifest applied. ``events`` are definition events (no data files); every chain
        invariant is checked before anything is written. The private key is written first, to
        ``keys/``: a crash after it leaves an unused key file, never a dataset without its key.
        """
        dataset_name = DatasetName(name)  # raises for names that are not valid ODF dataset names
        if not self.datasets_dir.is_dir():
            self.datasets_dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.root)
        with self._names_lock():
            self._clean_temporary()
            existing = self._find(name)
            if existing is not None:
                raise DatasetExistsError(f"dataset {existing.name!r} already exists in workspace {self.root}")
            self._remove_strays(str(dataset_name))
            key = DatasetKeyPair.generate()
            seed = model.MetadataBlock(
                system_time=to_utc(system_time) if system_time is not None else datetime.now(UTC),
                prev_block_hash=None,
                sequence_number=0,
                event=model.Seed(dataset_id=key.dataset_id, dataset_kind=kind),
            )
            blocks = _chain_blocks(seed, events, self.block_version)
            projection = None
            try:
                for hash_, block, _ in blocks:
                    projection = append_block(projection, hash_, block)
            except ChainInvariantError as e:
                raise ChainInvariantError(f"cannot create dataset {name!r}: {e}") from None
            assert projection is not None
            self._write_key(key)  # only once the chain is known to be valid
            self._write_name_record(str(dataset_name), key.dataset_id)
            staging = self.datasets_dir / f"{_CREATING}{new_txid()}"
            layout = DatasetLayout(staging)
            try:
                staging.mkdir()
                for sub in (*DATASET_DIRS, STAGING_DIR):
                    (staging / sub).mkdir()
                (staging / LOCK_FILE).touch()
                for hash_, _, data in blocks:
                    write_durable(layout.block_path(hash_), data)
                write_durable(layout.head_ref, projection.head.to_multibase().encode("ascii"))
                layout.projection_cache.write_text(projection.to_json(), encoding="utf-8")
                for sub in (*DATASET_DIRS, STAGING_DIR):
                    fsync_dir(staging / sub)
                fsync_dir(staging)
                target = self.datasets_dir / str(dataset_name)
                os.rename(staging, target)
            except BaseException:
                remove_tree(staging)
                raise
            fsync_dir(self.datasets_dir)
            record = self.environment
            if record is not None:  # production has no such dataset: the environment made it
                write_record(self.root, record.with_pins({target.name: Pin("created")}))
        return Dataset(target.name, target, self._projections)

    def receive(self, name: str, dataset_id: DatasetId, *, key: DatasetKeyPair | None = None) -> Dataset:
        """The folder a dataset arriving from a repository (``odfproj pull``) is written into.

        Records ``name -> dataset_id`` and makes the layout's sub-folders but writes no ``refs/head``:
        the folder becomes a dataset only when the puller moves the head, last, so an interrupted pull
        leaves nothing visible (and ``create`` removes such a folder). No key is written: a pulled
        dataset's private key stays with whoever created it. ``key`` is given for a dataset this
        workspace's owner created elsewhere (an environment's, on publish): it is written and the
        dataset is recorded as created, not received.
        """
        dataset_name = DatasetName(name)
        self.datasets_dir.mkdir(parents=True, exist_ok=True)
        with self._names_lock():
            existing = self._find(name)
            if existing is not None:
                raise DatasetExistsError(f"dataset {existing.name!r} already exists in workspace {self.root}")
            if key is not None:  # a dataset made elsewhere by this workspace's owner (publish): its key
                self._write_key(key)
            self._write_name_record(str(dataset_name), dataset_id, received=key is None)
            target = self.datasets_dir / str(dataset_name)
            for sub in DATASET_DIRS:
                (target / sub).mkdir(parents=True, exist_ok=True)
            (target / LOCK_FILE).touch()
        return Dataset(target.name, target)

    def _write_key(self, key: DatasetKeyPair) -> None:
        if not self.keys_dir.is_dir():
            self.keys_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fsync_dir(self.root)
        target = self.key_path(key.dataset_id)
        tmp = target.with_name(f".{target.name}.tmp-{new_txid()}")
        try:
            write_durable(tmp, key.to_pem(), mode=0o600)
            os.chmod(tmp, 0o600)  # whatever the umask
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.keys_dir)

    def _write_name_record(self, name: str, dataset_id: DatasetId, *, received: bool = False) -> None:
        """Record ``name -> id`` before the dataset appears; a stale record of a crashed create is overwritten.

        The first line is the id; a pulled dataset's record has a second line, ``received``. Called
        under the names lock. The first record written into a workspace made before name records
        adopts its datasets first (:meth:`adopt_unrecorded`): once any record exists, it never would.
        """
        if not self.has_name_records() and self.environment is None:
            self._adopt_locked()
        if not self.names_dir.is_dir():
            self.names_dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.root)
        replace_atomic(self.name_record(name), _record_text(dataset_id, received=received))

    def delete(self, name: str) -> None:
        """Delete a dataset's folder (its chain and data). Its private key is kept in ``keys/``.

        Destructive: callers (apply) must only call it when the user explicitly asked. The folder is
        first renamed away (atomic: the dataset disappears at once), then removed.
        """
        self._refuse_in_environment(name, "delete")
        with self._names_lock():
            path = self._find(name)
            if path is None:
                raise DatasetNotFoundError(f"dataset {name!r} not found in workspace {self.root}")
            dataset = Dataset(path.name, path)
            with dataset.lock(purpose="delete"):
                doomed = self.datasets_dir / f"{_DELETING}{new_txid()}"
                os.rename(path, doomed)
            fsync_dir(self.datasets_dir)
            remove_tree(doomed)
            self.name_record(path.name).unlink(missing_ok=True)

    def rename(self, name: str, new_name: str, *, expected_id: DatasetId | None = None) -> Dataset:
        """Give a dataset another name, keeping everything it is: id, key, chain, data and caches.

        What a dataset owns on disk is its folder (chain, data, checkpoints, the projection cache and
        the state index), its key (named by its id, so it stays) and its ``.names/`` record. Under the
        names lock and the dataset's own lock (no commit can be in progress): the new record is written
        first, then the folder is renamed in one ``rename(2)``, then the old record is removed. A crash
        between the steps leaves one valid dataset under the old or the new name, with its record, plus
        at most a stale record under a name no dataset has (``create`` overwrites it). ``expected_id``
        refuses to rename a dataset that was replaced since the caller looked at it.
        """
        target_name = str(DatasetName(new_name))
        self._refuse_in_environment(name, "rename")
        with self._names_lock():
            self._clean_temporary()
            path = self._find(name)
            if path is None:
                raise DatasetNotFoundError(f"dataset {name!r} not found in workspace {self.root}")
            existing = self._find(target_name)
            if existing is not None:
                raise DatasetExistsError(f"dataset {existing.name!r} already exists in workspace {self.root}")
            dataset = Dataset(path.name, path)
            with dataset.lock(purpose="rename"):
                dataset_id = dataset.dataset_id
                if expected_id is not None and dataset_id != expected_id:
                    raise DatasetExistsError(
                        f"dataset {path.name!r} has id {dataset_id}, not {expected_id}: it was replaced; "
                        "nothing was renamed"
                    )
                self._remove_strays(target_name)
                self._write_name_record(target_name, dataset_id, received=self.is_received(path.name))
                target = self.datasets_dir / target_name
                os.rename(path, target)
                fsync_dir(self.datasets_dir)
            if path.name.lower() != target_name.lower():
                self.name_record(path.name).unlink(missing_ok=True)
                fsync_dir(self.names_dir)
            with self._ids_lock:
                self._names_by_id = None
        return Dataset(target.name, target, self._projections)

    def _refuse_in_environment(self, name: str, verb: str) -> None:
        """An environment never deletes or renames a production dataset: publish only moves heads."""
        record = self.environment
        pin = record.pin(name) if record is not None else None
        if record is not None and pin is not None and pin.state != "created":
            raise PreviewEnvironmentError(
                f"dataset {name}: environment {record.name!r} cannot {verb} a production dataset; "
                f"{verb} it on production (without --env)"
            )

    def _remove_strays(self, name: str) -> None:
        """Remove what a crashed create or pull left under ``name``: a folder without ``refs/head``
        holds nothing reachable. Called under the names lock, once ``name`` is known to be no dataset."""
        for stray in self.datasets_dir.iterdir():
            if stray.name.lower() == name.lower():
                if stray.is_dir() and not stray.is_symlink():
                    remove_tree(stray)
                else:
                    stray.unlink()

    def _clean_temporary(self) -> None:
        """Remove folders of creates and deletes that crashed; called under the names lock."""
        for path in self.datasets_dir.iterdir():
            if path.name.startswith((_CREATING, _DELETING)):
                remove_tree(path)

    # --- locks --------------------------------------------------------------------------------------

    def _names_lock(self) -> AbstractContextManager[None]:
        """Held only for the instant of a create or delete, so waiting for it is fine."""

        def busy(holder: LockHolder) -> LockedError:
            who = f"pid {holder.pid}" if holder.pid is not None else "another process"
            return LockedError(
                f"workspace {self.root}: {who} keeps creating or deleting datasets", holder.pid
            )

        self.root.mkdir(parents=True, exist_ok=True)
        return file_lock(self.root / ".names.lock", purpose="create", timeout=30.0, busy=busy)

    @contextmanager
    def lock(self, *, purpose: str = "odfproj apply", timeout: float | None = None) -> Iterator[None]:
        """The workspace lock, so that two applies never interleave.

        Non-blocking by default: raises :class:`WorkspaceLockedError` naming the holder's pid, purpose
        and start time; with ``timeout`` waits up to that many seconds first.
        """

        def busy(holder: LockHolder) -> WorkspaceLockedError:
            if holder.pid is None:
                return WorkspaceLockedError(f"workspace {self.root} is locked by another process")
            what = f" ({holder.purpose or 'unknown'} started at {holder.started or 'unknown time'})"
            return WorkspaceLockedError(
                f"workspace {self.root} is locked by pid {holder.pid}{what}", holder.pid
            )

        self.root.mkdir(parents=True, exist_ok=True)
        with file_lock(self.lock_file, purpose=purpose, timeout=timeout, busy=busy):
            yield


def _record_text(dataset_id: DatasetId, *, received: bool = False) -> bytes:
    """A ``.names/`` record: the id, then ``received`` for a pulled dataset."""
    return (f"{dataset_id.as_did_str()}\n" + (f"{RECEIVED}\n" if received else "")).encode("ascii")


def _chain_blocks(
    seed: model.MetadataBlock, events: Sequence[model.MetadataEvent], version: int
) -> list[tuple[Multihash, model.MetadataBlock, bytes]]:
    """The Seed and ``events`` as linked blocks (hash, block, stored bytes) of manifest ``version``, all at
    the Seed's time."""
    data = encode_block(seed, version=version)
    out = [(block_hash(data), seed, data)]
    for event in events:
        prev_hash, prev, _ = out[-1]
        block = model.MetadataBlock(
            system_time=seed.system_time,
            prev_block_hash=prev_hash,
            sequence_number=prev.sequence_number + 1,
            event=event,
        )
        data = encode_block(block, version=version)
        out.append((block_hash(data), block, data))
    return out
