"""The reference implementation's block hashes, reproduced through ``odfproj block hash``.

The commands run through the real entry point in-process (tests/cli_inprocess.py): their output and exit
codes are the point, not a new interpreter per vector.
"""

from __future__ import annotations

import pytest

from odfproj.odf import blocks
from odfproj.odf.flatbuffers_codec import decode_block, encode_block
from tests.cli_inprocess import run_main_split
from tests.conftest import VECTORS_DIR


def _rows() -> list[tuple[str, int, str, int | None]]:
    rows = []
    for line in (VECTORS_DIR / "expected-block-hashes.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        file, version, expected, size = line.split("\t")
        rows.append((file, int(version), expected, None if size == "-" else int(size)))
    return rows


ROWS = _rows()


def test_all_21_vectors_are_present() -> None:
    assert len(ROWS) == 21


@pytest.mark.parametrize(("file", "version", "expected", "size"), ROWS, ids=lambda v: str(v))
def test_block_hash_cli_reproduces_vector(file: str, version: int, expected: str, size: int | None) -> None:
    path = VECTORS_DIR / file
    code, stdout, stderr = run_main_split("block", "hash", str(path), "--version", str(version))
    assert code == 0, stderr
    assert stdout.strip() == expected
    data = blocks.yaml_to_binary(path.read_bytes(), version)
    if size is not None:
        assert len(data) == size
    # Binary -> model -> binary is the identity on every vector.
    block, got_version = decode_block(data)
    assert got_version == version
    assert encode_block(block, version=version) == data


def test_encode_and_decode_cli(tmp_path) -> None:
    src = VECTORS_DIR / "blocks" / "09-execute-transform.yaml"
    out = tmp_path / "block.bin"
    code, _, stderr = run_main_split("block", "encode", str(src), "-o", str(out))
    assert code == 0, stderr
    code, decoded, stderr = run_main_split("block", "decode", str(out))
    assert code == 0, stderr
    assert blocks.hash_of_yaml(decoded) == blocks.hash_of_yaml(src.read_bytes())


def test_decode_of_a_corrupt_file_is_one_clean_line(tmp_path) -> None:
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x07\x00\x00\x00garbage")
    code, _, stderr = run_main_split("block", "decode", str(bad))
    assert code == 1
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1 and str(bad) in stderr


def test_reading_a_block_imports_no_numpy(tmp_path) -> None:
    """Blocks are read by odfproj's own FlatBuffers reader: the flatbuffers library (whose package
    imports numpy, 0.08 s of a small command's start) is imported only to write one."""
    import subprocess
    import sys

    file, version, _expected, _size = ROWS[0]
    stored = tmp_path / "block"
    stored.write_bytes(blocks.yaml_to_binary((VECTORS_DIR / file).read_bytes(), version))
    script = (
        "import sys; from pathlib import Path; from odfproj.odf.flatbuffers_codec import decode_block; "
        f"block, version = decode_block(Path({str(stored)!r}).read_bytes()); "
        "print(version, type(block.event).__name__, 'numpy' in sys.modules, 'flatbuffers' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    read_version, event, numpy, library = done.stdout.split()
    assert (int(read_version), numpy, library) == (version, "False", "False"), done.stdout
    assert event == type(decode_block(stored.read_bytes())[0].event).__name__
