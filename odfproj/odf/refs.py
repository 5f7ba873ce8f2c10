"""Dataset names, aliases and references, following the PEG grammar in the spec's "Aliases and References".

Names are case-insensitive for lookups but keep the spelling the user chose, so they are small value
types instead of plain ``str``: a ``str`` subclass with a case-insensitive ``__eq__`` would hash
differently from the equal plain string and corrupt any dict that mixes the two.

Ambiguity: the grammar reads ``a/b`` as ``account/name`` in ``DatasetRef`` but as ``repo/name`` in
``DatasetRefRemote``. :func:`parse_dataset_ref_any` follows the grammar's ordered choice literally, so
``a/b`` there is a :class:`DatasetAliasRemote`; a caller that knows it is in a local, multi-tenant
context should call :func:`parse_dataset_ref` instead (or :meth:`DatasetAliasRemote.as_local_alias`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Self, TypeAlias, TypeVar

from odfproj.errors import InvalidValueError
from odfproj.odf.identity import DID_ODF_PREFIX, DatasetId

_SUBDOMAIN_RE = re.compile(r"[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*")
_SCHEME_RE = re.compile(r"[a-zA-Z0-9]+(?:\+[a-zA-Z0-9]+)*")
_ALLOWED_CHARS = "letters a-z, digits, '-' and '.'"

_N = TypeVar("_N", bound="_Hostname")
_R = TypeVar("_R")


def _hostname_problem(text: str) -> str | None:
    """Why ``text`` is not a ``Hostname`` of the grammar, in words a user can act on; None if it is one."""
    if not isinstance(text, str):
        return f"expected a string, got {type(text).__name__}"
    if not text:
        return "must not be empty"
    for i, char in enumerate(text):
        if not (char.isascii() and (char.isalnum() or char in "-.")):
            return f"character {char!r} at position {i} is not allowed (use {_ALLOWED_CHARS})"
    for part in text.split("."):
        if not part:
            return "empty part: '.' may only sit between two words"
        if not _SUBDOMAIN_RE.fullmatch(part):
            return f"part {part!r} is malformed: '-' may only sit between letters or digits"
    return None


@dataclass(frozen=True, slots=True, eq=False)
class _Hostname:
    """A hostname-shaped name, equal to another of the same kind regardless of case."""

    value: str
    _KIND: ClassVar[str] = "name"

    def __post_init__(self) -> None:
        problem = _hostname_problem(self.value)
        if problem:
            raise InvalidValueError(f"invalid {self._KIND} {self.value!r}: {problem}")

    @classmethod
    def parse(cls, text: str) -> Self:
        return cls(text)

    @property
    def key(self) -> str:
        """The case-folded form used for equality, hashing and sorting."""
        return self.value.lower()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.key == other.key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key))

    def __lt__(self, other: Self) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (self.key, self.value) < (other.key, other.value)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class DatasetName(_Hostname):
    __slots__ = ()
    _KIND = "dataset name"


class AccountName(_Hostname):
    __slots__ = ()
    _KIND = "account name"


class RepoName(_Hostname):
    __slots__ = ()
    _KIND = "repository name"


@dataclass(frozen=True, slots=True)
class DatasetAlias:
    """``[account/]name``: how a dataset is named inside one workspace or node."""

    account: AccountName | None
    name: DatasetName

    @classmethod
    def parse(cls, text: str) -> Self:
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) not in (1, 2):
            raise InvalidValueError(f"invalid dataset alias {text!r}: expected 'name' or 'account/name'")
        *account, name = parts
        return cls(
            _part(AccountName, account[0], text, "dataset alias") if account else None,
            _part(DatasetName, name, text, "dataset alias"),
        )

    def __str__(self) -> str:
        return f"{self.account}/{self.name}" if self.account else str(self.name)


@dataclass(frozen=True, slots=True)
class DatasetAliasRemote:
    """``repo/[account/]name``: a dataset in a named remote repository."""

    repo: RepoName
    account: AccountName | None
    name: DatasetName

    @classmethod
    def parse(cls, text: str) -> Self:
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) not in (2, 3):
            raise InvalidValueError(
                f"invalid remote dataset alias {text!r}: expected 'repo/name' or 'repo/account/name'"
            )
        repo, *account, name = parts
        what = "remote dataset alias"
        return cls(
            _part(RepoName, repo, text, what),
            _part(AccountName, account[0], text, what) if account else None,
            _part(DatasetName, name, text, what),
        )

    def local_alias(self) -> DatasetAlias:
        """The alias the dataset has inside its repository."""
        return DatasetAlias(self.account, self.name)

    def as_local_alias(self) -> DatasetAlias | None:
        """Re-read ``repo/name`` as ``account/name``: the other half of the grammar's ``a/b`` ambiguity."""
        if self.account is not None:
            return None
        return DatasetAlias(AccountName(self.repo.value), self.name)

    def __str__(self) -> str:
        middle = f"{self.account}/" if self.account else ""
        return f"{self.repo}/{middle}{self.name}"


@dataclass(frozen=True, slots=True)
class DatasetIdRemote:
    """``repo/did:odf:...``: a dataset id looked up in a specific remote repository."""

    repo: RepoName
    id: DatasetId

    def __str__(self) -> str:
        return f"{self.repo}/{self.id}"


@dataclass(frozen=True, slots=True)
class DatasetUrl:
    """``scheme://...``: a dataset addressed directly by URL. Only the scheme is validated."""

    url: str

    def __post_init__(self) -> None:
        problem = _url_problem(self.url)
        if problem:
            raise InvalidValueError(f"invalid dataset URL {self.url!r}: {problem}")

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0]

    def __str__(self) -> str:
        return self.url


DatasetRef: TypeAlias = DatasetId | DatasetAlias
DatasetRefRemote: TypeAlias = DatasetId | DatasetIdRemote | DatasetAliasRemote | DatasetUrl
DatasetRefAny: TypeAlias = DatasetRefRemote | DatasetRef


def parse_dataset_ref(text: str) -> DatasetRef:
    """``DatasetRef = DatasetId / DatasetAlias``: what manifests use to name a local input."""
    _check_str(text, "dataset reference")
    if text.startswith(DID_ODF_PREFIX):
        return DatasetId.from_did_str(text)
    return _reword(DatasetAlias.parse, text, "dataset reference")


def parse_dataset_ref_remote(text: str) -> DatasetRefRemote:
    """``DatasetRefRemote = (RepoName "/")? DatasetId / DatasetAliasRemote / Url``."""
    _check_str(text, "remote dataset reference")
    if "://" in text and _SCHEME_RE.fullmatch(text.partition("://")[0]):
        return DatasetUrl(text)
    if text.startswith(DID_ODF_PREFIX):
        return DatasetId.from_did_str(text)
    repo, sep, rest = text.partition("/")
    if sep and rest.startswith(DID_ODF_PREFIX):
        return DatasetIdRemote(
            _part(RepoName, repo, text, "remote dataset reference"), DatasetId.from_did_str(rest)
        )
    if sep:
        return _reword(DatasetAliasRemote.parse, text, "remote dataset reference")
    raise InvalidValueError(
        f"invalid remote dataset reference {text!r}: expected 'repo/[account/]name', "
        "'[repo/]did:odf:...' or a URL"
    )


def parse_dataset_ref_any(text: str) -> DatasetRefAny:
    """``DatasetRefAny = DatasetRefRemote / DatasetRef``, with the grammar's ordered choice.

    So ``a/b`` and ``a/b/c`` are remote aliases here, and a bare ``name`` is a local alias.
    """
    _check_str(text, "dataset reference")
    if "/" in text or "://" in text or text.startswith(DID_ODF_PREFIX):
        return _reword(parse_dataset_ref_remote, text, "dataset reference")
    return parse_dataset_ref(text)


def _check_str(text: object, what: str) -> None:
    if not isinstance(text, str):
        raise InvalidValueError(f"invalid {what}: expected a string, got {type(text).__name__}")


def _part(kind: type[_N], part: str, whole: str, what: str) -> _N:
    """Build one component, blaming the whole reference the user typed when it is malformed."""
    problem = _hostname_problem(part)
    if problem:
        where = "" if part == whole else f"{kind._KIND} {part!r}: "
        raise InvalidValueError(f"invalid {what} {whole!r}: {where}{problem}")
    return kind(part)


def _reword(parse: Callable[[str], _R], text: str, what: str) -> _R:
    """Run ``parse`` and restate its error as one about the kind of reference the caller asked for."""
    try:
        return parse(text)
    except InvalidValueError as e:
        message = str(e)
        prefix = f"invalid {what} {text!r}"
        if message.startswith(prefix):
            raise
        _, _, reason = message.partition(f"{text!r}: ")
        raise InvalidValueError(f"{prefix}: {reason or message}") from None


def _url_problem(url: str) -> str | None:
    if not isinstance(url, str):
        return f"expected a string, got {type(url).__name__}"
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "expected 'scheme://...'"
    if not _SCHEME_RE.fullmatch(scheme):
        return f"scheme {scheme!r} is malformed (letters and digits, optionally joined by '+')"
    if not rest:
        return "nothing follows '://'"
    if "\n" in rest:
        return "it contains a line break"
    return None
