"""Metadata blocks between their three forms: model object, YAML manifest, stored binary manifest."""

from __future__ import annotations

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import SUPPORTED_BLOCK_VERSIONS, block_hash, decode_block, encode_block
from odfproj.odf.multiformats import Multihash
from odfproj.odf.yaml_codec import parse_manifest, write_manifest


def block_from_yaml(text: str | bytes, version: int | None = None) -> tuple[model.MetadataBlock, int]:
    """Parse a MetadataBlock YAML manifest; ``version`` overrides the envelope's binary layout version."""
    block, envelope_version = parse_manifest(text, expected_kind="MetadataBlock")
    version = version or envelope_version
    if version not in SUPPORTED_BLOCK_VERSIONS:
        raise InvalidValueError(f"unsupported block version {version} (supported: 2, 3)")
    return block, version


def yaml_to_binary(text: str | bytes, version: int | None = None) -> bytes:
    block, version = block_from_yaml(text, version)
    return encode_block(block, version=version)


def hash_of_yaml(text: str | bytes, version: int | None = None) -> Multihash:
    return block_hash(yaml_to_binary(text, version))


def binary_to_yaml(data: bytes) -> str:
    block, version = decode_block(data)
    return write_manifest(block, version)


__all__ = [
    "SerializationError",
    "binary_to_yaml",
    "block_from_yaml",
    "hash_of_yaml",
    "yaml_to_binary",
]
