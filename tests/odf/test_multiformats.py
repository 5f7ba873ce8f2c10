"""Varints, multibase and multihash, pinned by the "Multiformats and identity" conformance vectors."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import (
    Multicodec,
    Multihash,
    base58btc_decode,
    base58btc_encode,
    decode_varint,
    encode_varint,
    multibase_decode,
    multibase_encode,
)

# From test-vectors/README.md, "Multiformats and identity".
MULTIHASH_HEX = "f162008c3792b2a4deed1bd7ea2328fb5de5531eccf0fbfa04a7d800cdc267137c635"
MULTIHASH_B58 = "zW1a3CNT52HXiJNniLkWMeev3CPRy9QiNRMWGyTrVNg4hY8"


# --- varint ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (0x16, "16"),
        (0xED, "ed01"),
        (0x300016, "9680c001"),
        (0x400000, "80808002"),
        ((1 << 63) - 1, "ffffffffffffffff7f"),
    ],
)
def test_varint_known_encodings(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_arrow0_sha3_256_varint_vector() -> None:
    assert Multicodec.ARROW0_SHA3_256.varint == bytes([0x96, 0x80, 0xC0, 0x01])


@given(st.integers(0, (1 << 63) - 1), st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip_inside_other_bytes(value: int, before: bytes, after: bytes) -> None:
    data = before + encode_varint(value) + after
    assert decode_varint(data, len(before)) == (value, len(data) - len(after))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "ends in the middle"),
        (b"\x80", "ends in the middle"),
        (b"\x80\x00", "not minimally encoded"),
        (b"\xff" * 9 + b"\x01", "longer than 9 bytes"),
    ],
)
def test_varint_decode_rejects_malformed(data: bytes, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        decode_varint(data)


@pytest.mark.parametrize("value", [-1, 1 << 63])
def test_varint_encode_rejects_out_of_range(value: int) -> None:
    with pytest.raises(InvalidValueError, match="between 0 and 2"):
        encode_varint(value)


def test_multicodec_codes() -> None:
    assert Multicodec.SHA3_256 == 0x16
    assert Multicodec.ED25519_PUB == 0xED
    assert Multicodec.ARROW0_SHA3_256 == 0x300016
    assert Multicodec.ODF_METADATA_BLOCK == 0x400000


# --- multibase ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"\0", "1"),
        (b"\0\0\x01", "112"),
        (b"hello world", "StV1DL6CwTryKyV"),
        (bytes.fromhex("0000287fb4cd"), "11233QC4"),
    ],
)
def test_base58btc_known_values(data: bytes, text: str) -> None:
    assert base58btc_encode(data) == text
    assert base58btc_decode(text) == data


@given(st.binary(max_size=64))
def test_base58btc_round_trip(data: bytes) -> None:
    assert base58btc_decode(base58btc_encode(data)) == data


@given(st.binary(max_size=64))
def test_multibase_round_trip_both_bases(data: bytes) -> None:
    assert multibase_decode(multibase_encode(data)) == data
    assert multibase_decode(multibase_encode(data, "base58btc")) == data


def test_multibase_writes_lower_case_base16() -> None:
    assert multibase_encode(b"\xab\xcd") == "fabcd"


@pytest.mark.parametrize("text", ["fABCD", "FABCD", "Fabcd", "fAbCd"])
def test_multibase_reads_base16_in_either_case(text: str) -> None:
    assert multibase_decode(text) == b"\xab\xcd"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty multibase"),
        ("mAAAA", "unsupported multibase prefix 'm'"),
        ("babcd", "unsupported multibase prefix 'b'"),
        ("fabc", "odd number of digits"),
        ("fab cd", "characters other than 0-9, a-f"),
        ("fxyz0", "characters other than 0-9, a-f"),
        ("z0OIl", "not valid base58btc"),
    ],
)
def test_multibase_rejects_malformed(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        multibase_decode(text)


def test_multibase_encode_rejects_unknown_base() -> None:
    with pytest.raises(InvalidValueError, match="unsupported multibase"):
        multibase_encode(b"x", "base64")  # type: ignore[arg-type]


# --- multihash ------------------------------------------------------------------------------------------


def test_sha3_256_vector() -> None:
    h = Multihash.sha3_256(b"multihash")
    assert h.to_multibase() == MULTIHASH_HEX
    assert str(h) == MULTIHASH_HEX
    assert h.short() == "7137c635"
    assert h.code is Multicodec.SHA3_256
    assert h.digest == hashlib.sha3_256(b"multihash").digest()
    assert h.to_bytes()[:2] == b"\x16\x20"


def test_vector_base58btc_and_upper_case_forms_parse_to_the_same_hash() -> None:
    h = Multihash.sha3_256(b"multihash")
    assert multibase_encode(h.to_bytes(), "base58btc") == MULTIHASH_B58
    assert Multihash.from_multibase(MULTIHASH_B58) == h
    assert Multihash.from_multibase(MULTIHASH_HEX.upper()) == h
    assert Multihash.from_multibase("F" + MULTIHASH_HEX[1:]) == h
    assert Multihash.from_multibase(MULTIHASH_HEX) == h


def test_arrow0_logical_hash_prints_with_its_prefix() -> None:
    h = Multihash(Multicodec.ARROW0_SHA3_256, bytes(32))
    assert h.to_multibase().startswith("f9680c00120")
    assert Multihash.from_multibase(h.to_multibase()) == h


@given(
    st.sampled_from([Multicodec.SHA3_256, Multicodec.ARROW0_SHA3_256]), st.binary(min_size=32, max_size=32)
)
def test_multihash_round_trips(code: Multicodec, digest: bytes) -> None:
    h = Multihash(code, digest)
    assert Multihash.from_bytes(h.to_bytes()) == h
    assert Multihash.from_multibase(h.to_multibase()) == h
    assert h.short() == h.to_multibase()[-8:] == digest.hex()[-8:]


def test_multihash_accepts_a_plain_int_code_and_compares_equal() -> None:
    a = Multihash(0x16, bytes(32))
    b = Multihash(Multicodec.SHA3_256, bytes(32))
    assert a == b
    assert hash(a) == hash(b)
    assert a.code is Multicodec.SHA3_256


def test_multihash_is_a_frozen_hashable_orderable_value() -> None:
    a, b = Multihash.sha3_256(b"a"), Multihash.sha3_256(b"b")
    assert len({a, Multihash.sha3_256(b"a"), b}) == 2
    assert sorted([b, a]) == sorted([a, b])
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.digest = b""  # type: ignore[misc]
    assert repr(a) == f"Multihash('{a}')"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "ends in the middle"),
        (b"\x16", "ends in the middle"),
        (b"\x16\x20" + bytes(31), "digest is 32 bytes but 31 follow"),
        (b"\x16\x20" + bytes(33), "digest is 32 bytes but 33 follow"),
        (b"\x16\x10" + bytes(16), "expected 32 bytes, got 16"),
        (b"\x12\x20" + bytes(32), "unsupported multihash code 0x12"),
        (b"\xed\x01\x20" + bytes(32), "not a hash function"),
    ],
)
def test_multihash_from_bytes_rejects_malformed(data: bytes, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        Multihash.from_bytes(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty multibase"),
        ("1620ab", "unsupported multibase prefix '1'"),
        ("f1620", "digest is 32 bytes but 0 follow"),
        (MULTIHASH_HEX[:-2], "digest is 32 bytes but 31 follow"),
    ],
)
def test_multihash_from_multibase_names_the_text(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message) as info:
        Multihash.from_multibase(text)
    assert str(info.value).startswith(f"invalid multihash {text!r}: ")


def test_multihash_rejects_non_bytes_digest_and_non_int_code() -> None:
    with pytest.raises(InvalidValueError, match="must be bytes"):
        Multihash(Multicodec.SHA3_256, "00" * 32)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="must be an int"):
        Multihash("sha3-256", bytes(32))  # type: ignore[arg-type]
