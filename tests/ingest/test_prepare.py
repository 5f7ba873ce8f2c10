"""Prepare steps on real files: gzip and zip archives, and Pipe through real commands."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from odfproj.ingest.errors import PrepareError
from odfproj.ingest.prepare import PreparedFile, prepare
from odfproj.odf import model

GZIP = model.PrepStepDecompress(format=model.CompressionFormat.Gzip)
ENV = {"PATH": os.environ.get("PATH", os.defpath)}


def run(steps: list[model.PrepStep] | None, fetched: Path, tmp_path: Path, environ=None) -> PreparedFile:
    return prepare(
        steps,
        fetched,
        dataset="p.ds",
        source="default",
        display_name="https://example.org/data.bin",
        work_dir=tmp_path / "work",
        environ=ENV if environ is None else environ,
    )


def zip_step(sub_path: str | None = None) -> model.PrepStepDecompress:
    return model.PrepStepDecompress(format=model.CompressionFormat.Zip, sub_path=sub_path)


def pipe(*command: str) -> model.PrepStepPipe:
    return model.PrepStepPipe(command=tuple(command))


def make_zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def work_files(tmp_path: Path) -> list[str]:
    work = tmp_path / "work"
    return sorted(os.listdir(work)) if work.exists() else []


def test_no_steps_returns_the_fetched_file(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("a\n")
    assert run(None, src, tmp_path) == PreparedFile(path=src, temporary=False)
    assert run([], src, tmp_path).path == src


def test_gzip(tmp_path: Path) -> None:
    src = tmp_path / "in.csv.gz"
    src.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    before = src.read_bytes()
    out = run([GZIP], src, tmp_path)
    assert out.temporary and out.path.parent == tmp_path / "work"
    assert out.path.read_bytes() == b"a,b\n1,2\n"
    assert src.read_bytes() == before  # the fetched (maybe the user's) file is untouched


def test_gzip_of_a_large_file_is_streamed(tmp_path: Path) -> None:
    payload = os.urandom(1 << 16) * 64  # 4 MiB, several copy chunks
    src = tmp_path / "big.gz"
    with gzip.open(src, "wb", compresslevel=1) as f:
        f.write(payload)
    out = run([GZIP], src, tmp_path)
    assert hashlib.sha256(out.path.read_bytes()).digest() == hashlib.sha256(payload).digest()


def test_corrupt_gzip(tmp_path: Path) -> None:
    src = tmp_path / "bad.gz"
    src.write_bytes(b"this is not gzip")
    with pytest.raises(PrepareError, match=r"cannot decompress https://example.org/data.bin as gzip") as e:
        run([GZIP], src, tmp_path)
    assert "'p.ds'" in str(e.value) and "'default'" in str(e.value)
    assert work_files(tmp_path) == []


def test_zip_with_one_file(tmp_path: Path) -> None:
    src = make_zip(tmp_path / "a.zip", {"cities500.txt": b"1\tParis\n", "__MACOSX/._cities500.txt": b"junk"})
    assert run([zip_step()], src, tmp_path).path.read_bytes() == b"1\tParis\n"


def test_zip_with_several_files_needs_sub_path(tmp_path: Path) -> None:
    src = make_zip(tmp_path / "a.zip", {"a.csv": b"a", "b.csv": b"b", "docs/readme.txt": b"r"})
    with pytest.raises(PrepareError, match=r"holds 3 files \(a.csv, b.csv, docs/readme.txt\); set subPath"):
        run([zip_step()], src, tmp_path)


def test_zip_sub_path_exact_and_glob(tmp_path: Path) -> None:
    src = make_zip(tmp_path / "a.zip", {"data/a.csv": b"a", "data/b.json": b"b", "readme.txt": b"r"})
    assert run([zip_step("data/b.json")], src, tmp_path).path.read_bytes() == b"b"
    assert run([zip_step("*.csv")], src, tmp_path).path.read_bytes() == b"a"


def test_zip_sub_path_no_match_or_ambiguous(tmp_path: Path) -> None:
    src = make_zip(tmp_path / "a.zip", {"a.csv": b"a", "b.csv": b"b"})
    with pytest.raises(
        PrepareError, match=r"no file in the archive matches subPath 'x\*' \(it holds a.csv, b.csv\)"
    ):
        run([zip_step("x*")], src, tmp_path)
    with pytest.raises(PrepareError, match=r"subPath '\*.csv' matches 2 files"):
        run([zip_step("*.csv")], src, tmp_path)


def test_not_a_zip(tmp_path: Path) -> None:
    src = tmp_path / "a.zip"
    src.write_bytes(b"plain text")
    with pytest.raises(PrepareError, match=r"as zip: File is not a zip file"):
        run([zip_step()], src, tmp_path)


def test_pipe_with_tr(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    out = run([pipe("tr", "a-z", "A-Z")], src, tmp_path)
    assert out.path.read_text() == "HELLO\n"
    assert src.read_text() == "hello\n"


def test_pipe_with_python(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("l1\nskip\nl2\n")
    code = "import sys; sys.stdout.writelines(l for l in sys.stdin if l != 'skip\\n')"
    assert run([pipe(sys.executable, "-c", code)], src, tmp_path).path.read_text() == "l1\nl2\n"


def test_decompress_then_pipe_leaves_only_the_result(tmp_path: Path) -> None:
    src = make_zip(tmp_path / "a.zip", {"data.csv": b"skip me\nOBSERVATIONS\na,b\n"})
    out = run([zip_step(), pipe("sed", "-e", "1,/OBSERVATIONS/d")], src, tmp_path)
    assert out.path.read_bytes() == b"a,b\n"
    assert work_files(tmp_path) == [out.path.name]  # the intermediate unzipped file is gone


def test_failing_command_reports_exit_code_and_last_stderr_line(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    code = "import sys; sys.stderr.write('warming up\\nparse error at line 3\\n\\n'); sys.exit(4)"
    with pytest.raises(PrepareError) as e:
        run([pipe(sys.executable, "-c", code)], src, tmp_path)
    message = str(e.value)
    assert "exited with code 4 on https://example.org/data.bin: parse error at line 3" in message
    assert "'p.ds'" in message and "\n" not in message
    assert work_files(tmp_path) == []


def test_jq_style_failure_with_a_real_tool(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    with pytest.raises(PrepareError, match=r"Pipe 'sed' exited with code \d+ on .*: sed: .*"):
        run([pipe("sed", "-e", "this is not a sed script")], src, tmp_path)


def test_missing_command(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    with pytest.raises(PrepareError, match=r"command 'no-such-tool-xyz' not found"):
        run([pipe("no-such-tool-xyz", "-c")], src, tmp_path)


def test_pipe_uses_the_given_path(tmp_path: Path) -> None:
    """``environ`` decides what runs: a tool outside its PATH is not found even if it exists."""
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = shutil.which("tr")
    assert tool is not None
    (bin_dir / "upper").symlink_to(tool)
    env = {"PATH": str(bin_dir)}
    assert run([pipe("upper", "a-z", "A-Z")], src, tmp_path, environ=env).path.read_text() == "X\n"
    with pytest.raises(PrepareError, match=r"command 'sed' not found"):
        run([pipe("sed", "p")], src, tmp_path, environ=env)


def test_empty_pipe_command(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    with pytest.raises(PrepareError, match=r"empty command"):
        run([pipe()], src, tmp_path)
