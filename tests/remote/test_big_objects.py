"""Objects bigger than memory should allow: copies stream, S3 uploads go in parts (issue 33, point 3).

Real stores: folders and moto's S3 server on 127.0.0.1. The memory check runs the copy in a child
process and reads its peak resident size (``VmHWM``) before and after, so the pytest process's own
allocations cannot hide or fake a regression.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odfproj.odf.multiformats import Multihash
from odfproj.storage import object_store as store_module
from odfproj.storage.errors import RemoteError
from odfproj.storage.object_copy import check_object, copy_object
from odfproj.storage.object_store import FolderStore, open_store
from odfproj.storage.physical_hash import PHYSICAL_HASH_CODEC

MiB = 1024 * 1024


def _object(folder: Path, size: int) -> tuple[FolderStore, Multihash]:
    """A folder store holding one data object of ``size`` pseudo-random bytes, named by its hash."""
    data = hashlib.shake_256(b"odfproj").digest(size)
    physical = Multihash(PHYSICAL_HASH_CODEC, hashlib.sha3_256(data).digest())
    (folder / "data").mkdir(parents=True)
    (folder / "data" / physical.to_multibase()).write_bytes(data)
    return FolderStore(folder), physical


def test_an_object_above_the_threshold_goes_to_s3_in_parts_and_comes_back_whole(
    tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    monkeypatch.setattr(store_module, "MULTIPART_THRESHOLD", 5 * MiB)
    monkeypatch.setattr(store_module, "MULTIPART_PART_SIZE", 6 * MiB)
    size = 12 * MiB
    source, physical = _object(tmp_path / "source", size)
    remote = open_store(bucket)

    assert copy_object(source, remote, "data", physical, size)
    assert not copy_object(source, remote, "data", physical, size)  # already there: nothing moves

    head = boto3.client("s3").head_object(
        Bucket=remote.bucket, Key=f"{remote.prefix}/data/{physical.to_multibase()}"
    )
    assert head["ETag"].strip('"').endswith("-2")  # a multipart upload of two 6 MiB parts, not one PUT
    back = FolderStore(tmp_path / "back")
    assert copy_object(remote, back, "data", physical, size)
    assert (tmp_path / "back" / "data" / physical.to_multibase()).read_bytes() == (
        tmp_path / "source" / "data" / physical.to_multibase()
    ).read_bytes()


def test_a_damaged_object_is_refused_before_the_destination_sees_a_byte(tmp_path: Path) -> None:
    source, physical = _object(tmp_path / "source", 3 * MiB)
    stored = tmp_path / "source" / "data" / physical.to_multibase()
    damaged = bytearray(stored.read_bytes())
    damaged[-1] ^= 1
    stored.write_bytes(bytes(damaged))
    destination = FolderStore(tmp_path / "destination")

    with pytest.raises(RemoteError, match="does not match its hash or size"):
        copy_object(source, destination, "data", physical, 3 * MiB)
    with pytest.raises(RemoteError, match="does not match its hash or size"):
        check_object(source, "data", physical, 3 * MiB)
    with pytest.raises(RemoteError, match="does not match its hash or size"):  # longer than the block says
        check_object(source, "data", physical, 2 * MiB)
    assert not (tmp_path / "destination" / "data").exists() or not any(
        (tmp_path / "destination" / "data").iterdir()
    )


_CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from odfproj.odf.multiformats import Multihash
    from odfproj.storage.object_store import FolderStore, open_store
    from odfproj.storage.object_copy import check_object, copy_object

    def peak():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    folder, bucket, physical, size = sys.argv[1], sys.argv[2], Multihash.from_multibase(sys.argv[3]), int(sys.argv[4])
    source, remote, back = FolderStore(Path(folder)), open_store(bucket), FolderStore(Path(folder) / "back")
    remote.exists("warm-up")  # boto3's client and its models are loaded before the baseline
    before = peak()
    copy_object(source, remote, "data", physical, size)
    check_object(remote, "data", physical, size)
    copy_object(remote, back, "data", physical, size)
    print(json.dumps({"before": before, "after": peak()}))
    """
)


def test_copying_an_object_does_not_hold_it_in_memory(tmp_path: Path, bucket: str) -> None:
    size = 48 * MiB  # above the multipart threshold, and above what the copy may add to the peak
    _, physical = _object(tmp_path / "source", size)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "source"), bucket, physical.to_multibase(), str(size)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    import json

    figures = json.loads(result.stdout)
    grown = figures["after"] - figures["before"]
    # Holding the object whole would add at least its 48 MiB; measured: about 8 MiB (boto3's
    # buffers of the parts in flight; downloads go 1 MiB at a time).
    assert grown < 32 * MiB, f"the copy grew the peak resident size by {grown / MiB:.0f} MiB"


def test_a_copy_within_s3_goes_in_parts_and_no_byte_passes_through_this_process(
    tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from odfproj.storage.object_store import TRANSFERS

    monkeypatch.setattr(store_module, "MULTIPART_THRESHOLD", 5 * MiB)
    monkeypatch.setattr(store_module, "MULTIPART_PART_SIZE", 6 * MiB)
    source, physical = _object(tmp_path / "source", 12 * MiB)
    remote = open_store(bucket)
    staged = remote.child(".exchange").child("token")
    staged.put_file("part-0.parquet", tmp_path / "source" / "data" / physical.to_multibase())
    key = f"data/{physical.to_multibase()}"

    before = TRANSFERS.now()
    assert remote.child("ws").copy_from(staged, "part-0.parquet", key)
    moved = TRANSFERS.now() - before
    assert moved.bytes_in == moved.bytes_out == 0
    head = boto3.client("s3").head_object(Bucket=remote.bucket, Key=f"{remote.prefix}/ws/{key}")
    assert head["ETag"].strip('"').endswith("-2")  # UploadPartCopy of two parts, not one CopyObject
    check_object(remote.child("ws"), "data", physical, 12 * MiB)  # the same bytes
    # Stores the endpoint cannot copy between: the caller sends the bytes itself, nothing written.
    assert not remote.copy_from(source, f"data/{physical.to_multibase()}", "elsewhere")
    assert not source.copy_from(remote.child("ws"), key, "elsewhere")
    assert not remote.exists("elsewhere") and not (tmp_path / "source" / "elsewhere").exists()
