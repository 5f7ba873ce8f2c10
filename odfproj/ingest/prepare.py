"""The prepare phase of polling ingestion: turn a fetched file into one the read step understands.

Each ``PrepStep`` reads one file and writes a new one in ``work_dir``; the fetched file itself is
never changed (it may be the user's own file). Everything is streamed in chunks or through pipes,
so a multi-gigabyte download never has to fit in memory. Intermediate files are removed as soon as
the next step has consumed them; the final one is the caller's to delete (``PreparedFile.temporary``).

``Decompress``
    ``Gzip``: the single member stream. ``Zip``: the one file entry (``__MACOSX/`` junk ignored), or
    the one entry whose name matches ``subPath`` (a glob, ``*`` also crossing ``/``); several
    candidates are an error rather than a silent choice.
``Pipe``
    ``command`` is run directly (no shell) with the file on stdin; stdout becomes the new file. The
    program is looked up on ``environ["PATH"]`` and gets ``environ`` as its environment.
"""

from __future__ import annotations

import fnmatch
import gzip
import os
import secrets
import shutil
import subprocess
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from odfproj.ingest.errors import PrepareError, last_stderr_line, one_line, source_label
from odfproj.odf import model

__all__ = ["PreparedFile", "prepare"]

_CHUNK = 1 << 20
_ZIP_JUNK_PREFIX = "__MACOSX/"


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedFile:
    """The file to hand to the read step."""

    path: Path
    #: ``True`` when ``path`` was written by a prepare step (delete it after the commit); ``False``
    #: when there were no steps and ``path`` is the fetched file itself.
    temporary: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    label: str
    display_name: str
    work_dir: Path
    environ: Mapping[str, str]

    def new_file(self, prefix: str) -> Path:
        return self.work_dir / f"{prefix}-{secrets.token_hex(6)}"


def prepare(
    steps: Sequence[model.PrepStep] | None,
    fetched: Path,
    *,
    dataset: str,
    source: str,
    display_name: str,
    work_dir: Path,
    environ: Mapping[str, str],
) -> PreparedFile:
    """Apply ``steps`` in order to ``fetched``; ``display_name`` (URL, path) names it in errors."""
    ctx = _Context(
        label=source_label(dataset, source),
        display_name=display_name,
        work_dir=Path(work_dir),
        environ=environ,
    )
    current = fetched
    for step in steps or ():
        ctx.work_dir.mkdir(parents=True, exist_ok=True)
        produced = _apply(step, current, ctx)
        if current != fetched:
            current.unlink(missing_ok=True)
        current = produced
    return PreparedFile(path=current, temporary=current != fetched)


def _apply(step: model.PrepStep, source: Path, ctx: _Context) -> Path:
    match step:
        case model.PrepStepDecompress(format=model.CompressionFormat.Gzip):
            return _gunzip(source, ctx)
        case model.PrepStepDecompress(format=model.CompressionFormat.Zip):
            return _unzip(source, step.sub_path, ctx)
        case model.PrepStepPipe():
            return _pipe(step.command, source, ctx)
    raise PrepareError(f"{ctx.label}: prepare step {step!r} is not supported by odfproj")


# ---------------------------------------------------------------------------------------------
# Decompress


def _gunzip(source: Path, ctx: _Context) -> Path:
    def write(out: BinaryIO) -> None:
        with gzip.open(source, "rb") as data:
            shutil.copyfileobj(data, out, _CHUNK)

    try:
        return _write_new(ctx, "gunzip", write)
    except (OSError, EOFError, zlib.error) as e:
        raise PrepareError(
            f"{ctx.label}: cannot decompress {ctx.display_name} as gzip: {one_line(str(e))}"
        ) from None


def _unzip(source: Path, sub_path: str | None, ctx: _Context) -> Path:
    where = f"{ctx.label}: cannot decompress {ctx.display_name} as zip"
    try:
        with zipfile.ZipFile(source) as archive:
            entry = _zip_entry(archive, sub_path, where)

            def write(out: BinaryIO) -> None:
                with archive.open(entry) as data:
                    shutil.copyfileobj(data, out, _CHUNK)

            return _write_new(ctx, "unzip", write)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, NotImplementedError) as e:
        raise PrepareError(f"{where}: {one_line(str(e))}") from None


def _zip_entry(archive: zipfile.ZipFile, sub_path: str | None, where: str) -> zipfile.ZipInfo:
    """The one entry to extract; ambiguity is an error, because a silent choice hides data loss."""
    files = [i for i in archive.infolist() if not i.is_dir() and not i.filename.startswith(_ZIP_JUNK_PREFIX)]
    if sub_path is None:
        if len(files) == 1:
            return files[0]
        if not files:
            raise PrepareError(f"{where}: the archive holds no files")
        raise PrepareError(
            f"{where}: the archive holds {len(files)} files ({_names(files)}); set subPath to choose one"
        )
    pattern = sub_path.removeprefix("./")
    matched = [i for i in files if fnmatch.fnmatchcase(i.filename, pattern)]
    if len(matched) == 1:
        return matched[0]
    if not matched:
        raise PrepareError(
            f"{where}: no file in the archive matches subPath {sub_path!r} (it holds {_names(files)})"
        )
    raise PrepareError(
        f"{where}: subPath {sub_path!r} matches {len(matched)} files ({_names(matched)}); it must match one"
    )


def _names(entries: Sequence[zipfile.ZipInfo], limit: int = 5) -> str:
    names = [e.filename for e in entries[:limit]]
    more = len(entries) - limit
    return ", ".join(names) + (f" and {more} more" if more > 0 else "") if names else "nothing"


# ---------------------------------------------------------------------------------------------
# Pipe


def _pipe(command: Sequence[str], source: Path, ctx: _Context) -> Path:
    if not command:
        raise PrepareError(f"{ctx.label}: prepare step Pipe has an empty command")
    name = command[0]
    executable = shutil.which(name, path=ctx.environ.get("PATH", os.defpath))
    if executable is None:
        raise PrepareError(
            f"{ctx.label}: prepare step Pipe: command {name!r} not found (is it installed and on PATH?)"
        )
    stderr_path = ctx.new_file("pipe-stderr")
    returncode = 0

    def write(out: BinaryIO) -> None:
        nonlocal returncode
        with open(source, "rb") as data, open(stderr_path, "wb") as stderr:
            returncode = subprocess.run(
                list(command),
                executable=executable,
                stdin=data,
                stdout=out,
                stderr=stderr,
                env=dict(ctx.environ),
                check=False,
            ).returncode
        if returncode != 0:
            raise _PipeFailed

    try:
        return _write_new(ctx, "pipe", write)
    except _PipeFailed:
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
        raise PrepareError(
            f"{ctx.label}: prepare step Pipe {name!r} {how} on {ctx.display_name}: "
            f"{last_stderr_line(stderr_path)}"
        ) from None
    except OSError as e:
        raise PrepareError(
            f"{ctx.label}: prepare step Pipe: cannot run {name!r}: {one_line(str(e))}"
        ) from None
    finally:
        stderr_path.unlink(missing_ok=True)


class _PipeFailed(Exception):
    """Internal signal: the command failed, so ``_write_new`` must discard its output."""


# ---------------------------------------------------------------------------------------------


def _write_new(ctx: _Context, prefix: str, write: Callable[[BinaryIO], None]) -> Path:
    """Create a new file in ``work_dir`` through a ``.part`` name: a failed step leaves nothing behind."""
    target = ctx.new_file(prefix)
    part = target.with_name(target.name + ".part")
    try:
        with open(part, "xb") as out:
            write(out)
        os.replace(part, target)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return target
