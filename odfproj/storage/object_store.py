"""Object stores addressed by URL: a folder, an S3 bucket prefix, or an HTTP(S) server (read only).

Keys are ``/``-separated paths relative to the store's root, the same paths as inside a dataset folder
(``refs/head``, ``blocks/<hash>``, ...). Content-addressed objects are written with plain puts (a
rewrite writes the same bytes); the one mutable object, ``refs/head``, is written with
:meth:`ObjectStore.put_if`, a compare-and-swap against the version read before, so two writers can
never interleave.

S3 goes through boto3: it reads credentials, region, endpoint and profiles from the standard AWS
variables and config files, and exposes S3's conditional writes (``If-Match`` / ``If-None-Match``).

Data files and checkpoints can be gigabytes, so they move as streams (:meth:`ObjectStore.open_chunks`,
:meth:`ObjectStore.put_file`): no object odfproj copies is ever held whole in memory, and S3 uploads
go in parts above :data:`MULTIPART_THRESHOLD`. Blocks, heads and locks are small and use ``get``/``put``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import unquote, urlparse

from odfproj.storage.errors import ReadOnlyRemoteError, RemoteError
from odfproj.storage.fsutil import copy_durable, fsync_dir, new_txid, write_durable

T = TypeVar("T")

#: Objects at least this big go to S3 as a multipart upload, in parts of :data:`MULTIPART_PART_SIZE`
#: (S3 allows 5 MiB to 5 GiB a part and 10,000 parts: 160 GiB an object at this size), at most
#: :data:`MULTIPART_THREADS` at a time, so an upload's memory is bounded whatever the object's size.
MULTIPART_THRESHOLD = 32 * 1024 * 1024
MULTIPART_PART_SIZE = 16 * 1024 * 1024
MULTIPART_THREADS = 4
#: The piece a stream is read in: big enough that per-call overhead vanishes, small enough to not matter.
CHUNK_SIZE = 1024 * 1024


@dataclass(frozen=True)
class TransferCount:
    """Requests made to network stores (S3, HTTP) and the bytes of object bodies read and written."""

    requests: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    def __sub__(self, other: TransferCount) -> TransferCount:
        return TransferCount(
            self.requests - other.requests, self.bytes_in - other.bytes_in, self.bytes_out - other.bytes_out
        )

    def describe(self) -> str:
        return f"{self.requests} request(s), {_size(self.bytes_in)} read, {_size(self.bytes_out)} written"


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024 or unit == "MiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"  # pragma: no cover


class _Transfers:
    """What this process moved over the network, counted by every S3 and HTTP store: how a remote
    command's cost is shown (``odfproj run --verbose``) and measured (bench/bench_remote.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = TransferCount()

    def add(self, *, bytes_in: int = 0, bytes_out: int = 0, requests: int = 1) -> None:
        with self._lock:
            c = self._count
            self._count = TransferCount(c.requests + requests, c.bytes_in + bytes_in, c.bytes_out + bytes_out)

    def now(self) -> TransferCount:
        with self._lock:
            return self._count


#: This process's network transfers so far; take :meth:`_Transfers.now` before and after some work.
TRANSFERS = _Transfers()


class ObjectStore(ABC):
    """A flat namespace of immutable-by-convention objects under one root URL."""

    url: str
    #: Whether writes are refused (an http(s) repository): checked before any work starts.
    read_only: bool = False

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or ``None`` if there is none."""

    @abstractmethod
    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and a version token for :meth:`put_if`, or ``None`` if absent."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write an object whole (readers see the old object, the new one, or none; never a part)."""

    @abstractmethod
    def put_if(self, key: str, data: bytes, *, version: str | None) -> bool:
        """Write only if the object is still at ``version`` (``None``: only if it does not exist).

        Returns ``False`` when someone else wrote or created it meanwhile.
        """

    @abstractmethod
    def open_chunks(self, key: str) -> Iterator[bytes] | None:
        """The object's bytes as a stream of pieces, or ``None`` if there is none.

        Missing is told before the first piece, so a caller can say "missing" rather than "empty";
        the stream holds a connection or a file open until it is exhausted or closed.
        """

    @abstractmethod
    def put_file(self, key: str, path: Path, *, parts_at_once: int = MULTIPART_THREADS) -> None:
        """Write the object from a local file, streaming; readers see the old, the new or none, never a part.

        ``parts_at_once``: how many parts of a multipart upload go at a time (fewer: less memory, for an
        upload made beside other work)."""

    def copy_from(self, source: ObjectStore, source_key: str, key: str) -> bool:
        """Make ``key`` a copy of ``source``'s object ``source_key`` where both lie, no byte passing through
        this process (S3's server-side copy, a folder's link); ``False`` when these two stores cannot, and
        then nothing was written: the caller sends the bytes itself."""
        return False

    @abstractmethod
    def delete(self, key: str) -> None: ...

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """Keys under ``prefix`` (recursively), relative to the store root."""

    @abstractmethod
    def child(self, sub: str) -> ObjectStore:
        """The store rooted at ``sub`` inside this one (a dataset inside a repository)."""

    def local_path(self, key: str) -> Path | None:
        """Where this machine can open the object as a file, in place (a folder store); else ``None``."""
        return None

    def spark_uri(self, key: str) -> str | None:
        """Where Spark opens the object in place (``s3a://...``, a folder's path); ``None`` if it cannot."""
        return None

    def __str__(self) -> str:
        return self.url


class FolderStore(ObjectStore):
    """A local folder; writes are atomic renames, ``put_if`` holds an advisory lock on the folder."""

    def __init__(self, root: Path, url: str | None = None) -> None:
        self.root = Path(root)
        self.url = url or str(self.root)  # the spelling the user gave (file://...), for messages

    def _path(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot read {key}: {e.strerror}") from None

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        data = self.get(key)
        return None if data is None else (data, hashlib.sha256(data).hexdigest())

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{new_txid()}")
            try:
                write_durable(tmp, data)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            fsync_dir(path.parent)
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot write {key}: {e.strerror}") from None

    def open_chunks(self, key: str) -> Iterator[bytes] | None:
        try:
            file = self._path(key).open("rb")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot read {key}: {e.strerror}") from None
        return _file_chunks(file)

    def put_file(self, key: str, path: Path, *, parts_at_once: int = MULTIPART_THREADS) -> None:
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp-{new_txid()}")
            try:
                copy_durable(path, tmp)
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            fsync_dir(target.parent)
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot write {key}: {e.strerror}") from None

    def put_if(self, key: str, data: bytes, *, version: str | None) -> bool:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot write {key}: {e.strerror}") from None
        with _folder_lock(path.parent):
            current = self.get_versioned(key)
            if (current[1] if current is not None else None) != version:
                return False
            self.put(key, data)
            return True

    def copy_from(self, source: ObjectStore, source_key: str, key: str) -> bool:
        """A hard link where both folders share a file system (objects are never written in place), else a
        copy on this machine, which is what the bytes would cost through any other route."""
        if not isinstance(source, FolderStore):
            return False
        origin, target = source._path(source_key), self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp-{new_txid()}")
            try:
                os.link(origin, tmp)
            except OSError:
                self.put_file(key, origin)
                return True
            os.replace(tmp, target)
            fsync_dir(target.parent)
        except OSError as e:
            raise RemoteError(f"{self.url}: cannot write {key}: {e.strerror}") from None
        return True

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def child(self, sub: str) -> FolderStore:
        return FolderStore(self.root / sub, f"{self.url.rstrip('/')}/{sub}")

    def local_path(self, key: str) -> Path | None:
        return self._path(key)

    def spark_uri(self, key: str) -> str | None:
        return str(self._path(key))


def _file_chunks(file: BinaryIO) -> Iterator[bytes]:
    with file:
        while piece := file.read(CHUNK_SIZE):
            yield piece


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder itself: serialises compare-and-swaps, leaves no file behind."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class S3Store(ObjectStore):
    """A prefix of an S3 bucket (or any S3-compatible server that honours conditional writes)."""

    def __init__(self, bucket: str, prefix: str, client: Any | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # imported on first use: local-only commands never pay for it

            self._client = boto3.client("s3")
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, call: Callable[[], T]) -> T:
        """Run one S3 request, turning every failure into one line naming this store."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except ClientError as e:
            error = e.response.get("Error", {})
            raise RemoteError(
                f"{self.url}: {what} failed: {error.get('Code', '?')}: {error.get('Message', '') or e}"
            ) from None
        except BotoCoreError as e:
            raise RemoteError(f"{self.url}: {what} failed: {e}") from None

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        def call() -> tuple[bytes, str] | None:
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise
            body = response["Body"].read()
            TRANSFERS.add(bytes_in=len(body))
            return body, response["ETag"]

        return self._call(f"reading {key}", call)

    def get(self, key: str) -> bytes | None:
        found = self.get_versioned(key)
        return None if found is None else found[0]

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        def call() -> bool:
            TRANSFERS.add()
            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                    return False
                raise
            return True

        return self._call(f"looking up {key}", call)

    def open_chunks(self, key: str) -> Iterator[bytes] | None:
        from botocore.exceptions import ClientError

        def call() -> Any:
            TRANSFERS.add()
            try:
                return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise

        body = self._call(f"reading {key}", call)
        return None if body is None else self._body_chunks(key, body)

    def _body_chunks(self, key: str, body: Any) -> Iterator[bytes]:
        """A response body's pieces; a connection lost midway is one line naming the object, not a traceback."""
        from botocore.exceptions import BotoCoreError

        try:
            for piece in body.iter_chunks(CHUNK_SIZE):
                TRANSFERS.add(bytes_in=len(piece), requests=0)
                yield piece
        except (BotoCoreError, OSError) as e:
            raise RemoteError(f"{self.url}: reading {key} failed midway: {e}") from None
        finally:
            body.close()

    def put(self, key: str, data: bytes) -> None:
        TRANSFERS.add(bytes_out=len(data))
        self._call(
            f"writing {key}",
            lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data),
        )

    def put_file(self, key: str, path: Path, *, parts_at_once: int = MULTIPART_THREADS) -> None:
        """boto3's managed upload: one PUT below the threshold, a multipart upload above it.

        A multipart upload becomes visible only when it completes, so readers never see a part; one
        interrupted midway leaves parts that S3 bills until a bucket lifecycle rule (or the next
        upload of the same key) clears them, which docs/guide/remote.md says.
        """
        config = _transfer_config(parts_at_once)
        TRANSFERS.add(bytes_out=path.stat().st_size)
        self._call(
            f"writing {key}",
            lambda: self.client.upload_file(str(path), self.bucket, self._key(key), Config=config),
        )

    def put_if(self, key: str, data: bytes, *, version: str | None) -> bool:
        from botocore.exceptions import ClientError

        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}

        def call() -> bool:
            TRANSFERS.add(bytes_out=len(data))
            try:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **condition)
            except ClientError as e:
                # 412: the condition failed; 409: a concurrent conditional write won the race.
                if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
                    return False
                raise
            return True

        return self._call(f"writing {key}", call)

    def copy_from(self, source: ObjectStore, source_key: str, key: str) -> bool:
        """S3's own copy (CopyObject, or UploadPartCopy in parts above :data:`MULTIPART_THRESHOLD`): one
        request per part, no byte through this process. Only between prefixes one endpoint serves."""
        if (
            not isinstance(source, S3Store)
            or source.client.meta.endpoint_url != self.client.meta.endpoint_url
        ):
            return False
        config = _transfer_config()
        origin = {"Bucket": source.bucket, "Key": source._key(source_key)}
        TRANSFERS.add()
        self._call(
            f"copying {source}/{source_key} to {key}",
            lambda: self.client.copy(origin, self.bucket, self._key(key), Config=config),
        )
        return True

    def delete(self, key: str) -> None:
        TRANSFERS.add()
        self._call(
            f"deleting {key}", lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        )

    def list(self, prefix: str = "") -> list[str]:
        full = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        strip = len(f"{self.prefix}/") if self.prefix else 0

        def call() -> list[str]:
            keys: list[str] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                TRANSFERS.add()
                keys += [item["Key"][strip:] for item in page.get("Contents", [])]
            return sorted(keys)

        return self._call("listing", call)

    def child(self, sub: str) -> S3Store:
        return S3Store(self.bucket, f"{self.prefix}/{sub}" if self.prefix else sub, self._client)

    def spark_uri(self, key: str) -> str | None:
        """Hadoop's S3A connector's spelling of the object (``s3a://BUCKET/KEY``)."""
        return f"s3a://{self.bucket}/{self._key(key)}"


def _transfer_config(parts_at_once: int | None = None) -> Any:
    """boto3's managed transfers in odfproj's parts: one request below the threshold, parts above it."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=MULTIPART_THRESHOLD,
        multipart_chunksize=MULTIPART_PART_SIZE,
        max_concurrency=parts_at_once or MULTIPART_THREADS,
    )


class HttpStore(ObjectStore):
    """An ODF repository served over plain HTTP GET (the Simple Transfer Protocol); read only."""

    read_only = True

    def __init__(self, base_url: str) -> None:
        self.url = base_url.rstrip("/")

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        import httpx

        try:
            response = httpx.get(f"{self.url}/{key}", follow_redirects=True, timeout=60)
        except httpx.HTTPError as e:
            raise RemoteError(f"{self.url}: reading {key} failed: {e}") from None
        TRANSFERS.add(bytes_in=len(response.content))
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RemoteError(f"{self.url}: reading {key} failed: HTTP {response.status_code}")
        return response.content, response.headers.get("etag", "")

    def get(self, key: str) -> bytes | None:
        found = self.get_versioned(key)
        return None if found is None else found[0]

    def exists(self, key: str) -> bool:
        return self.get(key) is not None

    def open_chunks(self, key: str) -> Iterator[bytes] | None:
        import httpx

        url = f"{self.url}/{key}"
        client = httpx.Client(follow_redirects=True, timeout=60)
        TRANSFERS.add()
        try:
            response = client.send(client.build_request("GET", url), stream=True)
        except httpx.HTTPError as e:
            client.close()
            raise RemoteError(f"{self.url}: reading {key} failed: {e}") from None
        if response.status_code != 200:
            response.close()
            client.close()
            if response.status_code == 404:
                return None
            raise RemoteError(f"{self.url}: reading {key} failed: HTTP {response.status_code}")
        return self._response_chunks(key, client, response)

    def _response_chunks(self, key: str, client: Any, response: Any) -> Iterator[bytes]:
        import httpx

        try:
            for piece in response.iter_bytes(CHUNK_SIZE):
                TRANSFERS.add(bytes_in=len(piece), requests=0)
                yield piece
        except httpx.HTTPError as e:
            raise RemoteError(f"{self.url}: reading {key} failed midway: {e}") from None
        finally:
            response.close()
            client.close()

    def put_file(self, key: str, path: Path, *, parts_at_once: int = MULTIPART_THREADS) -> None:
        raise self._read_only()

    def _read_only(self) -> ReadOnlyRemoteError:
        return read_only_error(self)

    def put(self, key: str, data: bytes) -> None:
        raise self._read_only()

    def put_if(self, key: str, data: bytes, *, version: str | None) -> bool:
        raise self._read_only()

    def delete(self, key: str) -> None:
        raise self._read_only()

    def list(self, prefix: str = "") -> list[str]:
        raise RemoteError(f"{self.url}: an http(s) repository cannot be listed: name the datasets to pull")

    def child(self, sub: str) -> HttpStore:
        return HttpStore(f"{self.url}/{sub}")


def open_store(url: str) -> ObjectStore:
    """The store a URL names: ``s3://bucket/prefix``, ``http(s)://...``, ``file://...`` or a plain path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise RemoteError(f"{url}: an s3 URL needs a bucket (s3://BUCKET/PREFIX)")
        return S3Store(parsed.netloc, parsed.path)
    if parsed.scheme in ("http", "https"):
        return HttpStore(url)
    if parsed.scheme == "file":
        return FolderStore(Path(unquote(parsed.path)), url)
    if parsed.scheme and len(parsed.scheme) > 1:
        raise RemoteError(
            f"{url}: unsupported repository scheme {parsed.scheme!r} (use a folder, file://, s3:// or http(s)://)"
        )
    return FolderStore(Path(url))


def read_only_error(store: ObjectStore) -> ReadOnlyRemoteError:
    return ReadOnlyRemoteError(f"{store}: an http(s) repository can only be read (pull from it)")
