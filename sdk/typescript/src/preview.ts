// Previews (docs/approvals.md §Previews): redact first, then bound, then
// digest. Go's approval/preview is the reference; its regular expressions
// (RE2) are written here so that JavaScript's engine gives the same
// matches: \s is RE2's [\t\n\f\r ], and (?i) classes are spelled out with
// RE2's Unicode case folding (s also matches U+017F, k also U+212A).

import { createHash } from "node:crypto";
import { DomainError, type Kind, LedgerError } from "./errors.js";
import { JsonNumber, type JsonText, type JsonValue, parse } from "./json.js";

export const PREVIEW_DOMAIN_SEPARATOR = "ledger/v1/preview\n";
export const PREVIEW_MAX_INPUT_BYTES = 1 << 20;
export const PREVIEW_CEILING = 8192;
export const MARKER = "[REDACTED]";
export const DEPTH_MARKER = "[depth limit]";
export const TOO_LARGE_MARKER = "[too large]";

export interface Limits {
  chars: number;
  items: number;
  fields: number;
  depth: number;
}

export const PASSES: readonly Limits[] = [
  { chars: 1000, items: 50, fields: 100, depth: 8 },
  { chars: 256, items: 20, fields: 40, depth: 6 },
  { chars: 64, items: 5, fields: 15, depth: 4 },
  { chars: 16, items: 2, fields: 6, depth: 3 },
];
export const FALLBACK_PASS = PASSES.length + 1;

export interface Preview {
  /** Canonical JSON, at most 8,192 bytes. */
  json: Buffer;
  /** SHA-256("ledger/v1/preview\n" || json), "sha256:<hex>". */
  digest: string;
  /** Replacements made by redaction (the re-redaction of shortened strings is not counted). */
  redacted: number;
  /** A truncation marker was written, or the fallback used. */
  truncated: boolean;
  /** 1–4, or 5 for the fallback. */
  pass: number;
}

/** A preview document refused: the kind, the pointer (credential-shaped names written [REDACTED]), never a value. */
export class PreviewInputError extends LedgerError {
  declare readonly code: Kind;
  readonly pointer: string;
  readonly key: boolean;
  readonly offset: number;
  constructor(kind: Kind, pointer: string, key: boolean, offset: number) {
    super(kind, `preview: ${kind} ${key ? "in a member name of the object at" : "at"} ${JSON.stringify(pointer)} (byte ${offset})`);
    this.name = "PreviewInputError";
    this.pointer = pointer;
    this.key = key;
    this.offset = offset;
  }
}

// ---- redaction ----------------------------------------------------------

const SENSITIVE_SUBSTRINGS = [
  "password", "passwd", "passphrase", "passcode", "secret", "apikey", "accesskey", "privatekey", "privkey",
  "signingkey", "encryptionkey", "credential", "authorization", "cookie", "bearer", "sessionid", "sessionkey",
  "csrf", "xsrf",
];
const SENSITIVE_WORDS = ["token", "auth", "session", "otp", "ssn", "pwd", "pass", "jwt", "cvv", "cvc"];
const SENSITIVE_NAMES = ["pin", "pincode"];

/** Go's unicode.ToLower of one code point (simple case mapping). */
function lowerRune(ch: string): string {
  if (ch === "\u0130") return "i";
  const l = ch.toLowerCase();
  // Full mappings that are not one code point: keep Go's simple mapping.
  return [...l].length === 1 ? l : ch;
}

function foldName(name: string): string {
  let s = "";
  for (const ch of name) {
    if (ch === "_" || ch === "-" || ch === "." || ch === " ") continue;
    s += lowerRune(ch);
  }
  return s;
}

const isLetter = (ch: string): boolean => /^\p{L}$/u.test(ch);
const isUpper = (ch: string): boolean => /^\p{Lu}$/u.test(ch);
const isLower = (ch: string): boolean => /^\p{Ll}$/u.test(ch);

function nameWords(name: string): string[] {
  const words: string[] = [];
  let cur = "";
  const flush = (): void => {
    if (cur !== "") {
      let w = "";
      for (const ch of cur) w += lowerRune(ch);
      words.push(w);
      cur = "";
    }
  };
  let prev = "";
  for (const ch of name) {
    if (!isLetter(ch)) flush();
    else if (isUpper(ch) && prev !== "" && isLower(prev)) {
      flush();
      cur += ch;
    } else cur += ch;
    prev = ch;
  }
  flush();
  return words;
}

export function sensitiveName(name: string): boolean {
  const folded = foldName(name);
  if (SENSITIVE_SUBSTRINGS.some((s) => folded.includes(s))) return true;
  if (SENSITIVE_NAMES.includes(folded)) return true;
  return nameWords(name).some((w) => SENSITIVE_WORDS.includes(w));
}

interface ShapeRule {
  hint: (s: string) => boolean;
  re: RegExp;
  group: number;
  check?: (s: string) => boolean;
}

const contains =
  (...subs: string[]) =>
  (s: string): boolean =>
    subs.some((sub) => s.includes(sub));

/** Go's containsFold: the ASCII word in any ASCII case, compared byte by byte. */
const containsFold =
  (word: string) =>
  (s: string): boolean => {
    const lower = s.replace(/[A-Z]/g, (c) => c.toLowerCase());
    return lower.includes(word);
  };

function isBasicCredential(s: string): boolean {
  const std = (t: string, padded: boolean): Buffer | null => {
    if (padded ? !/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(t) : !/^[A-Za-z0-9+/]*$/.test(t) || t.length % 4 === 1) {
      return null;
    }
    const b = Buffer.from(t, "base64");
    // Go's decoders are strict about the unused bits of the last character.
    if (b.toString("base64").replace(/=+$/, "") !== t.replace(/=+$/, "")) return null;
    return b;
  };
  let b = std(s, true);
  if (b === null) b = std(s.replace(/=+$/, ""), false);
  return b !== null && b.indexOf(0x3a) > 0;
}

const S = "[Ss\u017f]"; // RE2 (?i)s
const CLASS_ALPHA_FOLD = "A-Za-z\u017f\u212a"; // RE2 (?i)[A-Za-z]

const SHAPE_RULES: ShapeRule[] = [
  {
    hint: contains("PRIVATE KEY-----"),
    re: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)/dg,
    group: 0,
  },
  { hint: contains("://"), re: /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\t\n\f\r :@]*:([^/?#\t\n\f\r @]+)@/dg, group: 1 },
  {
    hint: containsFold("bearer"),
    re: new RegExp(`\\b[Bb][Ee][Aa][Rr][Ee][Rr][\\t\\n\\f\\r ]+([${CLASS_ALPHA_FOLD}0-9._~+/-]{16,}=*)`, "dg"),
    group: 1,
  },
  {
    hint: containsFold("basic"),
    re: new RegExp(`\\b[Bb][Aa]${S}[Ii][Cc][\\t\\n\\f\\r ]+([${CLASS_ALPHA_FOLD}0-9+/]{4,}={0,2})`, "dg"),
    group: 1,
    check: isBasicCredential,
  },
  { hint: contains(".eyJ"), re: /\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/dg, group: 0 },
  {
    hint: contains("AKIA", "ASIA", "_live_", "_test_", "gh", "xox", "sk-", "AIza", "glpat-", "npm_"),
    re: new RegExp(
      "\\b(?:" +
        "(?:AKIA|ASIA)[0-9A-Z]{16}" +
        "|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}" +
        "|gh[pousr]_[A-Za-z0-9]{36,}" +
        "|github_pat_[A-Za-z0-9_]{22,}" +
        "|xox[abposr]-[A-Za-z0-9-]{10,}" +
        "|sk-[A-Za-z0-9_-]{20,}" +
        "|AIza[0-9A-Za-z_-]{35}" +
        "|glpat-[A-Za-z0-9_-]{20,}" +
        "|npm_[A-Za-z0-9]{36}" +
        ")",
      "dg",
    ),
    group: 0,
  },
];

const MIN_TOKEN_RUN = 32;

function isTokenChar(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x3d || c === 0x5f || c === 0x2d;
}

function redactTokens(s: string): [string, number] {
  let out = "";
  let count = 0;
  let last = 0;
  for (let i = 0; i < s.length; ) {
    if (!isTokenChar(s.charCodeAt(i))) {
      i++;
      continue;
    }
    let j = i;
    let upper = false;
    let lower = false;
    let digit = false;
    while (j < s.length && isTokenChar(s.charCodeAt(j))) {
      const c = s.charCodeAt(j);
      upper ||= c >= 0x41 && c <= 0x5a;
      lower ||= c >= 0x61 && c <= 0x7a;
      digit ||= c >= 0x30 && c <= 0x39;
      j++;
    }
    if (j - i >= MIN_TOKEN_RUN && upper && lower && digit) {
      out += s.slice(last, i) + MARKER;
      last = j;
      count++;
    }
    i = j;
  }
  if (count === 0) return [s, 0];
  return [out + s.slice(last), count];
}

function redactOnce(s: string): [string, number] {
  let total = 0;
  for (const rule of SHAPE_RULES) {
    if (!rule.hint(s)) continue;
    let out = "";
    let last = 0;
    let n = 0;
    rule.re.lastIndex = 0;
    for (const m of s.matchAll(rule.re)) {
      const span = m.indices?.[rule.group];
      const text = m[rule.group];
      if (span === undefined || text === undefined) continue;
      const lo = span[0];
      const hi = lo + text.length;
      if (text === MARKER || (rule.check !== undefined && !rule.check(text))) continue;
      out += s.slice(last, lo) + MARKER;
      last = hi;
      n++;
    }
    if (n > 0) {
      s = out + s.slice(last);
      total += n;
    }
  }
  const [t, k] = redactTokens(s);
  return [t, total + k];
}

const MAX_ROUNDS = 8;

export function redactString(s: string): [string, number] {
  let total = 0;
  for (let r = 0; r < MAX_ROUNDS; r++) {
    let n: number;
    [s, n] = redactOnce(s);
    if (n === 0) {
      if (total > 0 && s.normalize("NFC") !== s) return [MARKER, total];
      return [s, total];
    }
    total += n;
  }
  return [MARKER, total];
}

export function secretShaped(s: string): boolean {
  return redactString(s)[1] > 0;
}

// ---- the document -------------------------------------------------------

type PValue =
  | { t: "s"; v: null | boolean | string | JsonNumber }
  | { t: "a"; arr: PValue[] }
  | { t: "o"; obj: PMember[] };
interface PMember {
  name: string;
  v: PValue;
  renamed: boolean;
}

const utf16Order = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function fromJSON(x: JsonValue): PValue {
  if (Array.isArray(x)) return { t: "a", arr: x.map(fromJSON) };
  if (x instanceof Map) {
    const obj: PMember[] = [...x.entries()].map(([name, v]) => ({ name, v: fromJSON(v), renamed: false }));
    obj.sort((a, b) => utf16Order(a.name, b.name));
    return { t: "o", obj };
  }
  return { t: "s", v: x };
}

function redactValue(v: PValue): number {
  let n = 0;
  if (v.t === "s") {
    if (typeof v.v === "string") {
      const [s, k] = redactString(v.v);
      v.v = s;
      n += k;
    }
  } else if (v.t === "a") {
    for (const e of v.arr) n += redactValue(e);
  } else {
    let renamed = false;
    for (const m of v.obj) {
      if (secretShaped(m.name)) {
        m.renamed = true;
        renamed = true;
        n++;
      } else if (sensitiveName(m.name)) {
        m.v = { t: "s", v: MARKER };
        n++;
        continue;
      }
      n += redactValue(m.v);
    }
    if (renamed) {
      const taken = new Set(v.obj.filter((m) => !m.renamed).map((m) => m.name));
      let k = 0;
      for (const m of v.obj) {
        if (!m.renamed) continue;
        m.renamed = false;
        for (;;) {
          k++;
          const name = k > 1 ? `[REDACTED ${k}]` : MARKER;
          if (!taken.has(name)) {
            m.name = name;
            taken.add(name);
            break;
          }
        }
      }
      v.obj.sort((a, b) => utf16Order(a.name, b.name));
    }
  }
  return n;
}

/** Cuts s to limit code points with the chars marker, never inside a [REDACTED] marker, keeping NFC. */
function clipText(s: string, limit: number): [string, boolean] {
  const cps = [...s];
  const n = cps.length;
  if (n <= limit) return [s, false];
  // cut is a code unit offset after limit code points.
  let cut = 0;
  for (let i = 0; i < limit; i++) cut += cps[i]!.length;
  let kept = limit;
  for (;;) {
    const at = markerAcross(s, cut);
    if (at >= 0) {
      kept -= cut - at;
      cut = at;
    }
    const out = s.slice(0, cut) + `…[+${n - kept} chars]`;
    if (out.normalize("NFC") === out || cut === 0) return [out, true];
    const c = s.charCodeAt(cut - 1);
    cut -= c >= 0xdc00 && c <= 0xdfff && cut >= 2 ? 2 : 1;
    kept--;
  }
}

function markerAcross(s: string, cut: number): number {
  const lo = Math.max(0, cut - MARKER.length + 1);
  const hi = Math.min(s.length, cut + MARKER.length - 1);
  if (lo >= hi) return -1;
  const i = s.slice(lo, hi).indexOf(MARKER);
  return i >= 0 ? lo + i : -1;
}

class Writer {
  buf = "";
  bad = false;
  truncated = false;
  constructor(
    readonly limits: Limits,
    readonly unbounded = false,
  ) {}

  text(s: string): void {
    if (s.normalize("NFC") !== s) this.bad = true;
    this.buf += JSON.stringify(s);
  }

  value(v: PValue, depth: number): void {
    if ((v.t === "a" || v.t === "o") && depth + 1 > this.limits.depth) {
      this.truncated = true;
      this.text(DEPTH_MARKER);
      return;
    }
    if (v.t === "s") {
      const x = v.v;
      if (x === null) this.buf += "null";
      else if (typeof x === "boolean") this.buf += x ? "true" : "false";
      else if (x instanceof JsonNumber) this.buf += x.canonical;
      else {
        let [s, clipped] = clipText(x, this.limits.chars);
        if (clipped) {
          s = redactString(s)[0];
          this.truncated = true;
        }
        this.text(s);
      }
    } else if (v.t === "a") {
      this.buf += "[";
      for (let i = 0; i < v.arr.length; i++) {
        if (i > 0) this.buf += ",";
        if (i === this.limits.items) {
          this.truncated = true;
          this.text(`[+${v.arr.length - i} items]`);
          break;
        }
        this.value(v.arr[i]!, depth + 1);
      }
      this.buf += "]";
    } else {
      let kept = v.obj;
      let marker: PMember | undefined;
      if (kept.length > this.limits.fields) {
        kept = kept.slice(0, this.limits.fields);
        let name = "…";
        while (kept.some((m) => m.name === name)) name += "…";
        marker = { name, v: { t: "s", v: `[+${v.obj.length - kept.length} fields]` }, renamed: false };
        this.truncated = true;
      }
      this.buf += "{";
      let first = true;
      const emit = (m: PMember): void => {
        if (!first) this.buf += ",";
        first = false;
        this.text(m.name);
        this.buf += ":";
        this.value(m.v, depth + 1);
      };
      for (const m of kept) {
        if (marker !== undefined && utf16Order(marker.name, m.name) < 0) {
          emit(marker);
          marker = undefined;
        }
        emit(m);
      }
      if (marker !== undefined) emit(marker);
      this.buf += "}";
    }
  }
}

function safePointer(p: string): string {
  if (p === "") return p;
  return (
    "/" +
    p
      .slice(1)
      .split("/")
      .map((seg) => (secretShaped(seg.replace(/~1/g, "/").replace(/~0/g, "~")) ? MARKER : seg))
      .join("/")
  );
}

export function previewDigest(preview: Uint8Array): string {
  return "sha256:" + createHash("sha256").update(PREVIEW_DOMAIN_SEPARATOR).update(preview).digest("hex");
}

/** Renders a preview document (JSON text, any value in the strict domain). */
export function renderPreview(doc: JsonText): Preview {
  let parsed: JsonValue;
  try {
    parsed = parse(doc, { maxBytes: PREVIEW_MAX_INPUT_BYTES });
  } catch (e) {
    if (e instanceof DomainError) throw new PreviewInputError(e.code, safePointer(e.pointer), e.key, e.offset);
    throw e;
  }
  const v = fromJSON(parsed);
  const redacted = redactValue(v);
  for (let i = 0; i < PASSES.length; i++) {
    const w = new Writer(PASSES[i]!);
    w.value(v, 0);
    const json = Buffer.from(w.buf, "utf8");
    if (!w.bad && json.length <= PREVIEW_CEILING) {
      return { json, digest: previewDigest(json), redacted, truncated: w.truncated, pass: i + 1 };
    }
  }
  const all = new Writer({ chars: 2 ** 30, items: 2 ** 30, fields: 2 ** 30, depth: 2 ** 30 }, true);
  all.value(v, 0);
  const json = Buffer.from(`{"bytes":${Buffer.byteLength(all.buf, "utf8")},"…":${JSON.stringify(TOO_LARGE_MARKER)}}`, "utf8");
  return { json, digest: previewDigest(json), redacted, truncated: true, pass: FALLBACK_PASS };
}
