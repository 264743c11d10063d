"""Previews (docs/approvals.md section Previews): a preview document is
redacted first, then bounded, written in RFC 8785 form and digested

    digest = SHA-256("ledger/v1/preview\\n" || preview)

exactly as ledgerd's approval/preview.Render does, so that a workload can
show (and digest) what an approver will see before it asks.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .canonical import Domain, parse, utf16_key
from .canonical import _json_string  # type: ignore[attr-defined]
from .errors import DomainError, LedgerError

__all__ = [
    "PREVIEW_DOMAIN_SEPARATOR",
    "MARKER",
    "CEILING",
    "PASSES",
    "Preview",
    "PreviewInputError",
    "render",
    "preview_digest",
]

PREVIEW_DOMAIN_SEPARATOR = b"ledger/v1/preview\n"
MARKER = "[REDACTED]"
MAX_INPUT_BYTES = 1 << 20
CEILING = 8192
# (chars per string, items per array, fields per object, depth)
PASSES = ((1000, 50, 100, 8), (256, 20, 40, 6), (64, 5, 15, 4), (16, 2, 6, 3))
FALLBACK_PASS = len(PASSES) + 1
DEPTH_MARKER = "[depth limit]"
TOO_LARGE_MARKER = "[too large]"
_FIELDS_NAME = "\u2026"


class PreviewInputError(LedgerError, ValueError):
    """A preview document outside the strict domain: the kind, the pointer
    (a member name with a credential shape written [REDACTED]), whether the
    fault is in a member name, and the byte offset. Never a value."""

    def __init__(self, kind: str, pointer: str, key: bool, offset: int):
        self.kind = kind
        self.code = kind
        self.pointer = pointer
        self.key = key
        self.offset = offset
        where = "in a member name of the object at" if key else "at"
        super().__init__(f"preview: {kind} {where} {pointer!r} (byte {offset})")


@dataclass(frozen=True)
class Preview:
    json: bytes        # canonical, at most 8,192 bytes
    digest: str        # "sha256:<hex>"
    redacted: int      # replacements made by redaction
    truncated: bool    # a truncation marker was written, or the fallback
    passes: int        # 1-4, or 5 for the fallback

    @property
    def pass_(self) -> int:
        return self.passes


def preview_digest(preview: bytes) -> str:
    return "sha256:" + hashlib.sha256(PREVIEW_DOMAIN_SEPARATOR + preview).hexdigest()


# ---------------------------------------------------------------- names

_SUBSTRINGS = ("password", "passwd", "passphrase", "passcode", "secret", "apikey", "accesskey",
               "privatekey", "privkey", "signingkey", "encryptionkey", "credential", "authorization",
               "cookie", "bearer", "sessionid", "sessionkey", "csrf", "xsrf")
_WORDS = frozenset(("token", "auth", "session", "otp", "ssn", "pwd", "pass", "jwt", "cvv", "cvc"))
_NAMES = ("pin", "pincode")


def _lower(ch: str) -> str:
    # Go's unicode.ToLower: the simple mapping, one code point for one.
    if ch == "\u0130":
        return "i"
    low = ch.lower()
    return low if len(low) == 1 else ch


def _fold_name(name: str) -> str:
    return "".join(_lower(c) for c in name if c not in "_-. ")


def _name_words(name: str) -> list[str]:
    words: list[str] = []
    cur: list[str] = []
    prev = ""
    for c in name:
        cat = unicodedata.category(c)
        if cat[0] != "L":
            if cur:
                words.append("".join(_lower(x) for x in cur))
                cur = []
        elif cat == "Lu" and prev and unicodedata.category(prev) == "Ll":
            if cur:
                words.append("".join(_lower(x) for x in cur))
            cur = [c]
        else:
            cur.append(c)
        prev = c
    if cur:
        words.append("".join(_lower(x) for x in cur))
    return words


def sensitive_name(name: str) -> bool:
    folded = _fold_name(name)
    if any(s in folded for s in _SUBSTRINGS) or folded in _NAMES:
        return True
    return any(w in _WORDS for w in _name_words(name))


# ---------------------------------------------------------------- shapes
# Go's RE2 patterns, written for Python's re: \b with re.ASCII (RE2's \b is
# ASCII), \s spelled out as RE2's [\t\n\f\r ], (?i) spelled out as the
# classes Go's simple case folding gives (s also matches U+017F).

_WS = r"[\t\n\f\r ]"


def _contains(*subs):
    return lambda s: any(x in s for x in subs)


def _contains_fold(word: str):
    # Go's containsFold: an ASCII word in any case, byte window by window.
    w = word.lower()
    return lambda s: w in s.lower() if s.isascii() else w in "".join(c.lower() if c.isascii() else "\0" for c in s)


def _is_basic_credential(s: str) -> bool:
    # Go: base64.StdEncoding, else RawStdEncoding of s without its "="
    # padding. The pattern admits only the alphabet and up to two trailing
    # "="; either decoder accepts exactly when the unpadded length is not
    # 1 more than a multiple of 4 (neither is strict about padding bits).
    t = s.rstrip("=")
    if len(t) % 4 == 1:
        return False
    b = binascii.a2b_base64(t + "=" * (-len(t) % 4))
    return b.find(b":") > 0


_RULES = [
    # (hint, compiled pattern, group replaced, check)
    (_contains("PRIVATE KEY-----"),
     re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)", re.ASCII), 0, None),
    (_contains("://"),
     re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\t\n\f\r :@]*:([^/?#\t\n\f\r @]+)@", re.ASCII), 1, None),
    (_contains_fold("bearer"),
     re.compile(r"\b[Bb][Ee][Aa][Rr][Ee][Rr]" + _WS + r"+([A-Za-z0-9._~+/-]{16,}=*)", re.ASCII), 1, None),
    (_contains_fold("basic"),
     re.compile(r"\b[Bb][Aa][Ss\u017f][Ii][Cc]" + _WS + r"+([A-Za-z0-9+/]{4,}={0,2})", re.ASCII), 1, _is_basic_credential),
    (_contains(".eyJ"),
     re.compile(r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*", re.ASCII), 0, None),
    (_contains("AKIA", "ASIA", "_live_", "_test_", "gh", "xox", "sk-", "AIza", "glpat-", "npm_"),
     re.compile(r"\b(?:"
                r"(?:AKIA|ASIA)[0-9A-Z]{16}"
                r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"
                r"|gh[pousr]_[A-Za-z0-9]{36,}"
                r"|github_pat_[A-Za-z0-9_]{22,}"
                r"|xox[abposr]-[A-Za-z0-9-]{10,}"
                r"|sk-[A-Za-z0-9_-]{20,}"
                r"|AIza[0-9A-Za-z_-]{35}"
                r"|glpat-[A-Za-z0-9_-]{20,}"
                r"|npm_[A-Za-z0-9]{36}"
                r")", re.ASCII), 0, None),
]

_TOKEN_RUN = re.compile(r"[A-Za-z0-9+=_-]{32,}")
_MAX_ROUNDS = 8


def _redact_tokens(s: str) -> tuple[str, int]:
    out: list[str] = []
    last = n = 0
    for m in _TOKEN_RUN.finditer(s):
        t = m.group()
        if re.search("[A-Z]", t) and re.search("[a-z]", t) and re.search("[0-9]", t):
            out.append(s[last:m.start()])
            out.append(MARKER)
            last = m.end()
            n += 1
    if n == 0:
        return s, 0
    out.append(s[last:])
    return "".join(out), n


def _redact_once(s: str) -> tuple[str, int]:
    total = 0
    for hint, pattern, group, check in _RULES:
        if not hint(s):
            continue
        out: list[str] = []
        last = n = 0
        for m in pattern.finditer(s):
            lo, hi = m.span(group)
            if lo < 0 or s[lo:hi] == MARKER or (check is not None and not check(s[lo:hi])):
                continue
            out.append(s[last:lo])
            out.append(MARKER)
            last = hi
            n += 1
        if n:
            out.append(s[last:])
            s = "".join(out)
            total += n
    s, n = _redact_tokens(s)
    return s, total + n


def redact_string(s: str) -> tuple[str, int]:
    total = 0
    for _ in range(_MAX_ROUNDS):
        s, n = _redact_once(s)
        if n == 0:
            if total > 0 and not unicodedata.is_normalized("NFC", s):
                return MARKER, total
            return s, total
        total += n
    return MARKER, total


def _secret_shaped(s: str) -> bool:
    return redact_string(s)[1] > 0


# ---------------------------------------------------------------- tree

class _Member:
    __slots__ = ("name", "value", "renamed")

    def __init__(self, name: str, value: Any):
        self.name = name
        self.value = value
        self.renamed = False


class _Obj:
    __slots__ = ("members",)

    def __init__(self, members: list[_Member]):
        self.members = members


def _from_tree(v: Any) -> Any:
    if isinstance(v, dict):
        return _Obj([_Member(k, _from_tree(x)) for k, x in v.items()])  # already in canonical order
    if isinstance(v, list):
        return [_from_tree(x) for x in v]
    return v


def _sort(members: list[_Member]) -> None:
    members.sort(key=lambda m: utf16_key(m.name))


def _redact_value(v: Any) -> tuple[Any, int]:
    if isinstance(v, str):
        return redact_string(v)
    if isinstance(v, list):
        n = 0
        for i, x in enumerate(v):
            v[i], k = _redact_value(x)
            n += k
        return v, n
    if isinstance(v, _Obj):
        n = 0
        renamed = False
        for m in v.members:
            if _secret_shaped(m.name):
                m.renamed = renamed = True
                n += 1
            elif sensitive_name(m.name):
                m.value = MARKER
                n += 1
                continue
            m.value, k = _redact_value(m.value)
            n += k
        if renamed:
            _name_redacted(v.members)
            _sort(v.members)
        return v, n
    return v, 0


def _name_redacted(members: list[_Member]) -> None:
    taken = {m.name for m in members if not m.renamed}
    k = 0
    for m in members:
        if not m.renamed:
            continue
        m.renamed = False
        while True:
            k += 1
            name = MARKER if k == 1 else f"[REDACTED {k}]"
            if name not in taken:
                m.name = name
                taken.add(name)
                break


# ---------------------------------------------------------------- writer

class _Over(Exception):
    pass


class _Writer:
    def __init__(self, limits: tuple[int, int, int, int] | None):
        self.limits = limits
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False

    def raw(self, s: str) -> None:
        self.parts.append(s)
        self.size += len(s.encode("utf-8")) if not s.isascii() else len(s)
        if self.limits is not None and self.size > CEILING:
            raise _Over

    def text(self, s: str) -> None:
        if not s.isascii() and not unicodedata.is_normalized("NFC", s):
            raise _Over  # commit.AppendString refuses it: this pass fails
        self.raw(_json_string(s))

    def value(self, v: Any, depth: int) -> None:
        lim = self.limits
        if isinstance(v, (list, _Obj)) and lim is not None and depth + 1 > lim[3]:
            self.truncated = True
            self.text(DEPTH_MARKER)
            return
        if v is None:
            self.raw("null")
        elif v is True:
            self.raw("true")
        elif v is False:
            self.raw("false")
        elif isinstance(v, int):
            self.raw(str(int(v)))
        elif isinstance(v, str):
            if lim is not None:
                s, clipped = _clip_text(v, lim[0])
                if clipped:
                    s, _ = redact_string(s)
                    self.truncated = True
            else:
                s = v
            self.text(s)
        elif isinstance(v, list):
            self.raw("[")
            for i, x in enumerate(v):
                if i > 0:
                    self.raw(",")
                if lim is not None and i == lim[1]:
                    self.truncated = True
                    self.text(f"[+{len(v) - i} items]")
                    break
                self.value(x, depth + 1)
            self.raw("]")
        else:
            kept = v.members
            marker = None
            if lim is not None and len(kept) > lim[2]:
                kept = kept[:lim[2]]
                name = _FIELDS_NAME
                while any(m.name == name for m in kept):
                    name += _FIELDS_NAME
                marker = _Member(name, f"[+{len(v.members) - len(kept)} fields]")
                self.truncated = True
            self.raw("{")
            first = True
            for m in kept:
                if marker is not None and utf16_key(marker.name) < utf16_key(m.name):
                    first = self._emit(marker, depth, first)
                    marker = None
                first = self._emit(m, depth, first)
            if marker is not None:
                self._emit(marker, depth, first)
            self.raw("}")

    def _emit(self, m: _Member, depth: int, first: bool) -> bool:
        if not first:
            self.raw(",")
        self.text(m.name)
        self.raw(":")
        self.value(m.value, depth + 1)
        return False

    def output(self) -> bytes:
        return "".join(self.parts).encode("utf-8")


def _clip_text(s: str, limit: int) -> tuple[str, bool]:
    n = len(s)
    if n <= limit:
        return s, False
    cut = kept = limit
    while True:
        at = s.find(MARKER, max(0, cut - len(MARKER) + 1), min(n, cut + len(MARKER) - 1))
        if at >= 0:
            kept -= cut - at
            cut = at
        out = s[:cut] + f"\u2026[+{n - kept} chars]"
        if cut == 0 or unicodedata.is_normalized("NFC", out):
            return out, True
        cut -= 1
        kept -= 1


# ---------------------------------------------------------------- render

def render(doc: bytes) -> Preview:
    """Redact, bound, write and digest a preview document (bytes of one
    JSON value in the strict domain). Raises PreviewInputError."""
    try:
        tree = parse(doc, Domain(max_bytes=MAX_INPUT_BYTES))
    except DomainError as e:
        raise PreviewInputError(e.kind, _safe_pointer(e.pointer), e.key, e.offset) from None
    v, redacted = _redact_value(_from_tree(tree))
    out = None
    for i, limits in enumerate(PASSES):
        w = _Writer(limits)
        try:
            w.value(v, 0)
        except _Over:
            continue
        out, truncated, passes = w.output(), w.truncated, i + 1
        break
    if out is None:
        w = _Writer(None)
        try:
            w.value(v, 0)
        except _Over:
            pass
        size = len(w.output())
        out = ('{"bytes":%d,"\u2026":"%s"}' % (size, TOO_LARGE_MARKER)).encode("utf-8")
        truncated, passes = True, FALLBACK_PASS
    return Preview(json=out, digest=preview_digest(out), redacted=redacted, truncated=truncated, passes=passes)


def _safe_pointer(p: str) -> str:
    if p == "":
        return p
    segs = p[1:].split("/")
    for i, s in enumerate(segs):
        if _secret_shaped(s.replace("~1", "/").replace("~0", "~")):
            segs[i] = MARKER
    return "/" + "/".join(segs)
