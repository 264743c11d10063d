"""The parameter commitment, format version 1 (docs/commitment.md):

    digest = SHA-256("ledger/v1/params\\n" || JCS(params)), size = len(JCS(params))

written "sha256:" and 64 lower-case hex digits. Version 2, the hiding
commitment (docs/commitment.md section 7), is module hiding; its digest is
written "v2:sha256:" and 64 lower-case hex digits, and a Commitment of
either version says which it is (hiding). Wherever a parameter digest
travels (an entry's params_digest, a request, a consumption) both
spellings are read with parse_params_digest and compared as the whole
text: a version 1 digest never equals a version 2 one.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from .canonical import Domain, canonicalize_value, parse_canonical
from .errors import DomainError, Kind, LedgerError

__all__ = [
    "PARAMS_DOMAIN_SEPARATOR",
    "Commitment",
    "MalformedDigestError",
    "params_digest",
    "params_digest_value",
    "parse_digest",
    "digests_equal",
    "parse_params_digest",
    "params_digests_equal",
]

PARAMS_DOMAIN_SEPARATOR = b"ledger/v1/params\n"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
HIDING_DIGEST_PREFIX = "v2:"


class MalformedDigestError(LedgerError, ValueError):
    """A digest not spelled exactly "sha256:" (or, for a parameter digest,
    "v2:sha256:") and 64 lower-case hex digits."""


@dataclass(frozen=True)
class Commitment:
    """A parameter commitment: the digest, the length of the bytes it
    covers, and those bytes.

    Version 1 (hiding False): digest "sha256:<hex>", canonical the
    canonical parameters (which stay with the workload). Version 2 (hiding
    True, module hiding): digest "v2:sha256:<hex>", canonical the
    field names and commitments, which hold nothing of a value; the values and
    openings are in the Disclosure. A commitment read from an entry
    (Commitment.parse) has canonical b""."""

    digest: str
    size: int
    canonical: bytes
    hiding: bool = False

    @property
    def version(self) -> int:
        return 2 if self.hiding else 1

    @classmethod
    def parse(cls, digest: str, size: int) -> "Commitment":
        """The commitment an entry records (params_digest, params_size), of
        either version. Raises MalformedDigestError."""
        _, hiding = parse_params_digest(digest)
        if type(size) is not int or size < 0:
            raise MalformedDigestError("malformed commitment: the size is not a non-negative integer")
        return cls(digest, size, b"", hiding)

    def matches(self, digest: str, size: int) -> bool:
        """Whether an entry's params_digest and params_size are this
        commitment (the same version, digest and size)."""
        return params_digests_equal(self.digest, digest) and self.size == size


def _commit(canonical: bytes) -> Commitment:
    h = hashlib.sha256(PARAMS_DOMAIN_SEPARATOR)
    h.update(canonical)
    return Commitment("sha256:" + h.hexdigest(), len(canonical), canonical)


def params_digest(data: bytes, domain: Domain = Domain()) -> Commitment:
    """Commit to parameters given as JSON text (bytes). The text must be a
    JSON object inside the strict domain, else DomainError."""
    return params_and_values(data, domain)[0]


def params_and_values(data: bytes, domain: Domain = Domain()) -> tuple[Commitment, dict]:
    """params_digest, and the parameters' value tree from the same reading."""
    v, canonical = params_tree(data, domain)
    return _commit(canonical), v


def params_tree(data: bytes, domain: Domain = Domain()) -> tuple[dict, bytes]:
    """The parameters' value tree (members in canonical order) and their
    canonical bytes, refused as params_digest refuses them."""
    v, canonical = parse_canonical(data, domain)
    if not isinstance(v, dict):
        raise DomainError(Kind.NOT_OBJECT, "", offset=_first_non_space(data))
    return v, canonical


def commit_canonical(canonical: bytes) -> Commitment:
    """The version 1 commitment to parameters already in canonical form."""
    return _commit(canonical)


def params_digest_value(v: Any, domain: Domain = Domain()) -> Commitment:
    """Commit to parameters held as a Python dict (see canonicalize_value
    for the values admitted)."""
    if not isinstance(v, dict):
        raise DomainError(Kind.NOT_OBJECT, "")
    return _commit(canonicalize_value(v, domain))


def parse_digest(s: str) -> bytes:
    """The 32 bytes of a digest spelled exactly "sha256:<64 lower hex>"."""
    if not isinstance(s, str) or not _DIGEST.match(s):
        raise MalformedDigestError('malformed digest: want "sha256:" and 64 lower-case hex digits')
    return bytes.fromhex(s[7:])


def digests_equal(a: str, b: str) -> bool:
    """Compare two digests in constant time; malformed ones raise."""
    return hmac.compare_digest(parse_digest(a), parse_digest(b))


def parse_params_digest(s: str) -> tuple[bytes, bool]:
    """The 32 bytes of a parameter digest of either version, and whether it
    is version 2 (hiding): "sha256:<64 lower hex>" or
    "v2:sha256:<64 lower hex>", exactly."""
    if isinstance(s, str) and s.startswith(HIDING_DIGEST_PREFIX):
        try:
            return parse_digest(s[len(HIDING_DIGEST_PREFIX):]), True
        except MalformedDigestError:
            pass
    elif isinstance(s, str) and _DIGEST.match(s):
        return bytes.fromhex(s[7:]), False
    raise MalformedDigestError('malformed parameter digest: want "sha256:" or "v2:sha256:" '
                               'and 64 lower-case hex digits')


def params_digests_equal(a: str, b: str) -> bool:
    """Compare two parameter digests of either version as the whole text
    (version and digest), in constant time; malformed ones raise."""
    da, ha = parse_params_digest(a)
    db, hb = parse_params_digest(b)
    return hmac.compare_digest(da, db) & (ha == hb)


def _first_non_space(data: bytes) -> int:
    for i, c in enumerate(data):
        if c not in b" \t\n\r":
            return i
    return len(data)
