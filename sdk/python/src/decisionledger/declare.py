"""Action declarations, minimization and their digests (docs/declarations.md).

    decl = Declaration.parse(open("send_email.json", "rb").read())
    r = decl.minimize(raw_params_bytes, allowlists={"payees": {"ACME"}})
    r.params.digest, r.params.size, r.attributes, r.tiers_digest
    r = decl.minimize(raw_params_bytes, hiding=True)   # version 2: r.disclosure opens r.params

The declaration file is read the way Go's package commit/declare reads it:
inside the strict domain first, then decoded as Go's encoding/json decodes
into its structure (members matched without regard to ASCII case, null read
as absent, a member of the wrong JSON type or an unknown member refused at
the document), then checked rule by rule.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field as _dc_field
from typing import Any, Iterable, Mapping

from . import project
from .canonical import Domain, SpelledInt, canonicalize_value, parse
from .digest import Commitment, commit_canonical, params_tree, parse_digest, MalformedDigestError
from .errors import DomainError, LedgerError
from .hiding import Disclosure, OpeningSource, hide_tree

__all__ = [
    "VERSION",
    "ACTION_DOMAIN_SEPARATOR",
    "TIERS_DOMAIN_SEPARATOR",
    "DeclarationError",
    "Field",
    "Tool",
    "Declaration",
    "Minimized",
    "tiers_digest",
    "is_field_name",
    "is_action_name",
]

VERSION = 1
ACTION_DOMAIN_SEPARATOR = b"ledger/v1/action\n"
TIERS_DOMAIN_SEPARATOR = b"ledger/v1/tiers\n"

MAX_FIELDS = 256
MAX_NAME_BYTES = 64
MAX_ROUTES = 256
MAX_TOOL_NAME_BYTES = 1024

TYPES = ("string", "integer", "boolean", "string_list", "json")
TIERS = ("policy", "derived", "payload")
_TIER_RANK = {"payload": 0, "derived": 1, "policy": 2}

# projection: (the field type it takes, the type it gives)
PROJECTIONS = {
    "recipient_domain": ("string", "string"),
    "payee_known": ("string", "boolean"),
    "endpoint_host": ("string", "string"),
    "route_shape": ("string", "string"),
    "resource_dir": ("string", "string"),
    "byte_size": ("string", "integer"),
    "count": ("string_list", "integer"),
}

_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_ACTION_PART = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_ACTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*\Z")
_ROUTE_VAR = re.compile(r"\{[a-z][a-z0-9_]*\}\Z")


def is_field_name(name: str) -> bool:
    return len(name.encode()) <= MAX_NAME_BYTES and _FIELD_NAME.match(name) is not None


def is_action_name(name: str) -> bool:
    return len(name.encode()) <= MAX_NAME_BYTES and _ACTION_NAME.match(name) is not None


def is_action_part(name: str) -> bool:
    return len(name.encode()) <= MAX_NAME_BYTES and _ACTION_PART.match(name) is not None


class DeclarationError(LedgerError, ValueError):
    """A declaration, or a call, refused.

    code:    a stable string (docs/conformance.md): "declaration_invalid",
             "domain:<kind>", "field_absent", "field_type",
             "projection_refused", "floor_exceeded".
    pointer: an RFC 6901 pointer into the declaration ("/fields/x/tier") or
             into the call's parameters, shortened to the declared field
             ("/recipient"), or "(an undeclared field)". Never a value.
    """

    def __init__(self, code: str, pointer: str, problem: str, action: str = "",
                 cause: BaseException | None = None):
        self.code = code
        self.pointer = pointer
        self.problem = problem
        self.action = action
        self.cause = cause
        msg = "declare: "
        if action:
            msg += f"action {action}: "
        if pointer:
            msg += f"{pointer}: "
        super().__init__(msg + problem)


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    tier: str
    projections: tuple[str, ...] = ()
    optional: bool = False
    routes: tuple[str, ...] = ()
    allowlist: str = ""
    description: str = ""


@dataclass(frozen=True)
class Tool:
    server: str
    name: str
    definition_digest: str


@dataclass(frozen=True)
class Minimized:
    """What a workload sends for one call."""

    params: Commitment       # digest and size of the full raw parameters
    attributes: bytes        # the canonical minimized attributes
    tiers_digest: str        # the applied-tiers digest
    definition_digest: str   # the action definition digest
    # With hiding=True, the Disclosure that opens params (version 2): it
    # stays with the workload (Disclosure.write, mode 0600), never sent.
    disclosure: Disclosure | None = None


# ---------------------------------------------------------------- decoding

class _Decode(Exception):
    """An encoding/json-style decoding error: reported at the document."""


def _fold_eq(a: str, b: str) -> bool:
    # encoding/json's case-insensitive match of a member to a field name.
    # The field names are ASCII; K (U+212A) and long s (U+017F) fold to k, s.
    if len(a) != len(b) and not any(ch in a for ch in "\u212a\u017f"):
        return False
    a = a.replace("\u212a", "k").replace("\u017f", "s")
    return a.isascii() and a.lower() == b.lower()


def _decode_struct(obj: Any, fields: dict[str, str], what: str) -> dict[str, Any]:
    """Decode a JSON object into a struct-like dict the way encoding/json
    does with DisallowUnknownFields: each member is matched to a field
    exactly or without regard to case; a later match overwrites an
    earlier one; null leaves a field unset; a value of the wrong kind
    or an unknown member is an error (the first one in document order)."""
    if not isinstance(obj, dict):
        raise _Decode(f"not a {what} object")
    out: dict[str, Any] = {}
    for k, v in obj.items():
        target = k if k in fields else next((f for f in fields if _fold_eq(k, f)), None)
        if target is None:
            raise _Decode(f"unknown member {k!r}")
        if v is None:
            if fields[target] == "raw":
                out[target] = v
            continue
        out[target] = _decode_kind(v, fields[target], target)
    return out


def _decode_kind(v: Any, kind: str, name: str) -> Any:
    if kind == "raw":
        return v
    if kind == "int":
        if type(v) is not int:
            raise _Decode(f"member {name!r} is not a JSON int")
        return v
    if kind == "str":
        if not isinstance(v, str):
            raise _Decode(f"member {name!r} is not a JSON string")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise _Decode(f"member {name!r} is not a JSON bool")
        return v
    if kind == "strlist":
        if not isinstance(v, list):
            raise _Decode(f"member {name!r} is not a JSON array")
        out = []
        for x in v:
            if x is None:
                out.append("")
            elif not isinstance(x, str):
                raise _Decode(f"member {name!r} is not a JSON string")
            else:
                out.append(x)
        return out
    if kind == "fields":
        if not isinstance(v, dict):
            raise _Decode(f"member {name!r} is not a JSON object")
        return {n: ({} if fv is None else _decode_struct(fv, _FIELD_MEMBERS, "field")) for n, fv in v.items()}
    if kind == "tool":
        return _decode_struct(v, _TOOL_MEMBERS, "tool")
    raise AssertionError(kind)


_FILE_MEMBERS = {"declaration": "int", "action": "str", "description": "str", "fields": "fields",
                 "tool": "tool", "reviewed": "raw"}
_TOOL_MEMBERS = {"server": "str", "name": "str", "definition_digest": "str"}
_FIELD_MEMBERS = {"type": "str", "tier": "str", "projections": "strlist", "optional": "bool",
                  "routes": "strlist", "allowlist": "str", "description": "str"}


def _escape_pointer(s: str) -> str:
    return s.replace("~", "~0").replace("/", "~1")


# ---------------------------------------------------------------- Declaration

@dataclass(frozen=True)
class Declaration:
    action: str
    fields: tuple[Field, ...]
    description: str = ""
    tool: Tool | None = None
    unreviewed: bool = False
    _by_name: dict = _dc_field(default_factory=dict, compare=False, repr=False)

    @property
    def reviewed(self) -> bool:
        return not self.unreviewed

    def field(self, name: str) -> Field | None:
        return self._by_name.get(name)

    @classmethod
    def parse(cls, data: bytes) -> "Declaration":
        """Read a declaration file (bytes). Raises DeclarationError with
        code "declaration_invalid" and the pointer of the member at fault."""
        try:
            # In the order written: encoding/json matches members to
            # fields without regard to case, and a later match wins.
            doc = parse(data, keep_order=True)
        except DomainError as e:
            raise DeclarationError("declaration_invalid", e.pointer,
                                   "not in the strict JSON domain: " + e.kind, cause=e) from None
        try:
            f = _decode_struct(doc, _FILE_MEMBERS, "declaration")
        except _Decode as e:
            raise DeclarationError("declaration_invalid", "", str(e)) from None
        return cls._check(f)

    @classmethod
    def _check(cls, f: dict) -> "Declaration":
        action = f.get("action", "")

        def fail(ptr: str, problem: str) -> DeclarationError:
            return DeclarationError("declaration_invalid", ptr, problem, action)

        version = f.get("declaration", 0)
        if version == 0:
            raise fail("/declaration", "missing")
        if version != VERSION:
            raise fail("/declaration", f"version {version}; this reader knows version {VERSION}")
        if action == "":
            raise fail("/action", "missing")
        if not is_action_name(action):
            raise fail("/action", "not a name of dot-separated parts, each ASCII letters, digits, '_' and '-' starting with a letter (at most 64 bytes)")
        unreviewed = False
        if "reviewed" in f:
            if f["reviewed"] is False:
                unreviewed = True
            else:
                raise fail("/reviewed", "only false may be written (an unreviewed draft); remove the member once the declaration is reviewed")
        tool = None
        if "tool" in f:
            tool = _check_tool(f["tool"], action, fail)
        fields_in = f.get("fields")
        if fields_in is None:
            raise fail("/fields", "missing")
        if not fields_in and tool is None:
            raise fail("/fields", 'empty: only the declaration of a tool (with "tool") may have no field')
        if len(fields_in) > MAX_FIELDS:
            raise fail("/fields", f"more than {MAX_FIELDS} fields")
        fields = []
        for name in sorted(fields_in, key=lambda s: s.encode("utf-8")):
            fields.append(_check_field(name, fields_in[name], fail))
        by_name = {x.name: x for x in fields}
        return cls(action=action, fields=tuple(fields), description=f.get("description", ""),
                   tool=tool, unreviewed=unreviewed, _by_name=by_name)

    # ------------------------------------------------------------ digests

    def tier_table(self) -> dict:
        """The normalized tier table the applied-tiers digest covers."""
        return {"action": self.action,
                "fields": [{"name": x.name, "tier": x.tier, "projections": sorted(x.projections)}
                           for x in self.fields]}

    def tiers_digest(self) -> str:
        return tiers_digest(self.action, [(x.name, x.tier, x.projections) for x in self.fields])

    def canonical(self) -> bytes:
        """The canonical declaration the definition digest covers."""
        fields = {}
        for x in self.fields:
            fields[x.name] = {
                "type": x.type, "tier": x.tier, "projections": list(x.projections),
                "optional": x.optional, "routes": list(x.routes), "allowlist": x.allowlist,
                "description": x.description,
            }
        obj: dict[str, Any] = {"declaration": VERSION, "action": self.action,
                               "description": self.description, "fields": fields}
        if self.tool is not None:
            obj["tool"] = {"server": self.tool.server, "name": self.tool.name,
                           "definition_digest": self.tool.definition_digest}
        if self.unreviewed:
            obj["reviewed"] = False
        return canonicalize_value(obj)

    def definition_digest(self) -> str:
        return "sha256:" + hashlib.sha256(ACTION_DOMAIN_SEPARATOR + self.canonical()).hexdigest()

    # ------------------------------------------------------------ minimize

    def minimize(self, raw: bytes, *, allowlists: Mapping[str, Iterable[str]] | None = None,
                 domain: Domain = Domain(), floor: Mapping[str, Mapping[str, str]] | None = None,
                 hiding: bool = False, openings: OpeningSource | None = None) -> Minimized:
        """Commit to a call's raw parameters (bytes of a JSON object) and
        minimize them: the commitment over all of them, the attributes the
        declaration lets cross, and the applied-tiers digest.

        The commitment is version 1 (docs/commitment.md sections 1 to 5)
        unless hiding=True: then it is version 2 (section 7, module hiding)
        and the result's disclosure opens it, with openings from `openings`
        (an OpeningSource: random_openings() when None, derived_openings,
        or the Disclosure of the call being retried). Everything else is the
        same in both versions; the parameters are committed after they are
        minimized, so a refusal is the same too."""
        if openings is not None and not hiding:
            raise ValueError("minimize: openings= commits with version 2 and needs hiding=True")
        if floor is not None:
            check_floor(floor, self)
        try:
            values, canonical = params_tree(raw, domain)
        except DomainError as e:
            raise DeclarationError("domain:" + e.kind, self._safe_pointer(e.pointer),
                                   "parameters outside the strict domain: " + e.kind, self.action) from None
        lists = {k: frozenset(v) for k, v in (allowlists or {}).items()}
        attrs: dict[str, Any] = {}
        for f in self.fields:
            ptr = "/" + _escape_pointer(f.name)
            if f.name not in values:
                if f.optional:
                    continue
                raise DeclarationError("field_absent", ptr, "declared field is absent", self.action)
            v = values[f.name]
            problem = _check_type(f.type, v)
            if problem:
                raise DeclarationError("field_type", ptr, problem, self.action)
            if f.tier == "policy":
                attrs[f.name] = v
            elif f.tier == "derived":
                out = {}
                for p in f.projections:
                    try:
                        out[p] = _project(f, p, v, lists)
                    except project.ProjectionError as e:
                        raise DeclarationError("projection_refused", ptr, str(e), self.action, e) from None
                attrs[f.name] = out
        attributes = canonicalize_value(attrs)
        disclosure = None
        if hiding:
            params, disclosure = hide_tree(values, openings)
        else:
            params = commit_canonical(canonical)
        return Minimized(params=params, attributes=attributes, tiers_digest=self.tiers_digest(),
                         definition_digest=self.definition_digest(), disclosure=disclosure)

    def _safe_pointer(self, p: str) -> str:
        if p == "":
            return ""
        first = p[1:].split("/", 1)[0]
        name = first.replace("~1", "/").replace("~0", "~")
        if name in self._by_name:
            return "/" + first
        return "(an undeclared field)"


def _check_tool(t: dict, action: str, fail) -> Tool:
    server, name, dd = t.get("server", ""), t.get("name", ""), t.get("definition_digest", "")
    if server == "":
        raise fail("/tool/server", "missing")
    if not is_action_part(server):
        raise fail("/tool/server", "not ASCII letters, digits, '_' and '-', starting with a letter (at most 64 bytes)")
    if name == "":
        raise fail("/tool/name", "missing")
    if len(name.encode()) > MAX_TOOL_NAME_BYTES:
        raise fail("/tool/name", f"more than {MAX_TOOL_NAME_BYTES} bytes")
    if any(_is_control(ch) for ch in name):
        raise fail("/tool/name", "holds a control character")
    if not is_action_part(name):
        raise fail("/tool/name", "a tool whose name is not ASCII letters, digits, '_' and '-', starting with a letter (at most 64 bytes), cannot be declared")
    if dd == "":
        raise fail("/tool/definition_digest", "missing")
    try:
        raw = parse_digest(dd)
    except MalformedDigestError:
        raise fail("/tool/definition_digest", 'not "sha256:" and 64 lower-case hex digits') from None
    if raw == bytes(32):
        raise fail("/tool/definition_digest", "all zeros")
    if action != server + "." + name:
        raise fail("/action", f"a tool's action must be its server and name joined by '.' ({server}.{name})")
    return Tool(server, name, dd)


def _is_control(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F


def _check_field(name: str, ff: dict, fail) -> Field:
    p = "/fields/" + _escape_pointer(name)
    if not is_field_name(name):
        raise fail(p, "not a field name: ASCII letters, digits and '_', starting with a letter (at most 64 bytes)")
    typ, tier = ff.get("type", ""), ff.get("tier", "")
    projections = ff.get("projections") or []
    routes = ff.get("routes") or []
    allowlist = ff.get("allowlist", "")
    if typ == "":
        raise fail(p + "/type", "missing")
    if typ not in TYPES:
        raise fail(p + "/type", "not string, integer, boolean, string_list or json")
    if typ == "json" and tier in ("policy", "derived"):
        raise fail(p + "/tier", "a json field must be payload: no policy or projection reads a value of any shape")
    if tier in ("policy", "payload"):
        if projections:
            raise fail(p + "/projections", "only derived fields have projections")
    elif tier == "derived":
        if not projections:
            raise fail(p + "/projections", "a derived field needs at least one projection")
    elif tier == "":
        raise fail(p + "/tier", "missing")
    else:
        raise fail(p + "/tier", "not policy, derived or payload")
    for i, pr in enumerate(projections):
        spec = PROJECTIONS.get(pr)
        if spec is None:
            raise fail(f"{p}/projections/{i}", "unknown projection")
        if spec[0] != typ:
            raise fail(f"{p}/projections/{i}", f"{pr} takes a {spec[0]} field, not {typ}")
        if pr in projections[:i]:
            raise fail(f"{p}/projections/{i}", "repeated")
    sorted_projections = tuple(sorted(projections, key=lambda s: s.encode()))
    has_route = "route_shape" in sorted_projections
    if has_route and not routes:
        raise fail(p + "/routes", "route_shape needs the action's route templates")
    if not has_route and routes:
        raise fail(p + "/routes", "only a field projected by route_shape has routes")
    if len(routes) > MAX_ROUTES:
        raise fail(p + "/routes", f"more than {MAX_ROUTES} routes")
    for i, r in enumerate(routes):
        rp = f"{p}/routes/{i}"
        if not r.startswith("/") or len(r.encode()) > 1024:
            raise fail(rp, "not a path template starting with '/'")
        for seg in r[1:].split("/"):
            if (seg == "" and r != "/") or (("{" in seg or "}" in seg) and not _ROUTE_VAR.match(seg)) or \
                    any(c in seg for c in "?#%\\ "):
                raise fail(rp, "segments must be literals or {name}, without '?', '#', '%', '\\' or spaces")
        if r in routes[:i]:
            raise fail(rp, "repeated")
    has_payee = "payee_known" in sorted_projections
    if has_payee and allowlist == "":
        raise fail(p + "/allowlist", "payee_known needs the name of an allowlist")
    if not has_payee and allowlist != "":
        raise fail(p + "/allowlist", "only a field projected by payee_known names an allowlist")
    return Field(name=name, type=typ, tier=tier, projections=sorted_projections,
                 optional=bool(ff.get("optional", False)), routes=tuple(routes), allowlist=allowlist,
                 description=ff.get("description", ""))


def _check_type(t: str, v: Any) -> str:
    if t == "json":
        return ""
    if t == "string" and isinstance(v, str):
        return ""
    if t == "boolean" and isinstance(v, bool):
        return ""
    if t == "integer":
        if type(v) is int:
            return ""
        if isinstance(v, (SpelledInt, float)):
            return "not an integer written without fraction or exponent"
    if t == "string_list" and isinstance(v, list):
        if all(isinstance(x, str) for x in v):
            return ""
        return "not an array of strings"
    return f"not a {t}"


def _project(f: Field, p: str, v: Any, lists: Mapping[str, frozenset]) -> Any:
    if p == "recipient_domain":
        return project.recipient_domain(v)
    if p == "payee_known":
        return project.payee_known(v, lists.get(f.allowlist))
    if p == "endpoint_host":
        return project.endpoint_host(v)
    if p == "route_shape":
        return project.route_shape(v, list(f.routes))
    if p == "resource_dir":
        return project.resource_dir(v)
    if p == "byte_size":
        return project.byte_size(v)
    if p == "count":
        return project.count(v)
    raise AssertionError(p)


def check_floor(floor: Mapping[str, Mapping[str, str]], d: Declaration) -> None:
    """Refuse a declaration that declares a field past the workload's floor
    (docs/declarations.md section 6)."""
    caps = floor.get(d.action)
    if caps is None:
        return
    for f in d.fields:
        limit = caps.get(f.name, caps.get("*"))
        if limit is None:
            continue
        rank = _TIER_RANK.get(limit)
        if rank is None:
            raise DeclarationError("floor_exceeded", "/fields/" + _escape_pointer(f.name),
                                   "the floor names an unknown tier", d.action)
        if _TIER_RANK[f.tier] > rank:
            raise DeclarationError("floor_exceeded", "/fields/" + _escape_pointer(f.name) + "/tier",
                                   f"declared {f.tier}, past the workload's floor of {limit}", d.action)


def tiers_digest(action: str, fields: Iterable[tuple[str, str, Iterable[str]]]) -> str:
    """The applied-tiers digest of a tier table: SHA-256 of
    "ledger/v1/tiers\\n" and the JCS of {"action", "fields": [{"name",
    "projections" (sorted), "tier"}, ...sorted by name]}."""
    if not action:
        raise ValueError("tier: empty action name")
    rows = sorted(((n, t, sorted(p, key=lambda s: s.encode())) for n, t, p in fields), key=lambda r: r[0].encode())
    table = {"action": action, "fields": [{"name": n, "tier": t, "projections": p} for n, t, p in rows]}
    return "sha256:" + hashlib.sha256(TIERS_DOMAIN_SEPARATOR + canonicalize_value(table)).hexdigest()
