"""Multiformats as ODF uses them: unsigned varints, multicodec codes, multibase and multihash.

ODF identifies every hash and key by a self-describing prefix (a multicodec code written as an unsigned
varint), so a reader never has to guess the algorithm from context. Only the handful of codes and the two
bases the spec relies on are supported; anything else is rejected rather than carried along opaquely,
because an unknown code in a metadata chain is far more likely to be corruption than a new algorithm.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal, Self

from odfproj.errors import InvalidValueError

# A varint longer than this cannot encode a 63-bit value, which is all multiformats allow.
_MAX_VARINT_BYTES = 9
_MAX_VARINT_VALUE = (1 << 63) - 1


def encode_varint(value: int) -> bytes:
    """Encode ``value`` as an unsigned LEB128 varint, the framing every multiformat prefix uses."""
    if not 0 <= value <= _MAX_VARINT_VALUE:
        raise InvalidValueError(f"invalid varint value {value}: must be between 0 and 2^63-1")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode one unsigned varint at ``offset``; return ``(value, offset just past it)``.

    Non-minimal encodings (e.g. ``80 00`` for zero) are rejected as the multiformats spec requires: a
    value must have exactly one byte representation, otherwise equal hashes could compare unequal.
    """
    value = 0
    for i in range(_MAX_VARINT_BYTES):
        pos = offset + i
        if pos >= len(data):
            raise InvalidValueError("invalid varint: data ends in the middle of it")
        byte = data[pos]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if byte == 0 and i > 0:
                raise InvalidValueError("invalid varint: it is not minimally encoded")
            return value, pos + 1
    raise InvalidValueError(f"invalid varint: longer than {_MAX_VARINT_BYTES} bytes")


class Multicodec(IntEnum):
    """The multicodec codes that appear in ODF data."""

    SHA3_256 = 0x16
    ED25519_PUB = 0xED
    ARROW0_SHA3_256 = 0x300016
    ODF_METADATA_BLOCK = 0x400000

    @property
    def varint(self) -> bytes:
        """The code as it is written in front of the value it describes."""
        return encode_varint(self.value)


# --- multibase ---------------------------------------------------------------------------------------

_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {c: i for i, c in enumerate(_BASE58_ALPHABET)}
_HEX_RE = re.compile(r"[0-9a-fA-F]*")

Multibase = Literal["base16", "base58btc"]


def base58btc_encode(data: bytes) -> str:
    """Bitcoin-alphabet base58; leading zero bytes become leading ``1`` characters."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    number = int.from_bytes(data, "big")
    digits: list[str] = []
    while number:
        number, rem = divmod(number, 58)
        digits.append(_BASE58_ALPHABET[rem])
    return "1" * zeros + "".join(reversed(digits))


def base58btc_decode(text: str) -> bytes:
    """Inverse of :func:`base58btc_encode`; raises on characters outside the bitcoin alphabet."""
    number = 0
    for i, char in enumerate(text):
        digit = _BASE58_INDEX.get(char)
        if digit is None:
            raise InvalidValueError(f"character {char!r} at position {i} is not valid base58btc")
        number = number * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def multibase_encode(data: bytes, base: Multibase = "base16") -> str:
    """Encode with a multibase prefix. ODF writes lower-case base16 (RFC-012); base58btc is for ``did:key``."""
    if base == "base16":
        return "f" + data.hex()
    if base == "base58btc":
        return "z" + base58btc_encode(data)
    raise InvalidValueError(f"unsupported multibase {base!r}: expected 'base16' or 'base58btc'")


def multibase_decode(text: str) -> bytes:
    """Decode base16 (``f``/``F``, digits in either case) or base58btc (``z``) multibase text.

    Reading is lenient about hex case because users paste hashes from tools that upper-case them;
    writing is always lower-case so that equal values always print identically.
    """
    if not text:
        raise InvalidValueError("empty multibase string")
    prefix, body = text[0], text[1:]
    if prefix in "fF":
        if not _HEX_RE.fullmatch(body):
            raise InvalidValueError("base16 multibase contains characters other than 0-9, a-f")
        if len(body) % 2:
            raise InvalidValueError("base16 multibase has an odd number of digits")
        return bytes.fromhex(body)
    if prefix == "z":
        return base58btc_decode(body)
    raise InvalidValueError(
        f"unsupported multibase prefix {prefix!r}: expected 'f' (base16) or 'z' (base58btc)"
    )


# --- multihash ---------------------------------------------------------------------------------------

# Hash functions ODF uses, with the digest length each one must have.
_DIGEST_SIZES: dict[Multicodec, int] = {
    Multicodec.SHA3_256: 32,
    Multicodec.ARROW0_SHA3_256: 32,
}


@dataclass(frozen=True, slots=True, order=True)
class Multihash:
    """A digest tagged with the hash function that produced it.

    Frozen so it can key dicts and sets (block hashes are looked up constantly); ordering compares the
    code, then the digest bytes, which gives a stable, if meaningless, sort order for output.
    """

    code: int
    digest: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.code, int) or isinstance(self.code, bool):
            raise InvalidValueError(f"multihash code must be an int, not {type(self.code).__name__}")
        try:
            code = Multicodec(self.code)
        except ValueError:
            raise InvalidValueError(
                f"unsupported multihash code 0x{self.code:x}: expected sha3-256 (0x16) "
                "or arrow0-sha3-256 (0x300016)"
            ) from None
        size = _DIGEST_SIZES.get(code)
        if size is None:
            raise InvalidValueError(f"multicodec {code.name.lower()} is not a hash function")
        if not isinstance(self.digest, bytes):
            raise InvalidValueError(f"multihash digest must be bytes, not {type(self.digest).__name__}")
        if len(self.digest) != size:
            raise InvalidValueError(
                f"invalid {code.name.lower()} digest: expected {size} bytes, got {len(self.digest)}"
            )
        object.__setattr__(self, "code", code)

    @classmethod
    def sha3_256(cls, data: bytes) -> Self:
        """The hash ODF uses for blocks, checkpoints and physical data files."""
        return cls(Multicodec.SHA3_256, hashlib.sha3_256(data).digest())

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Parse the binary form ``varint(code) varint(length) digest`` stored in FlatBuffers."""
        try:
            code, pos = decode_varint(data)
            length, pos = decode_varint(data, pos)
        except InvalidValueError as e:
            raise InvalidValueError(f"invalid multihash bytes {data.hex()!r}: {e}") from None
        if len(data) - pos != length:
            raise InvalidValueError(
                f"invalid multihash bytes {data.hex()!r}: header says the digest is {length} bytes "
                f"but {len(data) - pos} follow"
            )
        return cls(code, bytes(data[pos:]))

    @classmethod
    def from_multibase(cls, text: str) -> Self:
        """Parse the text form (``f1620...``) used in YAML, file names and the CLI."""
        try:
            return cls.from_bytes(multibase_decode(text))
        except InvalidValueError as e:
            raise InvalidValueError(f"invalid multihash {text!r}: {_strip_prefix(str(e))}") from None

    def to_bytes(self) -> bytes:
        return encode_varint(self.code) + encode_varint(len(self.digest)) + self.digest

    def to_multibase(self) -> str:
        """Lower-case base16, the one canonical text form (so hashes compare as strings too)."""
        return multibase_encode(self.to_bytes(), "base16")

    def short(self) -> str:
        """Eight hex characters for humans. Taken from the tail: the head is the constant prefix (RFC-002)."""
        return self.to_multibase()[-8:]

    def __str__(self) -> str:
        return self.to_multibase()

    def __repr__(self) -> str:
        return f"Multihash({self.to_multibase()!r})"


def _strip_prefix(message: str) -> str:
    """Drop an inner ``invalid multihash bytes '...': `` so the outer message names the user's text once."""
    head = "invalid multihash bytes "
    if message.startswith(head):
        _, _, rest = message.partition(": ")
        return rest
    return message
