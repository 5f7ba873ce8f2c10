"""Dataset identity: ``did:odf`` identifiers and the ed25519 key pairs behind them.

A dataset's id is derived from a public key, so whoever holds the private key can prove ownership
without any central registry. ODF writes the key as ``did:odf:`` + base16 multibase; ``did:key`` is the
same bytes in base58btc, kept here so ids can be handed to tools that only speak ``did:key``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multicodec, multibase_decode, multibase_encode

DID_ODF_PREFIX = "did:odf:"
DID_KEY_PREFIX = "did:key:"

_ED25519_PREFIX = Multicodec.ED25519_PUB.varint  # b"\xed\x01"
_ED25519_KEY_SIZE = 32


@dataclass(frozen=True, slots=True, order=True)
class DatasetId:
    """A dataset's globally unique id: ``varint(0xed)`` followed by a 32-byte ed25519 public key.

    The prefixed bytes are stored as-is because that is exactly what the FlatBuffers ``Seed`` and
    ``ExecuteTransform`` tables hold; both text forms are computed from them on demand.
    """

    data: bytes

    def __post_init__(self) -> None:
        problem = _key_bytes_problem(self.data)
        if problem:
            raise InvalidValueError(f"invalid dataset id bytes: {problem}")

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        return cls(bytes(data))

    @classmethod
    def from_public_key_bytes(cls, key: bytes) -> Self:
        """Build an id from a raw 32-byte ed25519 public key."""
        if len(key) != _ED25519_KEY_SIZE:
            raise InvalidValueError(f"an ed25519 public key is {_ED25519_KEY_SIZE} bytes, got {len(key)}")
        return cls(_ED25519_PREFIX + bytes(key))

    @classmethod
    def from_public_key(cls, key: Ed25519PublicKey) -> Self:
        return cls.from_public_key_bytes(key.public_bytes_raw())

    @classmethod
    def from_did_str(cls, text: str) -> Self:
        """Parse ``did:odf:<multibase>``; base16 in either case and base58btc are accepted."""
        return cls._parse_did(text, DID_ODF_PREFIX)

    @classmethod
    def from_did_key(cls, text: str) -> Self:
        """Parse the W3C ``did:key:z...`` form of the same key."""
        return cls._parse_did(text, DID_KEY_PREFIX)

    @classmethod
    def _parse_did(cls, text: str, prefix: str) -> Self:
        if not text.startswith(prefix):
            raise InvalidValueError(f"invalid dataset id {text!r}: expected it to start with '{prefix}'")
        try:
            data = multibase_decode(text[len(prefix) :])
        except InvalidValueError as e:
            raise InvalidValueError(f"invalid dataset id {text!r}: {e}") from None
        problem = _key_bytes_problem(data)
        if problem:
            raise InvalidValueError(f"invalid dataset id {text!r}: {problem}")
        return cls(data)

    def as_bytes(self) -> bytes:
        return self.data

    @property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte ed25519 key, without the multicodec prefix."""
        return self.data[len(_ED25519_PREFIX) :]

    def public_key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.public_key_bytes)

    def as_did_str(self) -> str:
        """The canonical form, written into manifests and blocks: lower-case base16."""
        return DID_ODF_PREFIX + multibase_encode(self.data, "base16")

    def as_did_key(self) -> str:
        return DID_KEY_PREFIX + multibase_encode(self.data, "base58btc")

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True when ``signature`` is this dataset's key signing ``data``."""
        try:
            self.public_key().verify(signature, data)
        except InvalidSignature:
            return False
        return True

    def __str__(self) -> str:
        return self.as_did_str()

    def __repr__(self) -> str:
        return f"DatasetId({self.as_did_str()!r})"


def _key_bytes_problem(data: bytes) -> str | None:
    """Why ``data`` is not ``varint(ed25519-pub) + 32-byte key``, or None if it is."""
    if not isinstance(data, bytes):
        return f"expected bytes, got {type(data).__name__}"
    if not data.startswith(_ED25519_PREFIX):
        return f"expected the ed25519-pub multicodec prefix 'ed01', got {data[:2].hex()!r}"
    size = len(data) - len(_ED25519_PREFIX)
    if size != _ED25519_KEY_SIZE:
        return f"expected a {_ED25519_KEY_SIZE}-byte ed25519 public key, got {size} bytes"
    return None


@dataclass(frozen=True, slots=True, eq=False)
class DatasetKeyPair:
    """The private key that owns a dataset.

    Compared by identity and kept out of ``repr`` so a key never ends up in a log line or a plan diff.
    """

    private_key: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def generate(cls) -> Self:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, pem: bytes) -> Self:
        """Load an unencrypted PKCS#8 PEM ed25519 private key."""
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as e:
            raise InvalidValueError(f"invalid dataset private key: {e}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise InvalidValueError(
                f"invalid dataset private key: expected an ed25519 key, got {type(key).__name__}"
            )
        return cls(key)

    def to_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def dataset_id(self) -> DatasetId:
        return DatasetId.from_public_key(self.private_key.public_key())

    def sign(self, data: bytes) -> bytes:
        return self.private_key.sign(data)


def generate_dataset_id() -> tuple[DatasetId, bytes]:
    """Create a new dataset identity; returns the id and its private key as PKCS#8 PEM to store."""
    pair = DatasetKeyPair.generate()
    return pair.dataset_id, pair.to_pem()


def load_private_key(pem: bytes) -> DatasetKeyPair:
    return DatasetKeyPair.from_pem(pem)
