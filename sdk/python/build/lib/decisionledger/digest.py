"""The parameter commitment, format version 1 (docs/commitment.md):

    digest = SHA-256("ledger/v1/params\\n" || JCS(params)), size = len(JCS(params))

written "sha256:" and 64 lower-case hex digits.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from .canonical import Domain, canonicalize_value, parse, serialize
from .errors import DomainError, Kind, LedgerError

__all__ = [
    "PARAMS_DOMAIN_SEPARATOR",
    "Commitment",
    "MalformedDigestError",
    "params_digest",
    "params_digest_value",
    "parse_digest",
    "digests_equal",
]

PARAMS_DOMAIN_SEPARATOR = b"ledger/v1/params\n"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")


class MalformedDigestError(LedgerError, ValueError):
    """A digest not spelled exactly "sha256:" and 64 lower-case hex digits."""


@dataclass(frozen=True)
class Commitment:
    """A parameter commitment: the digest ("sha256:<hex>"), the length of
    the canonical bytes, and those bytes (which stay with the workload)."""

    digest: str
    size: int
    canonical: bytes

    def matches(self, digest: str, size: int) -> bool:
        return digests_equal(self.digest, digest) and self.size == size


def _commit(canonical: bytes) -> Commitment:
    h = hashlib.sha256(PARAMS_DOMAIN_SEPARATOR)
    h.update(canonical)
    return Commitment("sha256:" + h.hexdigest(), len(canonical), canonical)


def params_digest(data: bytes, domain: Domain = Domain()) -> Commitment:
    """Commit to parameters given as JSON text (bytes). The text must be a
    JSON object inside the strict domain, else DomainError."""
    v = parse(data, domain)
    if not isinstance(v, dict):
        raise DomainError(Kind.NOT_OBJECT, "", offset=_first_non_space(data))
    return _commit(serialize(v))


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


def _first_non_space(data: bytes) -> int:
    for i, c in enumerate(data):
        if c not in b" \t\n\r":
            return i
    return len(data)
