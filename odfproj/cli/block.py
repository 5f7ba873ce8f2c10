"""``odfproj block``: the binary form and hash of single metadata blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from odfproj.cli import metavars
from odfproj.cli.io import in_file, read_input
from odfproj.errors import OdfprojError

app = typer.Typer(
    cls=metavars.Group,
    help="Inspect metadata blocks: hash, encode to and decode from the binary manifest form.",
)

VERSION_HELP = (
    "Binary layout version: 2 (ODF 0.34/0.35 era, the default) or 3 (Timestamp aligned to 4). "
    "Defaults to the version in the YAML envelope."
)


@app.command("hash", cls=metavars.Command)
def hash_(
    file: str = typer.Argument(..., help="A MetadataBlock YAML manifest ('-' for stdin)."),
    version: int | None = typer.Option(None, "--version", min=2, max=3, help=VERSION_HELP),
) -> None:
    """Print the block's hash: SHA3-256 of its binary manifest, as a multibase (base16) multihash."""
    from odfproj.odf import blocks

    data = read_input(file)
    try:
        typer.echo(blocks.hash_of_yaml(data, version).to_multibase())
    except OdfprojError as e:
        raise in_file(file, e) from None


@app.command("encode", cls=metavars.Command)
def encode(
    file: str = typer.Argument(..., help="A MetadataBlock YAML manifest ('-' for stdin)."),
    version: int | None = typer.Option(None, "--version", min=2, max=3, help=VERSION_HELP),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="Write here instead of standard output.", metavar="FILE"
    ),
) -> None:
    """Write the block's binary manifest (the exact bytes that are stored and hashed)."""
    from odfproj.odf import blocks

    text = read_input(file)
    try:
        data = blocks.yaml_to_binary(text, version)
    except OdfprojError as e:
        raise in_file(file, e) from None
    if out is not None:
        out.write_bytes(data)
    elif sys.stdout.isatty():
        raise OdfprojError("refusing to write binary data to a terminal: use -o FILE or a pipe")
    else:
        sys.stdout.buffer.write(data)


@app.command("decode", cls=metavars.Command)
def decode(file: str = typer.Argument(..., help="A binary block file ('-' for stdin).")) -> None:
    """Print a binary block as its YAML manifest."""
    from odfproj.odf import blocks

    data = read_input(file)
    try:
        typer.echo(blocks.binary_to_yaml(data), nl=False)
    except OdfprojError as e:
        raise in_file(file, e) from None
