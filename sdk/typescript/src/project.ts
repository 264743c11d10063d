// Projections (docs/declarations.md §2), each failing closed. Go's
// commit/project is the reference; URLs are read exactly as Go's
// net/url.Parse (Go 1.26) reads them, ported below, since the projections'
// results are defined by it.

import { LedgerError } from "./errors.js";

/** A projection refused its input. The message names the projection and the rule, never the input. */
export class ProjectionError extends LedgerError {
  readonly projection: string;
  readonly problem: string;
  constructor(projection: string, problem: string) {
    super("projection_refused", `projection ${projection}: ${problem}`);
    this.name = "ProjectionError";
    this.projection = projection;
    this.problem = problem;
  }
}

/** route_shape's output when no template matches. */
export const UNMATCHED = "unmatched";

/**
 * Lower-cases a host candidate given as bytes (a latin1 "binary" string)
 * the way Go's strings.ToLower does, as far as it matters for a host name:
 * every non-ASCII character stays non-ASCII except U+0130 (→ "i") and
 * U+212A (→ "k"), whose simple lower case is ASCII. Other non-ASCII bytes
 * are kept, so the host check refuses them.
 */
function lowerHostBytes(b: string): string {
  let out = "";
  for (let i = 0; i < b.length; i++) {
    const c = b.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) out += String.fromCharCode(c + 32);
    else if (c === 0xc4 && b.charCodeAt(i + 1) === 0xb0) {
      out += "i";
      i++;
    } else if (c === 0xe2 && b.charCodeAt(i + 1) === 0x84 && b.charCodeAt(i + 2) === 0xaa) {
      out += "k";
      i += 2;
    } else out += b[i];
  }
  return out;
}

function binary(s: string): string {
  return Buffer.from(s, "utf8").toString("latin1");
}

function fromBinary(b: string): string {
  return Buffer.from(b, "latin1").toString("utf8");
}

function validHostname(h: string): boolean {
  if (h.length === 0 || h.length > 253) return false;
  const labels = h.split(".");
  if (labels.length < 2) return false;
  for (const l of labels) {
    if (l.length === 0 || l.length > 63 || l[0] === "-" || l[l.length - 1] === "-") return false;
    if (!/^[a-z0-9-]+$/.test(l)) return false;
  }
  return true;
}

export function recipientDomain(v: unknown): string {
  const name = "recipient_domain";
  if (typeof v !== "string") throw new ProjectionError(name, "not a string");
  const at = v.indexOf("@");
  if (at < 0 || at === 0 || v.indexOf("@", at + 1) >= 0) throw new ProjectionError(name, "not an email address");
  const domain = lowerHostBytes(binary(v.slice(at + 1)));
  if (!validHostname(domain)) {
    throw new ProjectionError(name, "the domain is not ASCII letters, digits and hyphens in dot-separated labels");
  }
  return domain;
}

export function payeeKnown(v: unknown, allowlist: ReadonlySet<string> | readonly string[] | undefined): boolean {
  if (typeof v !== "string" || allowlist === undefined) return false;
  return Array.isArray(allowlist) ? allowlist.includes(v) : (allowlist as ReadonlySet<string>).has(v);
}

export function endpointHost(v: unknown): string {
  const name = "endpoint_host";
  const u = parseHTTPURL(v, name);
  const host = lowerHostBytes(hostname(u.host));
  if (!validHostname(host)) throw new ProjectionError(name, "the host is not a DNS name of ASCII labels");
  return host;
}

export function routeShape(v: unknown, templates: readonly string[]): string {
  const u = parseHTTPURL(v, "route_shape");
  const path = escapedPath(u);
  for (const t of templates) if (matchRoute(binary(t), path)) return t;
  return UNMATCHED;
}

function matchRoute(tmpl: string, path: string): boolean {
  const ts = tmpl.split("/");
  const ps = path.split("/");
  if (ts.length !== ps.length) return false;
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i]!;
    const p = ps[i]!;
    if (t.startsWith("{") && t.endsWith("}")) {
      if (p === "") return false;
      continue;
    }
    if (t !== p) return false;
  }
  return true;
}

export function resourceDir(v: unknown): string {
  const name = "resource_dir";
  if (typeof v !== "string") throw new ProjectionError(name, "not a string");
  if (v === "" || v.includes("\\") || v.includes("\0")) throw new ProjectionError(name, "not a slash-separated path");
  const segments = (v.startsWith("/") ? v.slice(1) : v).split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") throw new ProjectionError(name, "the path has an empty or dot segment");
  }
  return "/" + segments.slice(0, -1).join("/");
}

export function byteSize(v: unknown): number {
  if (typeof v !== "string") throw new ProjectionError("byte_size", "not a string");
  return Buffer.byteLength(v, "utf8");
}

export function count(v: unknown): number {
  if (v === null) return 0;
  if (Array.isArray(v)) return v.length;
  throw new ProjectionError("count", "not an array");
}

// ---- Go's net/url.Parse, over byte strings (one char per byte) ----------

interface GoURL {
  scheme: string;
  opaque: string;
  host: string;
  path: string;
  rawPath: string;
}

function parseHTTPURL(v: unknown, name: string): GoURL {
  if (typeof v !== "string") throw new ProjectionError(name, "not a string");
  const u = goParseURL(binary(v));
  if (u === null || (u.scheme !== "http" && u.scheme !== "https") || u.host === "" || u.opaque !== "") {
    throw new ProjectionError(name, "not an absolute http or https URL");
  }
  return u;
}

const enum Mode {
  Path,
  PathSegment,
  Host,
  Zone,
  UserPassword,
  QueryComponent,
  Fragment,
}

function isAlnum(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
}

function shouldEscape(c: number, mode: Mode): boolean {
  if (isAlnum(c)) return false;
  const ch = String.fromCharCode(c);
  if ((mode === Mode.Host || mode === Mode.Zone) && "!$&'()*+,;=:[]<>\"".includes(ch)) return false;
  if ("-_.~".includes(ch)) return false;
  if ("$&+,/:;=?@".includes(ch)) {
    switch (mode) {
      case Mode.Path:
        return ch === "?";
      case Mode.PathSegment:
        return ch === "/" || ch === ";" || ch === "," || ch === "?";
      case Mode.UserPassword:
        return ch === "@" || ch === "/" || ch === "?" || ch === ":";
      case Mode.QueryComponent:
        return true;
      case Mode.Fragment:
        return false;
    }
  }
  if (mode === Mode.Fragment && "!()*".includes(ch)) return false;
  return true;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

function unhex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return c - 0x41 + 10;
}

/** Go's unescape; null where Go returns an error. */
function unescape(s: string, mode: Mode): string | null {
  let n = 0;
  let hasPlus = false;
  for (let i = 0; i < s.length; ) {
    const c = s.charCodeAt(i);
    if (c === 0x25) {
      n++;
      if (i + 2 >= s.length || !isHex(s.charCodeAt(i + 1)) || !isHex(s.charCodeAt(i + 2))) return null;
      if (mode === Mode.Host && unhex(s.charCodeAt(i + 1)) < 8 && s.slice(i, i + 3) !== "%25") return null;
      if (mode === Mode.Zone) {
        const v = (unhex(s.charCodeAt(i + 1)) << 4) | unhex(s.charCodeAt(i + 2));
        if (s.slice(i, i + 3) !== "%25" && v !== 0x20 && shouldEscape(v, Mode.Host)) return null;
      }
      i += 3;
    } else if (c === 0x2b) {
      hasPlus = mode === Mode.QueryComponent;
      i++;
    } else {
      if ((mode === Mode.Host || mode === Mode.Zone) && c < 0x80 && shouldEscape(c, mode)) return null;
      i++;
    }
  }
  if (n === 0 && !hasPlus) return s;
  let t = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25) {
      t += String.fromCharCode((unhex(s.charCodeAt(i + 1)) << 4) | unhex(s.charCodeAt(i + 2)));
      i += 2;
    } else if (c === 0x2b) t += mode === Mode.QueryComponent ? " " : "+";
    else t += s[i];
  }
  return t;
}

function escape(s: string, mode: Mode): string {
  const hex = "0123456789ABCDEF";
  let t = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x20 && mode === Mode.QueryComponent) t += "+";
    else if (shouldEscape(c, mode)) t += "%" + hex[c >> 4]! + hex[c & 15]!;
    else t += s[i];
  }
  return t;
}

function validOptionalPort(port: string): boolean {
  if (port === "") return true;
  if (port[0] !== ":") return false;
  return /^[0-9]*$/.test(port.slice(1));
}

function validUserinfo(s: string): boolean {
  // Go ranges over runes; every byte ≥ 0x80 belongs to a non-ASCII rune, refused.
  return /^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$/.test(s);
}

/** Go's netip.ParseAddr accepting an IPv6 address (with an optional zone), not IPv4. */
function isIPv6Literal(b: string): boolean {
  const s = b;
  const pct = s.indexOf("%");
  const addr = pct >= 0 ? s.slice(0, pct) : s;
  if (pct >= 0 && pct === s.length - 1) return false;
  if (!addr.includes(":")) return false;
  // IPv6 with an optional dotted-quad tail.
  let groups = addr;
  let tail = 0;
  const lastColon = addr.lastIndexOf(":");
  const last = addr.slice(lastColon + 1);
  if (last.includes(".")) {
    const parts = last.split(".");
    if (parts.length !== 4) return false;
    for (const p of parts) {
      if (!/^[0-9]{1,3}$/.test(p) || Number(p) > 255 || (p.length > 1 && p[0] === "0")) return false;
    }
    groups = addr.slice(0, lastColon + 1) + "0:0";
    tail = 0;
  }
  void tail;
  const dbl = groups.indexOf("::");
  if (dbl >= 0 && groups.indexOf("::", dbl + 1) >= 0) return false;
  const check = (part: string): number => {
    if (part === "") return 0;
    const gs = part.split(":");
    for (const g of gs) if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return -1;
    return gs.length;
  };
  if (dbl >= 0) {
    const a = check(groups.slice(0, dbl));
    const b2 = check(groups.slice(dbl + 2));
    return a >= 0 && b2 >= 0 && a + b2 <= 7;
  }
  return check(groups) === 8;
}

function parseHost(scheme: string, host: string): string | null {
  const open = host.lastIndexOf("[");
  if (open > 0) return null;
  if (open === 0) {
    const close = host.lastIndexOf("]");
    if (close < 0) return null;
    const colonPort = host.slice(close + 1);
    if (!validOptionalPort(colonPort)) return null;
    const port = unescape(colonPort, Mode.Host);
    if (port === null) return null;
    const hn = host.slice(1, close);
    let unescaped: string | null;
    const zone = hn.indexOf("%25");
    if (zone >= 0) {
      const hp = unescape(hn.slice(0, zone), Mode.Host);
      const zp = unescape(hn.slice(zone), Mode.Zone);
      if (hp === null || zp === null) return null;
      unescaped = hp + zp;
    } else {
      unescaped = unescape(hn, Mode.Host);
    }
    if (unescaped === null || !isIPv6Literal(unescaped)) return null;
    return "[" + unescaped + "]" + port;
  }
  const i = host.indexOf(":");
  if (i !== -1) {
    let at = i;
    const lastColon = host.lastIndexOf(":");
    if (lastColon !== i && scheme !== "http" && scheme !== "https") at = lastColon;
    if (!validOptionalPort(host.slice(at))) return null;
  }
  return unescape(host, Mode.Host);
}

function getScheme(raw: string): [string, string] | null {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a)) continue;
    if ((c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2d || c === 0x2e) {
      if (i === 0) return ["", raw];
      continue;
    }
    if (c === 0x3a) {
      if (i === 0) return null;
      return [raw.slice(0, i), raw.slice(i + 1)];
    }
    return ["", raw];
  }
  return ["", raw];
}

/** Go's url.Parse over a byte string; null where Go returns an error. */
function goParseURL(rawURL: string): GoURL | null {
  const hash = rawURL.indexOf("#");
  const raw = hash >= 0 ? rawURL.slice(0, hash) : rawURL;
  const frag = hash >= 0 ? rawURL.slice(hash + 1) : "";
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return null;
  }
  const u: GoURL = { scheme: "", opaque: "", host: "", path: "", rawPath: "" };
  if (raw !== "*") {
    const sr = getScheme(raw);
    if (sr === null) return null;
    u.scheme = sr[0].toLowerCase();
    let rest = sr[1];
    if (rest.endsWith("?") && rest.indexOf("?") === rest.length - 1) rest = rest.slice(0, -1);
    else {
      const q = rest.indexOf("?");
      if (q >= 0) rest = rest.slice(0, q);
    }
    let done = false;
    if (!rest.startsWith("/")) {
      if (u.scheme !== "") {
        u.opaque = rest;
        done = true;
      } else {
        const slash = rest.indexOf("/");
        const seg = slash >= 0 ? rest.slice(0, slash) : rest;
        if (seg.includes(":")) return null;
      }
    }
    if (!done) {
      if ((u.scheme !== "" || !rest.startsWith("///")) && rest.startsWith("//")) {
        let authority = rest.slice(2);
        rest = "";
        const slash = authority.indexOf("/");
        if (slash >= 0) {
          rest = authority.slice(slash);
          authority = authority.slice(0, slash);
        }
        const atIdx = authority.lastIndexOf("@");
        const host = parseHost(u.scheme, atIdx < 0 ? authority : authority.slice(atIdx + 1));
        if (host === null) return null;
        if (atIdx >= 0) {
          const userinfo = authority.slice(0, atIdx);
          if (!validUserinfo(userinfo)) return null;
          const colon = userinfo.indexOf(":");
          const parts = colon < 0 ? [userinfo] : [userinfo.slice(0, colon), userinfo.slice(colon + 1)];
          for (const p of parts) if (unescape(p, Mode.UserPassword) === null) return null;
        }
        u.host = host;
      }
      const path = unescape(rest, Mode.Path);
      if (path === null) return null;
      u.path = path;
      u.rawPath = escape(path, Mode.Path) === rest ? "" : rest;
    }
  } else {
    u.path = "*";
  }
  if (frag !== "" && unescape(frag, Mode.Fragment) === null) return null;
  return u;
}

function validEncoded(s: string, mode: Mode): boolean {
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if ("!$&'()*+,;=:@[]%".includes(ch)) continue;
    if (shouldEscape(s.charCodeAt(i), mode)) return false;
  }
  return true;
}

function escapedPath(u: GoURL): string {
  if (u.rawPath !== "" && validEncoded(u.rawPath, Mode.Path)) {
    const p = unescape(u.rawPath, Mode.Path);
    if (p !== null && p === u.path) return u.rawPath;
  }
  if (u.path === "*") return "*";
  return escape(u.path, Mode.Path);
}

/** Go's URL.Hostname: the host without port and IPv6 brackets. */
function hostname(hostPort: string): string {
  let host = hostPort;
  const colon = host.lastIndexOf(":");
  if (colon !== -1 && validOptionalPort(host.slice(colon))) host = host.slice(0, colon);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  return host;
}

/** @internal exposed for tests. */
export const _goURL = { parse: goParseURL, escapedPath, binary, fromBinary };
