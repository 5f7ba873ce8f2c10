"""``did:odf`` / ``did:key`` dataset ids and their key pairs."""

from __future__ import annotations

import dataclasses

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st

from odfproj.errors import InvalidValueError
from odfproj.odf.identity import (
    DatasetId,
    DatasetKeyPair,
    generate_dataset_id,
    load_private_key,
)
from odfproj.odf.multiformats import multibase_encode

# From test-vectors/README.md: the same key in both methods.
VECTOR_DID_ODF = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"
VECTOR_DID_KEY = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
VECTOR_KEY = bytes.fromhex("2e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6")
# The example in open-data-fabric.md, "Unique Identifiers".
SPEC_EXAMPLE = "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"


def test_vector_did_odf_to_did_key() -> None:
    dataset_id = DatasetId.from_did_str(VECTOR_DID_ODF)
    assert dataset_id.as_did_key() == VECTOR_DID_KEY
    assert dataset_id.public_key_bytes == VECTOR_KEY


def test_vector_did_key_to_did_odf() -> None:
    dataset_id = DatasetId.from_did_key(VECTOR_DID_KEY)
    assert dataset_id.as_did_str() == VECTOR_DID_ODF
    assert str(dataset_id) == VECTOR_DID_ODF
    assert dataset_id == DatasetId.from_did_str(VECTOR_DID_ODF)


def test_spec_example_parses_and_prints_back() -> None:
    dataset_id = DatasetId.from_did_str(SPEC_EXAMPLE)
    assert dataset_id.as_did_str() == SPEC_EXAMPLE
    assert dataset_id.as_bytes()[:2] == b"\xed\x01"


def test_binary_form_is_varint_ed25519_pub_then_key() -> None:
    dataset_id = DatasetId.from_did_str(VECTOR_DID_ODF)
    assert dataset_id.as_bytes() == b"\xed\x01" + VECTOR_KEY
    assert DatasetId.from_bytes(dataset_id.as_bytes()) == dataset_id
    assert DatasetId.from_public_key_bytes(VECTOR_KEY) == dataset_id
    assert DatasetId.from_public_key(dataset_id.public_key()) == dataset_id


@pytest.mark.parametrize(
    "text",
    [
        "did:odf:F" + VECTOR_DID_ODF[len("did:odf:f") :].upper(),
        "did:odf:f" + VECTOR_DID_ODF[len("did:odf:f") :].upper(),
        "did:odf:" + multibase_encode(b"\xed\x01" + VECTOR_KEY, "base58btc"),
    ],
)
def test_did_odf_accepts_upper_case_base16_and_base58btc(text: str) -> None:
    assert DatasetId.from_did_str(text).as_did_str() == VECTOR_DID_ODF


@given(st.binary(min_size=32, max_size=32))
def test_text_forms_round_trip(key: bytes) -> None:
    dataset_id = DatasetId.from_public_key_bytes(key)
    assert DatasetId.from_did_str(dataset_id.as_did_str()) == dataset_id
    assert DatasetId.from_did_key(dataset_id.as_did_key()) == dataset_id
    assert dataset_id.as_did_str() == dataset_id.as_did_str().lower()
    assert dataset_id.as_did_key().startswith("did:key:z6Mk")


def test_dataset_id_is_a_frozen_hashable_value() -> None:
    a = DatasetId.from_did_str(VECTOR_DID_ODF)
    b = DatasetId.from_did_key(VECTOR_DID_KEY)
    assert {a, b} == {a}
    assert repr(a) == f"DatasetId('{VECTOR_DID_ODF}')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.data = b""  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected it to start with 'did:odf:'"),
        ("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "start with 'did:odf:'"),
        ("DID:ODF:fed01" + "00" * 32, "start with 'did:odf:'"),
        ("did:odf:", "empty multibase"),
        ("did:odf:mZWQB", "unsupported multibase prefix 'm'"),
        ("did:odf:fed01" + "00" * 31, "expected a 32-byte ed25519 public key, got 31 bytes"),
        ("did:odf:fed01" + "00" * 33, "expected a 32-byte ed25519 public key, got 33 bytes"),
        ("did:odf:f1620" + "00" * 32, "ed25519-pub multicodec prefix 'ed01', got '1620'"),
        ("did:odf:fed01" + "0" * 63, "odd number of digits"),
        ("did:odf:fed01" + "zz" * 32, "characters other than 0-9, a-f"),
        ("did:odf:z0OIl", "not valid base58btc"),
    ],
)
def test_bad_did_odf_is_rejected_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message) as info:
        DatasetId.from_did_str(text)
    assert str(info.value).startswith(f"invalid dataset id {text!r}: ")


def test_bad_did_key_is_rejected() -> None:
    with pytest.raises(InvalidValueError, match="start with 'did:key:'"):
        DatasetId.from_did_key(VECTOR_DID_ODF)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "prefix 'ed01', got ''"),
        (b"\xed\x01" + bytes(31), "got 31 bytes"),
        (b"\x16\x20" + bytes(32), "got '1620'"),
    ],
)
def test_bad_binary_form_is_rejected(data: bytes, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        DatasetId.from_bytes(data)


def test_from_public_key_bytes_checks_length() -> None:
    with pytest.raises(InvalidValueError, match="32 bytes, got 33"):
        DatasetId.from_public_key_bytes(bytes(33))


def test_generated_identity_survives_a_pem_round_trip() -> None:
    dataset_id, pem = generate_dataset_id()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    pair = load_private_key(pem)
    assert pair.dataset_id == dataset_id
    assert pair.to_pem() == pem


def test_two_generated_identities_differ() -> None:
    assert generate_dataset_id()[0] != generate_dataset_id()[0]


def test_sign_and_verify() -> None:
    pair = DatasetKeyPair.generate()
    signature = pair.sign(b"block bytes")
    assert pair.dataset_id.verify(signature, b"block bytes")
    assert not pair.dataset_id.verify(signature, b"other bytes")
    assert not DatasetKeyPair.generate().dataset_id.verify(signature, b"block bytes")


def test_key_pair_never_shows_its_key() -> None:
    pair = DatasetKeyPair.generate()
    assert repr(pair) == "DatasetKeyPair()"


def test_load_private_key_rejects_garbage() -> None:
    with pytest.raises(InvalidValueError, match="invalid dataset private key"):
        load_private_key(b"not a pem")


def test_load_private_key_rejects_other_algorithms() -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(InvalidValueError, match="expected an ed25519 key"):
        load_private_key(pem)
