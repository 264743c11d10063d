"""The strict JSON domain and RFC 8785 canonical bytes (docs/commitment.md).

Python's json module cannot be the reader: it keeps the last of two
duplicate names, accepts NaN and Infinity, decodes lone surrogates and
reads numbers as floats. This module has its own tokenizer over the raw
bytes. It checks every rule of the strict domain in one pass, refusing
with a DomainError that names the kind and the JSON pointer (the same
kinds and pointers as Go's package commit), and builds a tree of plain
Python values:

* objects are dicts whose members are already in canonical order (sorted by
  name as UTF-16 code units);
* strings are str, true/false/null are True/False/None;
* numbers whose exact value is an integer are int (within +-(2^53-1));
* admitted non-integer numbers (allow_non_integer=True) are float, exact
  by construction: a number whose RFC 8785 form would denote another decimal
  value is refused as inexact_number.

serialize() writes the RFC 8785 form of such a tree (or of any Python value
the domain admits, see canonicalize_value).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string  # type: ignore[attr-defined]
from typing import Any

from .errors import DomainError, Kind
from .unicode import has_unstable_normalization, normalization_fault

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "Domain",
    "parse",
    "canonicalize",
    "canonicalize_value",
    "serialize",
    "number_to_json",
    "pointer",
    "utf16_key",
    "SpelledInt",
    "parse_canonical",
]

DEFAULT_MAX_BYTES = 1 << 20
DEFAULT_MAX_DEPTH = 64
MAX_SAFE_INTEGER = (1 << 53) - 1
_MAX_INPUT_BYTES = 1 << 30
_MAX_EXPONENT = 1_000_000_000


@dataclass(frozen=True)
class Domain:
    """The strict domain's settings. Domain() is the one parameter digests
    use: integers only, 1 MiB, depth 64. Zero or negative bounds mean the
    defaults, as in Go."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    allow_non_integer: bool = False

    def _max_bytes(self) -> int:
        if self.max_bytes <= 0:
            return DEFAULT_MAX_BYTES
        return min(self.max_bytes, _MAX_INPUT_BYTES)

    def _max_depth(self) -> int:
        return DEFAULT_MAX_DEPTH if self.max_depth <= 0 else self.max_depth


def pointer(path: list[str | int] | tuple[str | int, ...]) -> str:
    """RFC 6901 pointer of a path of member names and array indexes."""
    out = []
    for step in path:
        if isinstance(step, int):
            out.append("/" + str(step))
        else:
            out.append("/" + step.replace("~", "~0").replace("/", "~1"))
    return "".join(out)


def utf16_key(s: str) -> bytes:
    """Sort key ordering strings as arrays of UTF-16 code units (RFC 8785
    section 3.2.3). Strings here never hold lone surrogates."""
    return s.encode("utf-16-be")


# ---------------------------------------------------------------- reader

_WS = re.compile(rb"[ \t\n\r]*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_DIGITS = re.compile(rb"[0-9]*")
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}")
_SIMPLE_ESCAPES = {
    ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b",
    ord("f"): "\f", ord("n"): "\n", ord("r"): "\r", ord("t"): "\t",
}


class _Parser:
    __slots__ = ("data", "pos", "depth", "path", "max_depth", "allow_non_integer", "normalize", "keep_order")

    def __init__(self, data: bytes, domain: Domain, normalize: bool = False, keep_order: bool = False):
        self.data = data
        self.pos = 0
        self.depth = 0
        self.path: list[str | int] = []
        self.max_depth = domain._max_depth()
        self.allow_non_integer = domain.allow_non_integer
        self.normalize = normalize
        self.keep_order = keep_order

    def fail(self, kind: str, offset: int) -> DomainError:
        return DomainError(kind, pointer(self.path), offset=offset)

    def fail_key(self, kind: str, offset: int) -> DomainError:
        return DomainError(kind, pointer(self.path), key=True, offset=offset)

    def skip_space(self) -> None:
        self.pos = _WS.match(self.data, self.pos).end()

    def document(self) -> Any:
        self.skip_space()
        v = self.value()
        self.skip_space()
        if self.pos != len(self.data):
            raise self.fail(Kind.SYNTAX, self.pos)
        return v

    def value(self) -> Any:
        data, pos = self.data, self.pos
        if pos >= len(data):
            raise self.fail(Kind.SYNTAX, pos)
        c = data[pos]
        if c == 0x7B:  # {
            return self.object()
        if c == 0x5B:  # [
            return self.array()
        if c == 0x22:  # "
            start = pos
            s, kind, at = self.string()
            if kind:
                raise self.fail(kind, at)
            s, kind = self.check_text(s)
            if kind:
                raise self.fail(kind, start)
            return s
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self.number()
        for lit, v in ((b"true", True), (b"false", False), (b"null", None)):
            if data.startswith(lit, pos):
                self.pos = pos + len(lit)
                return v
        raise self.fail(Kind.SYNTAX, pos)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.fail(Kind.TOO_DEEP, self.pos)

    def array(self) -> list:
        self.enter()
        self.pos += 1
        self.skip_space()
        data = self.data
        if self.pos < len(data) and data[self.pos] == 0x5D:
            self.pos += 1
            self.depth -= 1
            return []
        elems: list = []
        path = self.path
        while True:
            path.append(len(elems))
            self.skip_space()
            elems.append(self.value())
            path.pop()
            self.skip_space()
            if self.pos >= len(data):
                raise self.fail(Kind.SYNTAX, self.pos)
            c = data[self.pos]
            if c == 0x2C:
                self.pos += 1
            elif c == 0x5D:
                self.pos += 1
                self.depth -= 1
                return elems
            else:
                raise self.fail(Kind.SYNTAX, self.pos)

    def object(self) -> dict:
        self.enter()
        self.pos += 1
        self.skip_space()
        data = self.data
        if self.pos < len(data) and data[self.pos] == 0x7D:
            self.pos += 1
            self.depth -= 1
            return {}
        members: list[tuple[str, Any]] = []
        offsets: dict[str, int] = {}
        path = self.path
        while True:
            self.skip_space()
            if self.pos >= len(data) or data[self.pos] != 0x22:
                raise self.fail_key(Kind.SYNTAX, self.pos)
            start = self.pos
            name, kind, at = self.string()
            if kind:
                raise self.fail_key(kind, at)
            name, kind = self.check_text(name)
            if kind:
                raise self.fail_key(kind, start)
            self.skip_space()
            if self.pos >= len(data) or data[self.pos] != 0x3A:
                raise self.fail_key(Kind.SYNTAX, self.pos)
            self.pos += 1
            self.skip_space()
            path.append(name)
            members.append((name, self.value()))
            offsets[name] = start  # the later occurrence, as Go reports
            path.pop()
            self.skip_space()
            if self.pos >= len(data):
                raise self.fail(Kind.SYNTAX, self.pos)
            c = data[self.pos]
            if c == 0x2C:
                self.pos += 1
            elif c == 0x7D:
                self.pos += 1
                self.depth -= 1
                obj = dict(members)
                if len(obj) != len(members):
                    # Go reports the first duplicate in canonical order.
                    seen: set[str] = set()
                    dups = set()
                    for n, _ in members:
                        if n in seen:
                            dups.add(n)
                        seen.add(n)
                    dup = min(dups, key=utf16_key)
                    path.append(dup)
                    err = self.fail(Kind.DUPLICATE_KEY, offsets[dup])
                    path.pop()
                    raise err
                return obj if self.keep_order else _sorted_dict(obj)
            else:
                raise self.fail(Kind.SYNTAX, self.pos)

    def check_text(self, s: str) -> tuple[str, str]:
        if s.isascii():
            return s, ""
        if has_unstable_normalization(s):
            return "", Kind.UNSTABLE_NORMALIZATION
        if unicodedata.is_normalized("NFC", s):
            return s, ""
        if self.normalize:
            return unicodedata.normalize("NFC", s), ""
        return "", Kind.NOT_NFC

    def string(self) -> tuple[str, str, int]:
        """Decode the string whose quote is at pos. Returns (text, kind,
        offset); kind is "" on success."""
        data = self.data
        start = self.pos + 1
        end = _PLAIN.match(data, start).end()
        if end >= len(data):
            self.pos = end
            return "", Kind.SYNTAX, end
        c = data[end]
        if c == 0x22:
            self.pos = end + 1
            try:
                return data[start:end].decode("utf-8"), "", 0
            except UnicodeDecodeError as e:
                return "", Kind.INVALID_UTF8, start + e.start
        if c != 0x5C:  # a control character
            self.pos = end
            return "", Kind.SYNTAX, end
        parts: list[str] = []
        pos = start
        while True:
            try:
                parts.append(data[pos:end].decode("utf-8"))
            except UnicodeDecodeError as e:
                self.pos = pos + e.start
                return "", Kind.INVALID_UTF8, pos + e.start
            if end >= len(data):
                self.pos = end
                return "", Kind.SYNTAX, end
            c = data[end]
            if c == 0x22:
                self.pos = end + 1
                return "".join(parts), "", 0
            if c != 0x5C:
                self.pos = end
                return "", Kind.SYNTAX, end
            at = end
            if end + 1 >= len(data):
                self.pos = end
                return "", Kind.SYNTAX, at
            e = data[end + 1]
            pos = end + 2
            simple = _SIMPLE_ESCAPES.get(e)
            if simple is not None:
                parts.append(simple)
            elif e == 0x75:  # u
                m = _HEX4.match(data, pos)
                if not m:
                    self.pos = pos
                    return "", Kind.SYNTAX, at
                r = int(m.group(), 16)
                pos += 4
                if 0xD800 <= r <= 0xDFFF:
                    ok = False
                    if r < 0xDC00 and data.startswith(b"\\u", pos):
                        pos += 2
                        m = _HEX4.match(data, pos)
                        if not m:
                            self.pos = pos
                            return "", Kind.SYNTAX, pos - 2
                        lo = int(m.group(), 16)
                        pos += 4
                        ok = 0xDC00 <= lo <= 0xDFFF
                    if not ok:
                        self.pos = pos
                        return "", Kind.LONE_SURROGATE, at
                    r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00)
                parts.append(chr(r))
            else:
                self.pos = pos
                return "", Kind.SYNTAX, at
            end = _PLAIN.match(data, pos).end()

    def number(self) -> int | float:
        data = self.data
        start = pos = self.pos
        if data[pos] == 0x2D:
            pos += 1
        if pos < len(data) and data[pos] == 0x30:
            pos += 1
        else:
            e = _DIGITS.match(data, pos).end()
            if e == pos:
                raise self.fail(Kind.SYNTAX, start)
            pos = e
        plain = True
        if pos < len(data) and data[pos] == 0x2E:
            plain = False
            e = _DIGITS.match(data, pos + 1).end()
            if e == pos + 1:
                raise self.fail(Kind.SYNTAX, start)
            pos = e
        if pos < len(data) and data[pos] in (0x65, 0x45):
            plain = False
            pos += 1
            if pos < len(data) and data[pos] in (0x2B, 0x2D):
                pos += 1
            e = _DIGITS.match(data, pos).end()
            if e == pos:
                raise self.fail(Kind.SYNTAX, start)
            pos = e
        self.pos = pos
        tok = data[start:pos]
        if plain and len(tok) <= 16:
            v = int(tok)
            if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                return v
        v, kind = _number_value(tok.decode("ascii"), self.allow_non_integer)
        if kind:
            raise self.fail(kind, start)
        if not plain and type(v) is int:
            return SpelledInt(v)
        return v


class SpelledInt(int):
    """An integer value written with a fraction or an exponent (1.0, 1e3).
    It commits as the integer; a declared integer field refuses it
    (docs/declarations.md section 3)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"SpelledInt({int(self)})"


def _sorted_dict(d: dict) -> dict:
    keys = list(d)
    if "".join(keys).isascii():
        # ASCII: code point order is UTF-16 order.
        keys.sort()
    else:
        keys.sort(key=utf16_key)
    return {k: d[k] for k in keys}


# ---------------------------------------------------------------- numbers

@dataclass(frozen=True)
class _Decimal:
    """Exact value of a JSON number: sign x digits x 10^exp, digits without
    leading or trailing zeros ("" for zero)."""

    negative: bool = False
    digits: str = ""
    exp: int = 0
    huge: bool = False


def _parse_decimal(tok: str) -> _Decimal:
    negative = tok.startswith("-")
    if negative:
        tok = tok[1:]
    mant, exp_text = tok, ""
    for i, ch in enumerate(tok):
        if ch in "eE":
            mant, exp_text = tok[:i], tok[i + 1:]
            break
    int_part, frac = mant, ""
    if "." in mant:
        int_part, frac = mant.split(".", 1)
    digits = (int_part + frac).lstrip("0")
    trimmed = digits.rstrip("0")
    if not trimmed:
        return _Decimal()
    exp_negative = False
    if exp_text[:1] in ("+", "-"):
        exp_negative = exp_text[0] == "-"
        exp_text = exp_text[1:]
    exp_text = exp_text.lstrip("0")
    huge = False
    exp = 0
    if len(exp_text) > 10:
        huge = True
    elif exp_text:
        exp = int(exp_text)
    if exp_negative:
        exp = -exp
    exp += (len(digits) - len(trimmed)) - len(frac)
    if (huge and exp_negative) or exp < -_MAX_EXPONENT:
        return _Decimal(negative, trimmed, -1, True)
    if huge or exp > _MAX_EXPONENT:
        return _Decimal(negative, trimmed, 1, True)
    return _Decimal(negative, trimmed, exp, False)


def _number_value(tok: str, allow_non_integer: bool) -> tuple[Any, str]:
    d = _parse_decimal(tok)
    if d.exp >= 0:  # an integer
        if not d.digits:
            return 0, ""
        if d.huge or len(d.digits) + d.exp > 16:
            return None, Kind.INTEGER_RANGE
        v = int(d.digits) * 10 ** d.exp
        if v > MAX_SAFE_INTEGER:
            return None, Kind.INTEGER_RANGE
        return (-v if d.negative else v), ""
    if not allow_non_integer:
        return None, Kind.NON_INTEGER
    f = float(tok)
    if math.isinf(f):
        return None, Kind.INEXACT_NUMBER
    if _parse_decimal(number_to_json(f)) != d:
        return None, Kind.INEXACT_NUMBER
    return f, ""


def number_to_json(f: float) -> str:
    """The ECMAScript Number.prototype.toString form of a finite double
    (RFC 8785 section 3.2.2.3). repr() gives the shortest digits that read
    back as the same double; this places the point and the exponent as
    ECMA-262 (7.1.12.1) does."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError("number_to_json: not a finite number")
    if f == 0:
        return "0"
    sign = ""
    if f < 0:
        sign, f = "-", -f
    r = repr(f)
    mant, _, e = r.partition("e")
    int_part, _, frac = mant.partition(".")
    all_digits = int_part + frac
    point = len(int_part) + (int(e) if e else 0)
    stripped = all_digits.lstrip("0")
    point -= len(all_digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    x = n - 1
    exp = ("+" if x >= 0 else "-") + str(abs(x))
    if k == 1:
        return sign + digits + "e" + exp
    return sign + digits[0] + "." + digits[1:] + "e" + exp


# ---------------------------------------------------------------- writer

def serialize(v: Any) -> bytes:
    """RFC 8785 bytes of a tree from parse() (members in canonical order).
    Values are not checked: use canonicalize_value for arbitrary values."""
    return serialize_text(v).encode("utf-8")


def serialize_text(v: Any) -> str:
    out: list[str] = []
    _write(v, out)
    return "".join(out)


def _write(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_json_string(v))
    elif isinstance(v, int):
        out.append(str(int(v)))
    elif isinstance(v, float):
        out.append(number_to_json(v))
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(",")
            first = False
            out.append(_json_string(k))
            out.append(":")
            _write(x, out)
        out.append("}")
    else:  # list
        out.append("[")
        first = True
        for x in v:
            if not first:
                out.append(",")
            first = False
            _write(x, out)
        out.append("]")


# ---------------------------------------------------------------- API

def parse(data: bytes | bytearray | memoryview, domain: Domain = Domain(), *,
          normalize_nfc: bool = False, keep_order: bool = False) -> Any:
    """Check JSON text against the strict domain and return its value tree
    (see the module doc). Raises DomainError. With normalize_nfc, strings
    and names are converted to NFC on purpose instead of refused (Go's
    commit.NormalizeNFC). With keep_order, objects keep their members in
    the order written (for readers that, like Go's encoding/json, let a
    later member win), not in canonical order."""
    if isinstance(data, str):
        raise TypeError("parse takes the raw bytes of JSON text, not str")
    data = bytes(data)
    limit = domain._max_bytes()
    if len(data) > limit:
        raise DomainError(Kind.TOO_LARGE, "", offset=limit)
    if not normalize_nfc and not keep_order and _FAST:
        fast = _fast(data, domain)
        if fast is not None:
            return fast[0]
    p = _Parser(data, domain, normalize_nfc, keep_order)
    # With normalize_nfc, names are converted before they are compared,
    # so names that become equal are refused as duplicate_key.
    return p.document()


def parse_canonical(data: bytes, domain: Domain = Domain()) -> tuple[Any, bytes]:
    """parse() and serialize() in one: the value tree and its RFC 8785
    bytes."""
    data = bytes(data)
    if _FAST and len(data) <= domain._max_bytes():
        fast = _fast(data, domain)
        if fast is not None:
            return fast
    v = parse(data, domain)
    return v, serialize(v)


def canonicalize(data: bytes, domain: Domain = Domain()) -> bytes:
    """RFC 8785 form of JSON text inside the strict domain (any JSON value
    at top level)."""
    return parse_canonical(data, domain)[1]


# ---------------------------------------------------------------- fast path
# The tokenizer above is the reference: it finds every fault, with its
# kind and pointer, but costs a Python step per token. Most inputs are in
# the domain, so they are read first by the json module's C scanner, with
# hooks that see every number as its lexeme, every object's members in
# order (duplicates) and every NaN or Infinity, and the result is then held
# to the rules the scanner does not know: nesting depth, lone surrogates
# (the canonical text does not encode as UTF-8), the code points of
# docs/commitment.md section 2.4 (any of them sends the text to the
# reference tokenizer, which names the string) and NFC (checked over the
# canonical text, whose escapes never take part in a composition, so that a
# string out of NFC always leaves the text out of NFC; the reverse can
# happen, "\n" before U+0301, and only costs the slow path). Anything
# amiss, or any doubt, sends the input to the reference tokenizer, which
# decides and names the fault. The conformance corpus and the
# differential texts run through both paths (tests/test_fastpath.py).

_FAST = True


class _Fallback(Exception):
    pass


_STRING_BODY = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_KEEP_BRACKETS = {i: None for i in range(128) if chr(i) not in "[]{}"}


def _parse_int(lex: str) -> int:
    if len(lex) <= 16:
        v = int(lex)
        if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            return v
    raise _Fallback


def _parse_integer_float(lex: str) -> Any:
    v, kind = _number_value(lex, False)
    if kind:
        raise _Fallback
    return SpelledInt(v)


def _parse_admitted_float(lex: str) -> Any:
    v, kind = _number_value(lex, True)
    if kind:
        raise _Fallback
    return SpelledInt(v) if type(v) is int else v


def _constant(lex: str) -> Any:
    raise _Fallback


def _pairs(items: list) -> dict:
    d = dict(items)
    if len(d) != len(items):
        raise _Fallback
    return _sorted_dict(d)


_DECODERS = {
    allow: json.JSONDecoder(parse_int=_parse_int, parse_constant=_constant, object_pairs_hook=_pairs,
                            parse_float=_parse_admitted_float if allow else _parse_integer_float)
    for allow in (False, True)
}


def _fast(data: bytes, domain: Domain) -> tuple[Any, bytes] | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    allow = domain.allow_non_integer
    try:
        tree = _DECODERS[allow].decode(text)
    except (ValueError, _Fallback, RecursionError):
        return None
    # Nesting depth, counted over the text without its strings (only when
    # there are enough brackets for it to matter).
    limit = domain._max_depth()
    if text.count("[") + text.count("{") > limit:
        brackets = _STRING_BODY.sub("", text).translate(_KEEP_BRACKETS)
        if max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, map(ord, brackets))), default=0) > limit:
            return None
    if allow:
        out = serialize_text(tree)  # floats in the ECMAScript form
    else:
        out = json.dumps(tree, ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)
    if not out.isascii() and (has_unstable_normalization(out) or not unicodedata.is_normalized("NFC", out)):
        return None
    try:
        return tree, out.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


def canonicalize_value(v: Any, domain: Domain = Domain()) -> bytes:
    """Check a Python value against the domain and return the RFC 8785 form
    of the JSON value it stands for. Accepted: None, bool, str, int (within
    +-(2^53-1)), float whose value is an integer within that range, or, when
    allow_non_integer is set, any finite float; dicts with str keys, lists
    and tuples of accepted values. Anything else is unsupported_type."""
    tree = _check_value(v, domain, [], 0)
    b = serialize(tree)
    if len(b) > domain._max_bytes():
        raise DomainError(Kind.TOO_LARGE, "")
    return b


def _check_value(v: Any, domain: Domain, path: list, depth: int) -> Any:
    if v is None or v is True or v is False:
        return v
    if isinstance(v, str):
        if _has_surrogate(v):
            raise DomainError(Kind.LONE_SURROGATE, pointer(path))
        if fault := normalization_fault(v):
            raise DomainError(fault, pointer(path))
        return str(v)
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            raise DomainError(Kind.INTEGER_RANGE, pointer(path))
        return int(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise DomainError(Kind.NON_FINITE, pointer(path))
        if v == int(v):
            if abs(v) > MAX_SAFE_INTEGER:
                raise DomainError(Kind.INTEGER_RANGE, pointer(path))
            return int(v)
        if not domain.allow_non_integer:
            raise DomainError(Kind.NON_INTEGER, pointer(path))
        return float(v)
    if isinstance(v, dict):
        depth += 1
        if depth > domain._max_depth():
            raise DomainError(Kind.TOO_DEEP, pointer(path))
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise DomainError(Kind.UNSUPPORTED_TYPE, pointer(path), key=True,
                                  py_type=type(k).__name__)
            if _has_surrogate(k):
                raise DomainError(Kind.LONE_SURROGATE, pointer(path), key=True)
            if fault := normalization_fault(k):
                raise DomainError(fault, pointer(path), key=True)
            path.append(k)
            out[str(k)] = _check_value(x, domain, path, depth)
            path.pop()
        return _sorted_dict(out)
    if isinstance(v, (list, tuple)):
        depth += 1
        if depth > domain._max_depth():
            raise DomainError(Kind.TOO_DEEP, pointer(path))
        out_l = []
        for i, x in enumerate(v):
            path.append(i)
            out_l.append(_check_value(x, domain, path, depth))
            path.pop()
        return out_l
    raise DomainError(Kind.UNSUPPORTED_TYPE, pointer(path), py_type=type(v).__name__)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(s: str) -> bool:
    return _SURROGATE.search(s) is not None


def object_members_raw(data: bytes, domain: Domain = Domain(max_bytes=_MAX_INPUT_BYTES)) -> dict[str, tuple[Any, bytes]]:
    """Parse a JSON object strictly and return each top-level member's value
    with the exact bytes it was written as (for a receipt's entry, whose
    bytes are hashed as they stand)."""
    data = bytes(data)
    p = _Parser(data, domain)
    p.skip_space()
    if p.pos >= len(data) or data[p.pos] != 0x7B:
        raise DomainError(Kind.NOT_OBJECT, "", offset=p.pos)
    p.enter()
    p.pos += 1
    out: dict[str, tuple[Any, bytes]] = {}
    p.skip_space()
    if p.pos < len(data) and data[p.pos] == 0x7D:
        p.pos += 1
    else:
        while True:
            p.skip_space()
            if p.pos >= len(data) or data[p.pos] != 0x22:
                raise p.fail_key(Kind.SYNTAX, p.pos)
            name, kind, at = p.string()
            if kind:
                raise p.fail_key(kind, at)
            p.skip_space()
            if p.pos >= len(data) or data[p.pos] != 0x3A:
                raise p.fail_key(Kind.SYNTAX, p.pos)
            p.pos += 1
            p.skip_space()
            p.path.append(name)
            start = p.pos
            v = p.value()
            if name in out:
                raise p.fail(Kind.DUPLICATE_KEY, start)
            out[name] = (v, data[start:p.pos])
            p.path.pop()
            p.skip_space()
            if p.pos >= len(data):
                raise p.fail(Kind.SYNTAX, p.pos)
            if data[p.pos] == 0x2C:
                p.pos += 1
            elif data[p.pos] == 0x7D:
                p.pos += 1
                break
            else:
                raise p.fail(Kind.SYNTAX, p.pos)
    p.skip_space()
    if p.pos != len(data):
        raise p.fail(Kind.SYNTAX, p.pos)
    return out
