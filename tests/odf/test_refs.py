"""Dataset names, aliases and references against the spec's PEG grammar and its examples."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.errors import InvalidValueError
from odfproj.odf.identity import DatasetId
from odfproj.odf.refs import (
    AccountName,
    DatasetAlias,
    DatasetAliasRemote,
    DatasetIdRemote,
    DatasetName,
    DatasetUrl,
    RepoName,
    parse_dataset_ref,
    parse_dataset_ref_any,
    parse_dataset_ref_remote,
)

DID = "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"

_word = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=6
)
_subdomain = st.lists(_word, min_size=1, max_size=3).map("-".join)
hostnames = st.lists(_subdomain, min_size=1, max_size=4).map(".".join)


# --- names ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "cities",
        "property.parcel-polygons",
        "admin0.countries.10m",
        "census.2016.population",
        "public-safety.ems-incident-dispatch",
        "ca.bankofcanada.exchange-rates.daily",
        "a",
        "0",
        "a-b-c.d-e",
        "NY-NewYork",
    ],
)
def test_valid_dataset_names(text: str) -> None:
    assert str(DatasetName.parse(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must not be empty"),
        ("foo_bar", "character '_' at position 3 is not allowed"),
        ("foo bar", "character ' ' at position 3 is not allowed"),
        ("foo/bar", "character '/' at position 3 is not allowed"),
        ("naïve", "character 'ï' at position 2 is not allowed"),
        (".foo", "empty part"),
        ("foo.", "empty part"),
        ("foo..bar", "empty part"),
        ("-foo", "part '-foo' is malformed"),
        ("foo-", "part 'foo-' is malformed"),
        ("foo--bar", "part 'foo--bar' is malformed"),
        ("a.-b.c", "part '-b' is malformed"),
    ],
)
def test_invalid_dataset_names_say_why(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message) as info:
        DatasetName.parse(text)
    assert str(info.value).startswith(f"invalid dataset name {text!r}: ")


def test_name_kinds_have_their_own_message() -> None:
    with pytest.raises(InvalidValueError, match=r"^invalid account name 'a_b'"):
        AccountName("a_b")
    with pytest.raises(InvalidValueError, match=r"^invalid repository name 'a_b'"):
        RepoName("a_b")


def test_names_compare_and_hash_case_insensitively_but_keep_their_spelling() -> None:
    a, b = DatasetName("NY-NewYork"), DatasetName("ny-newyork")
    assert a == b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert str(a) == "NY-NewYork"
    assert repr(a) == "DatasetName('NY-NewYork')"
    assert a != DatasetName("ny-newyork2")


def test_names_of_different_kinds_or_plain_strings_are_not_equal() -> None:
    assert DatasetName("a") != AccountName("a")
    assert DatasetName("a") != "a"
    assert len({DatasetName("a"), AccountName("a"), RepoName("a")}) == 3


def test_names_sort_case_insensitively() -> None:
    names = [DatasetName(n) for n in ["b", "A", "c", "a"]]
    assert [str(n) for n in sorted(names)] == ["A", "a", "b", "c"]


def test_names_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DatasetName("a").value = "b"  # type: ignore[misc]


@given(hostnames)
def test_generated_hostnames_are_valid_names(text: str) -> None:
    name = DatasetName.parse(text)
    assert str(name) == text
    assert DatasetName.parse(text.upper()) == name == DatasetName.parse(text.lower())


@given(st.text(max_size=12))
def test_any_text_is_either_a_name_or_rejected_cleanly(text: str) -> None:
    try:
        name = DatasetName.parse(text)
    except InvalidValueError as e:
        assert repr(text) in str(e)
    else:
        assert str(name) == text


# --- aliases --------------------------------------------------------------------------------------------


def test_alias_without_account() -> None:
    alias = DatasetAlias.parse("cities")
    assert alias == DatasetAlias(None, DatasetName("cities"))
    assert str(alias) == "cities"


def test_alias_with_account() -> None:
    alias = DatasetAlias.parse("statcan.gc.ca/census.2016.population")
    assert alias.account == AccountName("statcan.gc.ca")
    assert alias.name == DatasetName("census.2016.population")
    assert str(alias) == "statcan.gc.ca/census.2016.population"


def test_aliases_compare_case_insensitively() -> None:
    assert DatasetAlias.parse("NY-NewYork/Foo") == DatasetAlias.parse("ny-newyork/foo")
    assert hash(DatasetAlias.parse("NY-NewYork/Foo")) == hash(DatasetAlias.parse("ny-newyork/foo"))
    assert DatasetAlias.parse("a/foo") != DatasetAlias.parse("foo")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a/b/c", "invalid dataset alias 'a/b/c': expected 'name' or 'account/name'"),
        ("a/", "invalid dataset alias 'a/': dataset name '': must not be empty"),
        ("/b", "invalid dataset alias '/b': account name '': must not be empty"),
        ("acc/foo_bar", "invalid dataset alias 'acc/foo_bar': dataset name 'foo_bar': character '_'"),
        ("foo_bar", "invalid dataset alias 'foo_bar': character '_' at position 3"),
    ],
)
def test_invalid_aliases_name_the_text_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        DatasetAlias.parse(text)
    assert str(info.value).startswith(message)


@given(st.one_of(st.none(), hostnames), hostnames)
def test_alias_round_trips_through_text(account: str | None, name: str) -> None:
    alias = DatasetAlias(AccountName(account) if account else None, DatasetName(name))
    assert DatasetAlias.parse(str(alias)) == alias
    assert str(DatasetAlias.parse(str(alias))) == str(alias)


def test_remote_alias() -> None:
    alias = DatasetAliasRemote.parse("data.gov/ny-newyork/public-safety.ems-incident-dispatch")
    assert alias.repo == RepoName("data.gov")
    assert alias.account == AccountName("ny-newyork")
    assert alias.name == DatasetName("public-safety.ems-incident-dispatch")
    assert alias.local_alias() == DatasetAlias.parse("ny-newyork/public-safety.ems-incident-dispatch")
    assert alias.as_local_alias() is None
    assert str(alias) == "data.gov/ny-newyork/public-safety.ems-incident-dispatch"


def test_remote_alias_can_be_reread_as_a_local_multi_tenant_alias() -> None:
    remote = DatasetAliasRemote.parse("statcan.gc.ca/census.2016.population")
    assert remote.account is None
    assert remote.as_local_alias() == DatasetAlias.parse("statcan.gc.ca/census.2016.population")


def test_remote_alias_needs_a_repo() -> None:
    with pytest.raises(InvalidValueError, match="expected 'repo/name' or 'repo/account/name'"):
        DatasetAliasRemote.parse("cities")


# --- references -----------------------------------------------------------------------------------------


def test_dataset_ref_id_or_alias() -> None:
    assert parse_dataset_ref(DID) == DatasetId.from_did_str(DID)
    assert parse_dataset_ref("cities") == DatasetAlias.parse("cities")
    assert parse_dataset_ref("ny-newyork/cities") == DatasetAlias.parse("ny-newyork/cities")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a/b/c", "invalid dataset reference 'a/b/c': expected 'name' or 'account/name'"),
        ("foo_bar", "invalid dataset reference 'foo_bar': character '_'"),
        ("did:odf:fed01", "invalid dataset id 'did:odf:fed01': expected a 32-byte ed25519 public key"),
        ("https://x.org/a", "invalid dataset reference 'https://x.org/a': "),
        ("", "invalid dataset reference '': must not be empty"),
    ],
)
def test_invalid_dataset_refs(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        parse_dataset_ref(text)
    assert str(info.value).startswith(message)


def test_dataset_ref_rejects_non_strings() -> None:
    with pytest.raises(InvalidValueError, match="expected a string, got int"):
        parse_dataset_ref(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DID, DatasetId.from_did_str(DID)),
        (f"kamu.dev/{DID}", DatasetIdRemote(RepoName("kamu.dev"), DatasetId.from_did_str(DID))),
        (
            "statcan.gc.ca/census.2016.population",
            DatasetAliasRemote(RepoName("statcan.gc.ca"), None, DatasetName("census.2016.population")),
        ),
        (
            "data.gov/ny-newyork/public-safety.ems-incident-dispatch",
            DatasetAliasRemote(
                RepoName("data.gov"),
                AccountName("ny-newyork"),
                DatasetName("public-safety.ems-incident-dispatch"),
            ),
        ),
        (
            "https://opendata.ca/odf/census-2016-population/",
            DatasetUrl("https://opendata.ca/odf/census-2016-population/"),
        ),
        (
            "ipfs://bafkreie3hfshd4ikinnbio3kewo2hvj6doh5jp3p23iwk2evgo2un5g7km/",
            DatasetUrl("ipfs://bafkreie3hfshd4ikinnbio3kewo2hvj6doh5jp3p23iwk2evgo2un5g7km/"),
        ),
        ("git+ssh://host/repo", DatasetUrl("git+ssh://host/repo")),
    ],
)
def test_remote_refs_from_the_spec(text: str, expected: object) -> None:
    ref = parse_dataset_ref_remote(text)
    assert ref == expected
    assert str(ref) == text


def test_url_scheme() -> None:
    assert DatasetUrl("git+ssh://host/repo").scheme == "git+ssh"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cities", "expected 'repo/[account/]name', '[repo/]did:odf:...' or a URL"),
        ("a/b/c/d", "expected 'repo/name' or 'repo/account/name'"),
        ("bad_repo/x", "repository name 'bad_repo': character '_'"),
        ("repo/did:odf:fzz", "invalid dataset id 'did:odf:fzz'"),
    ],
)
def test_invalid_remote_refs(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=re.escape(message)):
        parse_dataset_ref_remote(text)


@pytest.mark.parametrize(
    "url",
    ["http://", "ht_tp://x", "a++b://x", "https://a\nb", "no-scheme"],
)
def test_invalid_urls(url: str) -> None:
    with pytest.raises(InvalidValueError, match="invalid dataset URL"):
        DatasetUrl(url)


def test_ref_any_follows_the_ordered_choice() -> None:
    # A bare name matches no remote alternative, so it falls through to DatasetRef.
    assert parse_dataset_ref_any("cities") == DatasetAlias.parse("cities")
    # `a/b` matches DatasetAliasRemote first: the grammar reads it as repo/name.
    assert parse_dataset_ref_any("a/b") == DatasetAliasRemote.parse("a/b")
    assert parse_dataset_ref_any("a/b/c") == DatasetAliasRemote.parse("a/b/c")
    assert parse_dataset_ref_any(DID) == DatasetId.from_did_str(DID)
    assert parse_dataset_ref_any(f"r/{DID}") == DatasetIdRemote(RepoName("r"), DatasetId.from_did_str(DID))
    assert parse_dataset_ref_any("https://x.org/y") == DatasetUrl("https://x.org/y")


@pytest.mark.parametrize("text", ["a/b/c/d", "foo_bar", "a/foo_bar", ""])
def test_ref_any_errors_are_about_a_dataset_reference(text: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        parse_dataset_ref_any(text)
    assert str(info.value).startswith(f"invalid dataset reference {text!r}: ")


@given(st.one_of(st.none(), hostnames), hostnames, hostnames)
def test_remote_alias_round_trips_through_any(account: str | None, repo: str, name: str) -> None:
    alias = DatasetAliasRemote(RepoName(repo), AccountName(account) if account else None, DatasetName(name))
    assert parse_dataset_ref_any(str(alias)) == alias
