"""The hiding commitment, parameter format version 2 (docs/commitment.md
sections 6 and 7; the Go reference is commit/hiding.go and
commit/disclosure.go).

Each top-level field f of the parameters is committed to under its own
secret 32-byte opening:

    c_f     = SHA-256("ledger/v2/field\\n" || opening_f || JCS(name_f) || JCS(value_f))
    covered = JCS(name_1) || c_1 || JCS(name_2) || c_2 || ...   (fields in canonical order)
    digest  = SHA-256("ledger/v2/params\\n" || covered),  size = len(covered)

written "v2:sha256:" and 64 lower-case hex digits. Without an opening a
field commitment says nothing of its value, so the log's digest and
attributes confirm no guess; a value disclosed with its opening is
checked one field at a time.

    c, x = hide(raw)                 # openings from the CSPRNG, one per field
    x.write("/var/lib/agent/disclosures/op-17.json")   # mode 0600; deleting it is erasure
    x.only(["amount_minor"]).check(Commitment.parse(entry["params_digest"], entry["params_size"]))

The parameters are read by the same strict reader as version 1 and
refused with exactly its refusals (DomainError, kind and pointer). A
disclosure file is read strictly too (Disclosure.parse); every refusal of
a disclosure is a DisclosureError with a stable code, naming the field or
the JSON pointer of the fault, never a value or an opening. Openings and
disclosures print as redacted placeholders.

The commit side is standard library only: SHA-256 from hashlib, HKDF
(RFC 5869) written over hmac for derived openings.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from typing import Any, Iterable, Protocol

from .canonical import Domain, parse, pointer, serialize
from .canonical import _json_string  # type: ignore[attr-defined]
from .digest import (HIDING_DIGEST_PREFIX, Commitment, MalformedDigestError, _first_non_space, params_digests_equal,
                     parse_params_digest)
from .errors import DomainError, Kind, LedgerError, _quote
from .unicode import normalization_fault

__all__ = [
    "FIELD_DOMAIN_SEPARATOR",
    "HIDING_DOMAIN_SEPARATOR",
    "OPENING_DERIVATION_SALT",
    "OPENING_SIZE",
    "DISCLOSURE_FORMAT",
    "Opening",
    "OpeningSource",
    "random_openings",
    "derived_openings",
    "hkdf_sha256",
    "hide",
    "Disclosure",
    "DisclosureError",
    "DisclosureKind",
    "OpeningError",
]

FIELD_DOMAIN_SEPARATOR = b"ledger/v2/field\n"
HIDING_DOMAIN_SEPARATOR = b"ledger/v2/params\n"
OPENING_DERIVATION_SALT = b"ledger/v2/opening\n"
OPENING_SIZE = 32
DISCLOSURE_FORMAT = 2

_HEX32 = re.compile(r"[0-9a-f]{64}")
_SURROGATE = re.compile("[\ud800-\udfff]")


# ---------------------------------------------------------------- errors

class DisclosureKind:
    """The codes of a disclosure refusal (docs/commitment.md section 7.4,
    docs/conformance.md section 5a); they equal Go's commit.DisclosureKind."""

    MALFORMED = "malformed"                      # the file is not in the form of section 7.4 (pointer)
    NOT_HIDING = "not_hiding"                    # the entry's commitment is version 1: nothing to open
    COMMITMENT_MISMATCH = "commitment_mismatch"  # the field commitments do not hash to the entry's
    FIELD_MISMATCH = "field_mismatch"            # a value and its opening do not give its commitment (field)
    FIELD_NOT_OPENED = "field_not_opened"        # a field the operation needs is not disclosed (field)

    ALL = frozenset({MALFORMED, NOT_HIDING, COMMITMENT_MISMATCH, FIELD_MISMATCH, FIELD_NOT_OPENED})


class DisclosureError(LedgerError, ValueError):
    """A disclosure that does not open a commitment, or a malformed file.

    code:    one of DisclosureKind's strings.
    field:   the field at fault (field_mismatch, field_not_opened), else "".
    pointer: the RFC 6901 pointer of the fault in the file (malformed).
    problem: what is wrong, in words.
    cause:   the DomainError of a file outside the strict domain, else None.

    It never carries a value or an opening."""

    def __init__(self, code: str, *, field: str = "", pointer: str = "", problem: str = "",
                 cause: DomainError | None = None):
        self.code, self.field, self.pointer, self.problem, self.cause = code, field, pointer, problem, cause
        m = "commit: disclosure: " + code
        if field:
            m += " in field " + _quote(field)
        if pointer or code == DisclosureKind.MALFORMED:
            m += " at " + _quote(pointer)
        if problem:
            m += ": " + problem
        if cause is not None:
            m += f" ({cause})"
        super().__init__(m)


class OpeningError(LedgerError, ValueError):
    """derived_openings refused its secret or call key. code is
    "short_secret" (under 32 bytes) or "empty_call_key"."""

    SHORT_SECRET = "short_secret"
    EMPTY_CALL_KEY = "empty_call_key"

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__("commit: " + message)


# ---------------------------------------------------------------- openings

class Opening:
    """The secret that opens one field's commitment: 32 bytes, as secret as
    the value it hides. It prints redacted; bytes(opening) gives the bytes
    (a Disclosure writes them to its file)."""

    __slots__ = ("_b",)

    def __init__(self, b: bytes | bytearray | memoryview):
        if not isinstance(b, (bytes, bytearray, memoryview)):
            raise TypeError("an opening is 32 bytes, not " + type(b).__name__)
        b = bytes(b)
        if len(b) != OPENING_SIZE:
            raise ValueError(f"an opening is {OPENING_SIZE} bytes, not {len(b)}")
        self._b = b

    def __bytes__(self) -> bytes:
        return self._b

    def __repr__(self) -> str:
        return "Opening(redacted)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Opening):
            return NotImplemented
        return hmac.compare_digest(self._b, other._b)

    __hash__ = None  # type: ignore[assignment]


class OpeningSource(Protocol):
    """Gives the opening of each top-level field of one call's parameters:
    random_openings() (the default), derived_openings(secret, call_key),
    or a Disclosure of an earlier call (its openings again). It MUST NOT
    give one opening to two calls unless they are to commit identically,
    and MUST raise rather than give a made-up opening for a field it does
    not know."""

    def opening(self, field: str) -> Opening | bytes: ...


class _RandomOpenings:
    __slots__ = ()

    def opening(self, field: str) -> Opening:
        return Opening(secrets.token_bytes(OPENING_SIZE))

    def __repr__(self) -> str:
        return "random_openings()"


def random_openings() -> OpeningSource:
    """Each opening drawn from the operating system's CSPRNG (secrets), one
    per field and per call: the default, and the only source whose openings
    are independent of every other secret."""
    return _RandomOpenings()


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF with HMAC-SHA256 (RFC 5869): extract, then expand to length
    bytes (at most 255 * 32)."""
    if not 0 <= length <= 255 * 32:
        raise ValueError("hkdf_sha256: length beyond 255 * 32 bytes")
    prk = hmac.digest(salt, ikm, "sha256")  # an empty salt is HashLen zeros: the same HMAC key
    out, t = b"", b""
    i = 1
    while len(out) < length:
        t = hmac.digest(prk, t + info + bytes([i]), "sha256")
        out += t
        i += 1
    return out[:length]


class _DerivedOpenings:
    __slots__ = ("_secret", "_info")

    def __init__(self, secret: bytes, info: bytes):
        self._secret, self._info = secret, info

    def opening(self, field: str) -> Opening:
        name = _jcs_text(field, "the field name", key=True)
        return Opening(hkdf_sha256(self._secret, OPENING_DERIVATION_SALT, self._info + name, OPENING_SIZE))

    def __repr__(self) -> str:
        return "derived_openings(redacted)"


def derived_openings(secret: bytes, call_key: str) -> OpeningSource:
    """Openings derived from a workload secret (at least 32 bytes) and the
    call's idempotency key, so that nothing is stored per call:

        opening_f = HKDF-SHA256(IKM=secret, salt="ledger/v2/opening\\n",
                                info=JCS(call_key) || JCS(name_f), L=32)

    The trade-off (docs/commitment.md section 7.5): the one secret guards
    every value ever committed with it, erasure is destroying the secret
    for every call at once, and two calls under one key are linkable.
    Raises OpeningError (short_secret, empty_call_key), or DomainError for
    a call key outside the strict domain's text (a lone surrogate, not
    NFC)."""
    if not isinstance(secret, (bytes, bytearray, memoryview)):
        raise TypeError("derived_openings: the secret is bytes, not " + type(secret).__name__)
    if len(secret) < OPENING_SIZE:
        raise OpeningError(OpeningError.SHORT_SECRET, "an opening secret is at least 32 bytes")
    if not isinstance(call_key, str):
        raise TypeError("derived_openings: the call key is a str, not " + type(call_key).__name__)
    if call_key == "":
        raise OpeningError(OpeningError.EMPTY_CALL_KEY, "derived openings need a non-empty call key")
    return _DerivedOpenings(bytes(secret), _jcs_text(call_key, "the call key"))


def _jcs_text(s: str, what: str, key: bool = False) -> bytes:
    # A str as a canonical JSON string, held to the domain's text rules.
    if not isinstance(s, str):
        raise TypeError(f"{what} is a str, not {type(s).__name__}")
    if _SURROGATE.search(s):
        raise DomainError(Kind.LONE_SURROGATE, "", key=key)
    if fault := normalization_fault(s):
        raise DomainError(fault, "", key=key)
    return _json_string(s).encode("utf-8")


def _opening_bytes(source: Any, name: str) -> bytes:
    o = source.opening(name)
    if isinstance(o, Opening):
        return bytes(o)
    if isinstance(o, (bytes, bytearray, memoryview)) and len(o) == OPENING_SIZE:
        return bytes(o)
    raise TypeError("an opening source gave something other than a 32-byte opening")


def _field_commitment(opening: bytes, name_jcs: bytes, value: bytes) -> bytes:
    return hashlib.sha256(FIELD_DOMAIN_SEPARATOR + opening + name_jcs + value).digest()


# ---------------------------------------------------------------- hide

def hide(raw: bytes, openings: OpeningSource | None = None, domain: Domain = Domain()) -> tuple[Commitment, "Disclosure"]:
    """Check raw parameters (bytes of a JSON object) against the strict
    domain and commit to them with version 2: the commitment (digest
    "v2:sha256:<hex>", size, hiding=True) and the Disclosure of every field,
    which stays with the workload (docs/commitment.md section 7.3).

    openings: random_openings() when None; derived_openings(...); or the
    Disclosure of an earlier call, which gives the same commitment if and
    only if the parameters are the same (a field it does not open raises
    DisclosureError field_not_opened). Refusals are params_digest's, for
    the same input."""
    tree = parse(raw, domain)
    if not isinstance(tree, dict):
        raise DomainError(Kind.NOT_OBJECT, "", offset=_first_non_space(bytes(raw)))
    return hide_tree(tree, openings)


def hide_tree(tree: dict, openings: OpeningSource | None = None) -> tuple[Commitment, "Disclosure"]:
    """hide() for a value tree already read by the strict reader (members
    in canonical order, as parse() gives them)."""
    source = random_openings() if openings is None else openings
    fields = []
    for name, v in tree.items():
        value = serialize(v)
        o = _opening_bytes(source, name)
        fields.append(_Field(name, _field_commitment(o, _json_string(name).encode("utf-8"), value), value, o))
    x = Disclosure._make(fields)
    return x.commitment, x


# ---------------------------------------------------------------- disclosures

class _Field:
    __slots__ = ("name", "commitment", "value", "opening")

    def __init__(self, name: str, commitment: bytes, value: bytes | None, opening: bytes | None):
        self.name, self.commitment, self.value, self.opening = name, commitment, value, opening

    @property
    def disclosed(self) -> bool:
        return self.opening is not None

    def __repr__(self) -> str:
        return f"_Field({self.name!r}, redacted)"


_FILE_MEMBERS = ("disclosure", "fields", "params_digest", "params_size")
_FIELD_MEMBERS = ("commitment", "opening", "value")


class Disclosure:
    """Opens a version 2 commitment: every committed field's commitment,
    and for each disclosed field its canonical value and its opening
    (docs/commitment.md section 7.4). hide() gives one with every field
    disclosed; only() keeps a subset to hand to an auditor; the file of the
    whole one, deleted, is erasure (section 7.6).

    It is an OpeningSource (opening(name)), so a retried call commits with
    the first call's openings. It prints as a summary without values or
    openings; serialize() is the file, as secret as the values in it."""

    __slots__ = ("commitment", "_fields")

    commitment: Commitment  # what the field commitments hash to
    _fields: list[_Field]   # in canonical (UTF-16) order of name

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("a Disclosure comes from hide() or Disclosure.parse()")

    @classmethod
    def _make(cls, fields: list[_Field]) -> "Disclosure":
        x = object.__new__(cls)
        x._fields = fields
        x.commitment = _commit_map(fields)
        return x

    def __repr__(self) -> str:
        return f"Disclosure({len(self._fields)} fields, {len(self.disclosed())} disclosed)"

    __str__ = __repr__

    # ------------------------------------------------------------ reading

    def fields(self) -> list[str]:
        """Every committed field's name, in canonical order."""
        return [f.name for f in self._fields]

    def disclosed(self) -> list[str]:
        """The names of the fields whose value is disclosed."""
        return [f.name for f in self._fields if f.disclosed]

    def hidden(self) -> list[str]:
        """The names of the fields whose value stays hidden."""
        return [f.name for f in self._fields if not f.disclosed]

    def _field(self, name: str) -> _Field | None:
        for f in self._fields:
            if f.name == name:
                return f
        return None

    def value(self, name: str) -> bytes | None:
        """A disclosed field's value in canonical JSON, else None."""
        f = self._field(name)
        return f.value if f is not None and f.disclosed else None

    def opening(self, name: str) -> Opening:
        """A disclosed field's opening (a Disclosure is an OpeningSource).
        A field it does not open raises DisclosureError field_not_opened:
        parameters with that field are not the ones committed to."""
        f = self._field(name)
        if f is None or not f.disclosed:
            raise DisclosureError(DisclosureKind.FIELD_NOT_OPENED, field=name)
        return Opening(f.opening)

    def params(self) -> bytes | None:
        """The canonical whole parameters when every field is disclosed
        (what the whole-parameter check and minimization take), else
        None."""
        parts = []
        for f in self._fields:
            if not f.disclosed:
                return None
            parts.append(_json_string(f.name).encode("utf-8") + b":" + f.value)
        return b"{" + b",".join(parts) + b"}"

    def only(self, names: Iterable[str]) -> "Disclosure":
        """A copy disclosing just the named fields (each disclosed here),
        keeping every field's commitment. Raises DisclosureError
        field_not_opened for a name not disclosed here."""
        if isinstance(names, (str, bytes)):
            raise TypeError("only() takes a collection of field names, not one name")
        keep = list(names)
        for n in keep:
            f = self._field(n)
            if f is None or not f.disclosed:
                raise DisclosureError(DisclosureKind.FIELD_NOT_OPENED, field=n)
        wanted = set(keep)
        fields = [_Field(f.name, f.commitment, f.value, f.opening) if f.name in wanted
                  else _Field(f.name, f.commitment, None, None) for f in self._fields]
        y = object.__new__(Disclosure)
        y._fields, y.commitment = fields, self.commitment
        return y

    # ------------------------------------------------------------ checking

    def check(self, commitment: Commitment) -> None:
        """Verify against an entry's commitment (Commitment.parse of its
        params_digest and params_size): it must be version 2 (not_hiding),
        the field commitments must hash to it (commitment_mismatch), and
        each disclosed value with its opening must give its field's
        commitment (field_mismatch, naming the field). Raises the first
        failure as a DisclosureError."""
        if not commitment.hiding:
            raise DisclosureError(DisclosureKind.NOT_HIDING)
        mine = _commit_map(self._fields)
        if not (params_digests_equal(mine.digest, commitment.digest) and mine.size == commitment.size):
            raise DisclosureError(DisclosureKind.COMMITMENT_MISMATCH)
        for f in self._fields:
            if f.disclosed:
                got = _field_commitment(f.opening, _json_string(f.name).encode("utf-8"), f.value)
                if not hmac.compare_digest(got, f.commitment):
                    raise DisclosureError(DisclosureKind.FIELD_MISMATCH, field=f.name)

    # ------------------------------------------------------------ the file

    def serialize(self) -> bytes:
        """The disclosure file in canonical form, byte for byte what Go's
        MarshalJSON writes:

            {"disclosure":2,"fields":{NAME:{"commitment":HEX,"opening":HEX,"value":VALUE},...},
             "params_digest":"v2:sha256:HEX","params_size":N}

        with "opening" and "value" only for disclosed fields."""
        parts = []
        for f in self._fields:
            p = _json_string(f.name).encode("utf-8") + b':{"commitment":"' + f.commitment.hex().encode() + b'"'
            if f.disclosed:
                p += b',"opening":"' + f.opening.hex().encode() + b'","value":' + f.value
            parts.append(p + b"}")
        return (b'{"disclosure":' + str(DISCLOSURE_FORMAT).encode() + b',"fields":{' + b",".join(parts) +
                b'},"params_digest":"' + self.commitment.digest.encode() + b'","params_size":' +
                str(self.commitment.size).encode() + b"}")

    def write(self, path: str | os.PathLike) -> None:
        """Write the file (serialize()) to a new file at path, created with
        mode 0600 and synced; an existing file is never replaced
        (FileExistsError). Deleting it later is the erasure of the call's
        hidden values."""
        data = self.serialize()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)

    @classmethod
    def parse(cls, data: bytes, domain: Domain = Domain()) -> "Disclosure":
        """Read a disclosure file. The file is held to the strict domain the
        parameters were committed in (values included), its members to
        exactly the form serialize() writes, in any order and spacing, and
        its params_digest and params_size must be what its field
        commitments hash to. Refusals are DisclosureError malformed, with
        the JSON pointer of the fault (and the DomainError as cause for a
        file outside the domain)."""
        file_domain = Domain(max_bytes=4 * domain._max_bytes() + (1 << 16), max_depth=domain._max_depth() + 2,
                             allow_non_integer=domain.allow_non_integer)
        try:
            root = parse(data, file_domain)
            if not isinstance(root, dict):
                raise DomainError(Kind.NOT_OBJECT, "", offset=_first_non_space(bytes(data)))
        except DomainError as e:
            raise DisclosureError(DisclosureKind.MALFORMED, pointer=e.pointer, problem="outside the strict domain",
                                  cause=e) from e

        def malformed(ptr: str, problem: str) -> DisclosureError:
            return DisclosureError(DisclosureKind.MALFORMED, pointer=ptr, problem=problem)

        want = ", ".join(_FILE_MEMBERS)
        for name in root:
            if name not in _FILE_MEMBERS:
                raise malformed("", f"unknown member (want {want})")
        if any(name not in root for name in _FILE_MEMBERS):
            raise malformed("", f"missing a member (want {want})")
        fmt, fields, digest_text, size = (root[n] for n in _FILE_MEMBERS)
        if not _is_integer(fmt) or fmt != DISCLOSURE_FORMAT:
            raise malformed("/disclosure", "not 2, the only disclosure format")
        if not isinstance(fields, dict):
            raise malformed("/fields", "not an object")
        if not isinstance(digest_text, str):
            raise malformed("/params_digest", "not a string")
        if not _is_integer(size):
            raise malformed("/params_size", "not an integer")
        out = []
        want_f = ", ".join(_FIELD_MEMBERS)
        for name, member in fields.items():  # canonical order
            ptr = pointer(["fields", name])
            if not isinstance(member, dict):
                raise malformed(ptr, "not an object")
            for m in member:
                if m not in _FIELD_MEMBERS:
                    raise malformed(ptr, f"unknown member (want {want_f})")
            if "commitment" not in member:
                raise malformed(ptr, 'no "commitment"')
            commitment = _hex32(member["commitment"])
            if commitment is None:
                raise malformed(ptr + "/commitment", "not 64 lower-case hex digits")
            if ("opening" in member) != ("value" in member):
                raise malformed(ptr, '"opening" and "value" come together or not at all')
            value = opening = None
            if "opening" in member:
                opening = _hex32(member["opening"])
                if opening is None:
                    raise malformed(ptr + "/opening", "not 64 lower-case hex digits")
                value = serialize(member["value"])
            out.append(_Field(name, commitment, value, opening))
        x = cls._make(out)
        try:
            _, hiding = parse_params_digest(digest_text)
        except MalformedDigestError:
            hiding = False
        if not hiding:
            raise malformed("/params_digest", 'not "v2:sha256:" and 64 lower-case hex digits')
        if not (params_digests_equal(x.commitment.digest, digest_text) and x.commitment.size == size):
            raise malformed("/params_digest",
                            "the field commitments do not hash to the file's own params_digest and params_size")
        return x


def _is_integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _hex32(v: Any) -> bytes | None:
    if isinstance(v, str) and _HEX32.fullmatch(v):
        return bytes.fromhex(v)
    return None


def _commit_map(fields: list[_Field]) -> Commitment:
    # The names and field commitments (fields already in canonical order)
    # and their version 2 commitment.
    m = b"".join(_json_string(f.name).encode("utf-8") + f.commitment for f in fields)
    h = hashlib.sha256(HIDING_DOMAIN_SEPARATOR)
    h.update(m)
    return Commitment(HIDING_DIGEST_PREFIX + "sha256:" + h.hexdigest(), len(m), m, True)