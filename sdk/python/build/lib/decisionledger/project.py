"""Projections (docs/declarations.md section 2).

Each projection fails closed: bad input raises ProjectionError naming the
projection and the rule, never the input. URLs are read exactly as Go's
net/url.Parse reads them (Go 1.26, strict colons), which the specification
names; _GoURL below is a port of the parts the projections depend on.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from .errors import LedgerError

__all__ = [
    "UNMATCHED",
    "ProjectionError",
    "recipient_domain",
    "payee_known",
    "endpoint_host",
    "route_shape",
    "resource_dir",
    "byte_size",
    "count",
]

UNMATCHED = "unmatched"


class ProjectionError(LedgerError, ValueError):
    """A projection refused its input. The message names the projection
    and the rule, never the input."""

    def __init__(self, projection: str, problem: str):
        self.projection = projection
        self.problem = problem
        super().__init__(f"projection {projection}: {problem}")


_HOST_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")


def _to_lower(b: bytes) -> bytes:
    # Go's strings.ToLower (Unicode simple case mapping). Only ASCII
    # letters, U+0130 (to "i") and U+212A (to "k") lower-case to ASCII;
    # every other non-ASCII character stays non-ASCII, which the host name
    # rule refuses either way, so it is left as is.
    return b.replace("\u0130".encode(), b"i").replace("\u212a".encode(), b"k").lower()


def _valid_hostname(h: bytes) -> bool:
    if not h or len(h) > 253:
        return False
    labels = h.split(b".")
    if len(labels) < 2:
        return False
    for label in labels:
        if not label or len(label) > 63 or label[0] == 0x2D or label[-1] == 0x2D:
            return False
        if not _HOST_CHARS.issuperset(label):
            return False
    return True


def recipient_domain(v: Any) -> str:
    name = "recipient_domain"
    if not isinstance(v, str):
        raise ProjectionError(name, "not a string")
    local, at, domain = v.partition("@")
    if not at or not local or "@" in domain:
        raise ProjectionError(name, "not an email address")
    d = _to_lower(domain.encode("utf-8"))
    if not _valid_hostname(d):
        raise ProjectionError(name, "the domain is not ASCII letters, digits and hyphens in dot-separated labels")
    return d.decode("ascii")


def payee_known(v: Any, allowlist: Any) -> bool:
    """True exactly when v is a string on the allowlist (compared as is);
    False otherwise, and when the list is missing (None)."""
    return isinstance(v, str) and allowlist is not None and v in allowlist


def endpoint_host(v: Any) -> str:
    name = "endpoint_host"
    u = _parse_http_url(v, name)
    host = _to_lower(u.hostname())
    if not _valid_hostname(host):
        raise ProjectionError(name, "the host is not a DNS name of ASCII labels")
    return host.decode("ascii")


def route_shape(v: Any, templates: list[str]) -> str:
    name = "route_shape"
    u = _parse_http_url(v, name)
    path = u.escaped_path()
    ps = path.split(b"/")
    for t in templates:
        ts = t.encode("utf-8").split(b"/")
        if len(ts) != len(ps):
            continue
        for tseg, pseg in zip(ts, ps):
            if tseg.startswith(b"{") and tseg.endswith(b"}"):
                if not pseg:
                    break
            elif tseg != pseg:
                break
        else:
            return t
    return UNMATCHED


def resource_dir(v: Any) -> str:
    name = "resource_dir"
    if not isinstance(v, str):
        raise ProjectionError(name, "not a string")
    if not v or "\\" in v or "\x00" in v:
        raise ProjectionError(name, "not a slash-separated path")
    segments = (v[1:] if v.startswith("/") else v).split("/")
    for seg in segments:
        if seg in ("", ".", ".."):
            raise ProjectionError(name, "the path has an empty or dot segment")
    return "/" + "/".join(segments[:-1])


def byte_size(v: Any) -> int:
    if not isinstance(v, str):
        raise ProjectionError("byte_size", "not a string")
    return len(v.encode("utf-8"))


def count(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, list):
        return len(v)
    raise ProjectionError("count", "not an array")


def _parse_http_url(v: Any, name: str) -> "_GoURL":
    if not isinstance(v, str):
        raise ProjectionError(name, "not a string")
    try:
        u = _GoURL.parse(v.encode("utf-8"))
    except _URLError:
        raise ProjectionError(name, "not an absolute http or https URL") from None
    if u.scheme not in (b"http", b"https") or not u.host or u.opaque:
        raise ProjectionError(name, "not an absolute http or https URL")
    return u


# ---------------------------------------------------------------- Go's net/url

class _URLError(Exception):
    pass


_PATH, _PATH_SEGMENT, _HOST, _ZONE, _USER_PASSWORD, _QUERY_COMPONENT, _FRAGMENT = range(7)
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _should_escape(c: int, mode: int) -> bool:
    # net/url's shouldEscape (gen_encoding_table.go).
    if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39:
        return False
    if mode in (_HOST, _ZONE) and c in b"!$&'()*+,;=:[]<>\"":
        return False
    if c in b"-_.~":
        return False
    if c in b"$&+,/:;=?@":
        if mode == _PATH:
            return c == 0x3F
        if mode == _PATH_SEGMENT:
            return c in b"/;,?"
        if mode == _USER_PASSWORD:
            return c in b"@/?:"
        if mode == _QUERY_COMPONENT:
            return True
        if mode == _FRAGMENT:
            return False
    if mode == _FRAGMENT and c in b"!()*":
        return False
    return True


def _unhex(c: int) -> int:
    return int(chr(c), 16)


def _unescape(s: bytes, mode: int) -> bytes:
    i, n = 0, len(s)
    any_escape = False
    while i < n:
        c = s[i]
        if c == 0x25:
            any_escape = True
            if i + 2 >= n or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise _URLError("invalid URL escape")
            if mode == _HOST and _unhex(s[i + 1]) < 8 and s[i:i + 3] != b"%25":
                raise _URLError("invalid URL escape")
            if mode == _ZONE:
                v = _unhex(s[i + 1]) << 4 | _unhex(s[i + 2])
                if s[i:i + 3] != b"%25" and v != 0x20 and _should_escape(v, _HOST):
                    raise _URLError("invalid URL escape")
            i += 3
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise _URLError("invalid character in host name")
            i += 1
    if not any_escape and not (mode == _QUERY_COMPONENT and b"+" in s):
        return s
    out = bytearray()
    i = 0
    while i < n:
        c = s[i]
        if c == 0x25:
            out.append(_unhex(s[i + 1]) << 4 | _unhex(s[i + 2]))
            i += 3
            continue
        if c == 0x2B and mode == _QUERY_COMPONENT:
            out.append(0x20)
        else:
            out.append(c)
        i += 1
    return bytes(out)


def _escape(s: bytes, mode: int) -> bytes:
    out = bytearray()
    for c in s:
        if c == 0x20 and mode == _QUERY_COMPONENT:
            out.append(0x2B)
        elif _should_escape(c, mode):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)


def _valid_encoded(s: bytes, mode: int) -> bool:
    for c in s:
        if c in b"!$&'()*+,;=:@[]%":
            continue
        if _should_escape(c, mode):
            return False
    return True


def _valid_optional_port(port: bytes) -> bool:
    if not port:
        return True
    if port[0] != 0x3A:
        return False
    return all(0x30 <= c <= 0x39 for c in port[1:])


def _valid_userinfo(s: bytes) -> bool:
    try:
        text = s.decode("utf-8")
    except UnicodeDecodeError:
        return False
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch in "-._:~!$&'()*+,;=%@"):
            continue
        return False
    return True


class _GoURL:
    __slots__ = ("scheme", "opaque", "host", "path", "raw_path")

    def __init__(self) -> None:
        self.scheme = b""
        self.opaque = b""
        self.host = b""
        self.path = b""
        self.raw_path = b""

    @classmethod
    def parse(cls, raw: bytes) -> "_GoURL":
        u_text, _, frag = raw.partition(b"#")
        u = cls._parse(u_text)
        if frag:
            _unescape(frag, _FRAGMENT)
        return u

    @classmethod
    def _parse(cls, raw: bytes) -> "_GoURL":
        if any(c < 0x20 or c == 0x7F for c in raw):
            raise _URLError("invalid control character in URL")
        u = cls()
        if raw == b"*":
            u.path = b"*"
            return u
        scheme, rest = _get_scheme(raw)
        u.scheme = scheme.lower()
        if rest.endswith(b"?") and rest.count(b"?") == 1:
            rest = rest[:-1]
        else:
            rest = rest.partition(b"?")[0]
        if not rest.startswith(b"/"):
            if u.scheme:
                u.opaque = rest
                return u
            if b":" in rest.partition(b"/")[0]:
                raise _URLError("first path segment in URL cannot contain colon")
        if (u.scheme or not rest.startswith(b"///")) and rest.startswith(b"//"):
            authority, slash, tail = rest[2:].partition(b"/")
            rest = slash + tail
            u.host = _parse_authority(u.scheme, authority)
        path = _unescape(rest, _PATH)
        u.path = path
        u.raw_path = b"" if _escape(path, _PATH) == rest else rest
        return u

    def escaped_path(self) -> bytes:
        if self.raw_path and _valid_encoded(self.raw_path, _PATH):
            try:
                p = _unescape(self.raw_path, _PATH)
            except _URLError:
                p = None
            if p == self.path:
                return self.raw_path
        if self.path == b"*":
            return b"*"
        return _escape(self.path, _PATH)

    def hostname(self) -> bytes:
        host = self.host
        colon = host.rfind(b":")
        if colon != -1 and _valid_optional_port(host[colon:]):
            host = host[:colon]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host


def _get_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == 0x3A:
            if i == 0:
                raise _URLError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return b"", raw
    return b"", raw


def _parse_authority(scheme: bytes, authority: bytes) -> bytes:
    i = authority.rfind(b"@")
    host = _parse_host(scheme, authority if i < 0 else authority[i + 1:])
    if i < 0:
        return host
    userinfo = authority[:i]
    if not _valid_userinfo(userinfo):
        raise _URLError("invalid userinfo")
    if b":" not in userinfo:
        _unescape(userinfo, _USER_PASSWORD)
    else:
        user, _, password = userinfo.partition(b":")
        _unescape(user, _USER_PASSWORD)
        _unescape(password, _USER_PASSWORD)
    return host


def _parse_host(scheme: bytes, host: bytes) -> bytes:
    open_bracket = host.rfind(b"[")
    if open_bracket > 0:
        raise _URLError("invalid IP-literal")
    if open_bracket == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise _URLError("missing ']' in host")
        colon_port = host[close + 1:]
        if not _valid_optional_port(colon_port):
            raise _URLError("invalid port")
        colon_port = _unescape(colon_port, _HOST)
        hostname = host[1:close]
        zone = hostname.find(b"%25")
        if zone >= 0:
            unescaped = _unescape(hostname[:zone], _HOST) + _unescape(hostname[zone:], _ZONE)
        else:
            unescaped = _unescape(hostname, _HOST)
        if not _is_ipv6(unescaped):
            raise _URLError("invalid IP-literal")
        return b"[" + unescaped + b"]" + colon_port
    i = host.find(b":")
    if i != -1:
        last = host.rfind(b":")
        if last != i and scheme not in (b"http", b"https"):
            i = last
        if not _valid_optional_port(host[i:]):
            raise _URLError("invalid port")
    return _unescape(host, _HOST)


def _is_ipv6(b: bytes) -> bool:
    # Go's netip.ParseAddr accepting an IPv6 address (with an optional
    # non-empty zone) and not an IPv4 one.
    try:
        text = b.decode("ascii")
    except UnicodeDecodeError:
        return False
    addr, pct, zone = text.partition("%")
    if pct and not zone:
        return False
    try:
        ipaddress.IPv6Address(addr)
    except ValueError:
        return False
    return True
