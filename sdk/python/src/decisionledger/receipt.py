"""Checking what ledgerd signs: entries (docs/entry.md), C2SP signed-note
checkpoints and RFC 6962 inclusion proofs (docs/log.md), with the log's
note verifier key. Ed25519 comes from `cryptography`; without it, every
check that needs a signature raises VerificationUnavailable, saying so.

    key = VerifierKey.parse("ledger.example.com/log+cf212548+AZH4...")
    entry = verify_entry(entry_bytes, key)                # or raises ReceiptError
    verify_receipt(entry_bytes, key, checkpoint=note, index=i,
                   tree_size=n, hashes=[...])             # the entry is in the tree

A refusal is a ReceiptError whose `check` is one of the stable names
ledger-verify reports: encoding, key, signature, index, inclusion,
checkpoint-signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from .canonical import MAX_SAFE_INTEGER, canonicalize, parse, serialize
from .digest import MalformedDigestError, parse_digest, parse_params_digest
from .errors import DomainError, LedgerError

__all__ = [
    "ReceiptError",
    "VerificationUnavailable",
    "VerifierKey",
    "Checkpoint",
    "parse_entry",
    "entry_hash",
    "leaf_hash",
    "verify_entry",
    "open_checkpoint",
    "verify_inclusion",
    "verify_receipt",
    "ed25519_available",
]

try:  # the verify side's one dependency
    from cryptography.exceptions import InvalidSignature as _InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey as _Ed25519PublicKey
except ImportError:  # pragma: no cover - exercised where cryptography is absent
    _Ed25519PublicKey = None
    _InvalidSignature = Exception


def ed25519_available() -> bool:
    return _Ed25519PublicKey is not None


class ReceiptError(LedgerError):
    """Something ledgerd signed (or claims to have) does not verify.

    check: encoding | key | signature | index | inclusion |
           checkpoint-signature
    field: the entry member at fault, for encoding, else "".
    """

    def __init__(self, check: str, problem: str, field: str = ""):
        self.check = check
        self.problem = problem
        self.field = field
        where = f" ({field})" if field else ""
        super().__init__(f"receipt: {check}{where}: {problem}")


class VerificationUnavailable(LedgerError):
    """Ed25519 is not available: install `cryptography` (the `verify` extra
    of this package, or Debian's python3-cryptography)."""

    def __init__(self) -> None:
        super().__init__("receipt verification needs the cryptography package (pip install 'decisionledger[verify]' "
                         "or apt-get install python3-cryptography); nothing was verified")


def _b64decode_std(s: str) -> bytes:
    # Go's base64.StdEncoding: padding required, no other characters.
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", s) or len(s) % 4:
        raise ValueError("not standard base64")
    return binascii.a2b_base64(s.encode("ascii"))


def _b64decode_strict(s: str) -> bytes:
    b = _b64decode_std(s)
    if base64.b64encode(b).decode("ascii") != s:
        raise ValueError("not canonical base64")
    return b


def _ed25519_verify(public: bytes, msg: bytes, sig: bytes) -> bool:
    if _Ed25519PublicKey is None:
        raise VerificationUnavailable()
    try:
        _Ed25519PublicKey.from_public_bytes(public).verify(sig, msg)
        return True
    except _InvalidSignature:
        return False
    except ValueError:
        return False


def _is_valid_name(name: str) -> bool:
    return name != "" and not any(c.isspace() for c in name) and "+" not in name


@dataclass(frozen=True)
class VerifierKey:
    """A note verifier key "<name>+<hash>+<base64(0x01 || Ed25519 key)>"."""

    vkey: str
    name: str
    key_hash: int
    public: bytes

    @property
    def key_id(self) -> str:
        return f"{self.name}+{self.key_hash:08x}"

    @classmethod
    def parse(cls, vkey: str) -> "VerifierKey":
        name, _, rest = vkey.partition("+")
        hash16, _, key64 = rest.partition("+")
        try:
            if len(hash16) != 8 or not re.fullmatch(r"[0-9a-fA-F]{8}", hash16):
                raise ValueError
            h = int(hash16, 16)
            key = _b64decode_std(key64)
        except ValueError:
            raise LedgerError("verifier key: malformed") from None
        if not _is_valid_name(name) or not key:
            raise LedgerError("verifier key: malformed")
        if int.from_bytes(hashlib.sha256(name.encode() + b"\n" + key).digest()[:4], "big") != h:
            raise LedgerError("verifier key: the key hash does not match")
        if key[0] != 1 or len(key) != 33:
            raise LedgerError("verifier key: not an Ed25519 key")
        return cls(vkey, name, h, key[1:])


# ---------------------------------------------------------------- entries

MAX_ENTRY_BYTES = 65535
MAX_ATTRIBUTES_BYTES = 32 * 1024
MAX_POLICIES = 256
MAX_STRING_BYTES = 1024
_ZERO_DIGEST = "sha256:" + "0" * 64
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")

_FIELDS_V1 = ["action", "attributes", "decision", "index", "key_id", "mediator", "origin", "params_digest",
              "params_size", "policies", "prev", "principal", "sig", "tiers_digest", "time", "version"]
_FIELDS_V2 = sorted(_FIELDS_V1 + ["definition_digest"])
_FIELDS_V3_DECISION = sorted(_FIELDS_V2 + ["kind", "policy_errors", "policy_set"])
_FIELDS_V3_POLICY_SET = ["index", "key_id", "kind", "origin", "policy_set", "prev", "sig", "time", "version"]
_COMMON = ["index", "key_id", "kind", "origin", "prev", "sig", "time", "version"]
_V4_MEMBERS = {
    "approval_config": ["execution_ttl_ms", "pending_ttl_ms"],
    "approval": ["approval", "approver", "preview_digest", "request", "verdict"],
    "consumption": ["action", "approval", "mediator", "params_digest", "params_size", "principal", "request"],
    "outcome": ["approval", "consumption", "mediator", "operation_id", "result"],
}
_IDENTIFIERS = ("action", "decision", "key_id", "kind", "mediator", "origin", "principal", "approver",
                "result", "verdict", "operation_id")
_REFUSED_RANGES = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_REFUSED = re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _REFUSED_RANGES) + "]")
_SEPARATORS = {1: b"ledger/v1/entry\n", 2: b"ledger/v2/entry\n", 3: b"ledger/v3/entry\n",
               4: b"ledger/v4/entry\n", 5: b"ledger/v5/entry\n"}
MAX_TTL_MS = 366 * 24 * 3600 * 1000


def _enc(field: str, problem: str) -> ReceiptError:
    return ReceiptError("encoding", problem, field)


def parse_entry(b: bytes) -> dict:
    """Decode a signed entry strictly (docs/entry.md section 3): its bytes
    must be exactly the canonical encoding of a valid entry. Returns its
    members. Raises ReceiptError(check="encoding")."""
    if len(b) > MAX_ENTRY_BYTES:
        raise _enc("", f"longer than {MAX_ENTRY_BYTES} bytes")
    try:
        if canonicalize(b) != b:
            raise _enc("", "not in canonical form")
        m = parse(b)
    except DomainError as e:
        raise _enc("", f"outside the strict JSON domain: {e.kind} at {e.pointer!r}") from None
    if not isinstance(m, dict):
        raise _enc("", "not a JSON object")
    version = _uint(m, "version")
    kind = ""
    if version == 1:
        want = _FIELDS_V1
    elif version == 2:
        want = _FIELDS_V2
    elif version in (3, 4, 5):
        if "kind" not in m:
            raise _enc("kind", "missing")
        kind = _string(m, "kind")
        if version == 3 and kind == "decision":
            want = _FIELDS_V3_DECISION
        elif version == 3 and kind == "policy_set":
            want = _FIELDS_V3_POLICY_SET
        elif version == 4 and kind in _V4_MEMBERS:
            members = [x for x in _V4_MEMBERS[kind] if x != "operation_id" or "operation_id" in m]
            want = sorted(_COMMON + members)
        elif version == 5 and kind == "outcome":
            want = sorted(_COMMON + ["decision", "mediator", "result"] + (["operation_id"] if "operation_id" in m else []))
        else:
            raise _enc("kind", f"not a kind of version {version}")
    else:
        raise _enc("version", f"unsupported version {version} (this reader knows 1 to 5)")
    for name in sorted(m):
        if name not in want:
            raise _enc(name, "unknown member")
    for name in want:
        if name not in m:
            raise _enc(name, "missing")
    # Types and rules of every member present.
    index = _uint(m, "index")
    for f in ("key_id", "origin"):
        _string(m, f)
    _digest(m, "prev")
    t = _string(m, "time")
    if not _TIME.match(t) or not _valid_time(t):
        raise _enc("time", "not a UTC time written as 2006-01-02T15:04:05.000000Z")
    sig = _string(m, "sig")
    try:
        raw = _b64decode_strict(sig)
    except ValueError:
        raw = b""
    if len(raw) != 64:
        raise _enc("sig", "not a base64 Ed25519 signature")
    if "params_digest" in m:
        _params_digest(m, "params_digest")
    for f in ("tiers_digest", "preview_digest"):
        if f in m:
            _digest(m, f)
    for f in ("definition_digest", "policy_set", "approval"):
        if f in m and _digest(m, f) == _ZERO_DIGEST:
            raise _enc(f, "all zeros")
    if "preview_digest" in m and m["preview_digest"] == _ZERO_DIGEST:
        raise _enc("preview_digest", "all zeros")
    for f in _IDENTIFIERS:
        if f in m and not (version == 5 and f == "decision"):
            s = _string(m, f)
            if f == "decision" and version < 4:
                if s not in ("allow", "deny", "needs_approval"):
                    raise _enc("decision", "not allow, deny or needs_approval")
            if _REFUSED.search(s):
                raise _enc(f, "holds a control or format character")
    for f in ("policies", "policy_errors"):
        if f in m:
            ids = m[f]
            if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
                raise _enc(f, "not an array of strings")
            if len(ids) > MAX_POLICIES:
                raise _enc(f, f"more than {MAX_POLICIES}")
            for i in range(1, len(ids)):
                if ids[i - 1].encode() >= ids[i].encode():
                    raise _enc(f, f"not sorted in byte order without repeats (at {i})")
            for x in ids:
                if x == "" or len(x.encode()) > MAX_STRING_BYTES:
                    raise _enc(f, "an empty or over-long id")
                if _REFUSED.search(x):
                    raise _enc(f, "holds a control or format character")
    for f, v in m.items():
        if isinstance(v, str) and (v == "" or len(v.encode()) > MAX_STRING_BYTES):
            raise _enc(f, "empty or longer than 1024 bytes")
    if "params_size" in m:
        # A hiding (v2:) commitment of no field covers nothing: size 0.
        least = 0 if str(m.get("params_digest", "")).startswith("v2:") else 2
        if not least <= _uint(m, "params_size") <= MAX_SAFE_INTEGER:
            raise _enc("params_size", "not a canonical object size")
    if "attributes" in m:
        a = m["attributes"]
        if not isinstance(a, dict):
            raise _enc("attributes", "not an object")
        start = b.find(b'"attributes":') + len(b'"attributes":')
        if len(_member_bytes(b, start)) > MAX_ATTRIBUTES_BYTES:
            raise _enc("attributes", f"longer than {MAX_ATTRIBUTES_BYTES} bytes")
    if kind == "decision":
        errs, pols = m["policy_errors"], m["policies"]
        if errs and m["decision"] != "deny":
            raise _enc("policy_errors", "a decision with erroring policies is deny (fail closed)")
        if any(x not in pols for x in errs):
            raise _enc("policy_errors", "an erroring policy is not among the determining policies (fail closed)")
    if version == 4:
        if kind == "approval_config":
            for f in ("execution_ttl_ms", "pending_ttl_ms"):
                if not 1 <= _uint(m, f) <= MAX_TTL_MS:
                    raise _enc(f, f"not a whole number of milliseconds from 1 to {MAX_TTL_MS}")
        if kind == "approval" and m["verdict"] not in ("approve", "deny"):
            raise _enc("verdict", "not approve or deny")
        if kind == "outcome":
            if m["result"] not in ("succeeded", "failed", "unknown"):
                raise _enc("result", "not succeeded, failed or unknown")
            if _uint(m, "consumption") >= index:
                raise _enc("consumption", "not an earlier entry")
        if kind in ("approval", "consumption") and _uint(m, "request") >= index:
            raise _enc("request", "not an earlier entry")
    if version == 5:
        if m["result"] not in ("succeeded", "failed", "unknown"):
            raise _enc("result", "not succeeded, failed or unknown")
        if _uint(m, "decision") >= index:
            raise _enc("decision", "not an earlier entry")
    return m


def _member_bytes(b: bytes, start: int) -> bytes:
    # The bytes of the JSON value at start (canonical text: no spaces).
    depth, i, in_str = 0, start, False
    while i < len(b):
        c = b[i]
        if in_str:
            if c == 0x5C:
                i += 1
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return b[start:i + 1]
        i += 1
    return b[start:]


def _valid_time(t: str) -> bool:
    import datetime
    try:
        d = datetime.datetime.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return d.year >= 1


def _uint(m: dict, f: str) -> int:
    v = m.get(f)
    if type(v) is not int or v < 0:
        raise _enc(f, "not an integer in 0..2^53-1")
    return v


def _string(m: dict, f: str) -> str:
    v = m.get(f)
    if not isinstance(v, str):
        raise _enc(f, "not a string")
    return v


def _digest(m: dict, f: str) -> str:
    s = _string(m, f)
    try:
        parse_digest(s)
    except MalformedDigestError:
        raise _enc(f, "not a digest (sha256:<64 lower-case hex digits>)") from None
    return s


def _params_digest(m: dict, f: str) -> str:
    # A parameter commitment of either version (docs/commitment.md section 6).
    s = _string(m, f)
    try:
        parse_params_digest(s)
    except MalformedDigestError:
        raise _enc(f, "not a parameter digest (sha256:<64 lower-case hex digits>, or v2:sha256:<...> "
                      "for a hiding commitment)") from None
    return s


def _signed_message(m: dict) -> bytes:
    # The version's separator and the JCS of the entry without "sig".
    return _SEPARATORS[m["version"]] + serialize({k: v for k, v in m.items() if k != "sig"})


def entry_hash(b: bytes) -> str:
    """The entry hash, "sha256:<hex>" of SHA-256 of the signed message; it is
    an approval's id when the entry opened one."""
    m = parse_entry(b)
    return "sha256:" + hashlib.sha256(_signed_message(m)).hexdigest()


def leaf_hash(b: bytes) -> bytes:
    """The RFC 6962 leaf hash of a signed entry: SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + b).digest()


def verify_entry(b: bytes, key: VerifierKey) -> dict:
    """Decode a signed entry strictly and check that the trusted key signed
    it. Returns the entry's members; raises ReceiptError (encoding, key,
    signature) or VerificationUnavailable."""
    m = parse_entry(b)
    _check_entry_key(m, key)
    _check_entry_signature(b, m, key)
    return m


def _check_entry_key(m: dict, key: VerifierKey) -> None:
    if m["origin"] != key.name:
        raise ReceiptError("key", "entry names another log origin")
    if m["key_id"] != key.key_id:
        raise ReceiptError("key", "entry is signed by a key that is not trusted")


def _check_entry_signature(b: bytes, m: dict, key: VerifierKey) -> None:
    sig = base64.b64decode(m["sig"])
    if not _ed25519_verify(key.public, _signed_message(m), sig):
        raise ReceiptError("signature", "the entry's signature does not verify")


# ---------------------------------------------------------------- checkpoints

@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    text: bytes      # the signed note's text
    note: bytes      # the whole note as given


def open_checkpoint(note: bytes, key: VerifierKey) -> Checkpoint:
    """Open a C2SP signed-note checkpoint with the trusted key, strictly as
    ledger-verify does: a well-formed note, every signature line in
    canonical base64, every line by the trusted key verifying and at least
    one such line; the text a checkpoint of the key's origin."""
    def fail(problem: str) -> ReceiptError:
        return ReceiptError("checkpoint-signature", problem)

    try:
        text_all = note.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("malformed note") from None
    if any(c < " " and c != "\n" for c in text_all):
        raise fail("malformed note")
    split = note.rfind(b"\n\n")
    if split < 0:
        raise fail("malformed note")
    text, sigs = note[:split + 1], note[split + 2:]
    if not sigs or not sigs.endswith(b"\n"):
        raise fail("malformed note")
    verified = 0
    seen = set()
    lines = sigs[:-1].split(b"\n")
    if len(lines) > 100:
        raise fail("malformed note")
    for line in lines:
        if not line.startswith("— ".encode()):
            raise fail("malformed note")
        name, _, b64 = line[len("— ".encode()):].decode("utf-8").partition(" ")
        try:
            sig = _b64decode_std(b64)
        except ValueError:
            raise fail("malformed note") from None
        if not _is_valid_name(name) or b64 == "" or len(sig) < 5:
            raise fail("malformed note")
        if base64.b64encode(sig).decode() != b64:
            raise fail("a signature line is not in canonical base64")
        h = int.from_bytes(sig[:4], "big")
        if name == key.name and h == key.key_hash:
            if not _ed25519_verify(key.public, text, sig[4:]):
                raise fail("the signature by the trusted key does not verify")
            if (name, h) not in seen:
                verified += 1
                seen.add((name, h))
    if verified == 0:
        raise fail("not signed by the trusted key")
    parts = text.split(b"\n", 3)
    if len(parts) < 4 or not parts[0]:
        raise fail("not a checkpoint")
    origin = parts[0].decode()
    if not re.fullmatch(rb"[0-9]+", parts[1]) or (len(parts[1]) > 1 and parts[1][0] == 0x30):
        raise fail("not a checkpoint: the size")
    try:
        root = _b64decode_std(parts[2].decode())
    except ValueError:
        raise fail("not a checkpoint: the root hash") from None
    if origin != key.name:
        raise fail("the checkpoint is for another origin")
    return Checkpoint(origin, int(parts[1]), root, text, note)


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf: bytes, hashes: list[bytes]) -> bytes:
    """The root an RFC 6962 inclusion proof leads to (RFC 9162 2.1.3.2)."""
    if index >= size:
        raise ReceiptError("inclusion", "the index is not below the tree size")
    if any(len(h) != 32 for h in hashes):
        raise ReceiptError("inclusion", "a proof hash is not 32 bytes")
    fn, sn, r = index, size - 1, leaf
    for p in hashes:
        if sn == 0:
            raise ReceiptError("inclusion", "the proof is too long")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ReceiptError("inclusion", "the proof is too short")
    return r


def verify_inclusion(leaf: bytes, index: int, cp: Checkpoint, tree_size: int, hashes: list[bytes]) -> None:
    if tree_size != cp.size:
        raise ReceiptError("inclusion", "the proof's tree size is not the checkpoint's")
    if root_from_inclusion(index, tree_size, leaf, hashes) != cp.root:
        raise ReceiptError("inclusion", "the proof does not lead to the checkpoint's root")


def verify_receipt(entry: bytes, key: VerifierKey, *, checkpoint: bytes | None = None, index: int | None = None,
                   tree_size: int | None = None, hashes: list[bytes] | None = None) -> dict:
    """Verify a signed entry and, given a checkpoint and an inclusion proof,
    that the entry is leaf `index` of the checkpoint's tree. The checks run
    in ledger-verify's order (docs/conformance.md section 5); the first
    that fails is raised as ReceiptError."""
    if checkpoint is None:
        return verify_entry(entry, key)
    cp = open_checkpoint(checkpoint, key)
    if tree_size != cp.size:
        raise ReceiptError("inclusion", "the proof's tree size is not the checkpoint's")
    m = parse_entry(entry)
    if m["index"] != index:
        raise ReceiptError("index", "the entry's index is not the proof's")
    _check_entry_key(m, key)
    _check_entry_signature(entry, m, key)
    verify_inclusion(leaf_hash(entry), index, cp, tree_size, hashes or [])
    return m
