// The strict JSON reader: RFC 8259 text, read from its raw UTF-8 bytes and
// held to the strict domain of docs/commitment.md §2, with the same refusal
// kinds and JSON pointers as Go's package commit (its parse.go is the
// reference; the order of checks follows it so that the first refusal of a
// document is the same one).

import { DomainError, type Kind, pointer } from "./errors.js";
import { normalizationFault } from "./unicode.js";

/** Default bounds of the strict domain (Go's commit.DefaultMaxBytes, DefaultMaxDepth). */
export const DEFAULT_MAX_BYTES = 1 << 20;
export const DEFAULT_MAX_DEPTH = 64;
/** 2^53−1: integer values beyond ±MAX_SAFE_INTEGER are refused. */
export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
const MAX_INPUT_BYTES = 1 << 30;

/** The strict domain's options. The default (all absent) is the parameter digest's domain. */
export interface DomainOptions {
  /** Admit numbers with a fractional part (in their RFC 8785 form, if exact). Default false. */
  allowNonInteger?: boolean;
  /** Bound on the input's length in bytes. Default 1 MiB. */
  maxBytes?: number;
  /** Bound on nesting of arrays and objects: {"a":[1]} has depth 2. Default 64. */
  maxDepth?: number;
}

/**
 * A JSON number as read: its lexeme (the spelling in the input) and its
 * RFC 8785 canonical form. Integers are exact within ±(2^53−1).
 */
export class JsonNumber {
  readonly lexeme: string;
  readonly canonical: string;
  constructor(lexeme: string, canonical: string) {
    this.lexeme = lexeme;
    this.canonical = canonical;
  }
  /** The value as a JavaScript number (exact for every number the domain admits). */
  valueOf(): number {
    return Number(this.canonical);
  }
  toString(): string {
    return this.canonical;
  }
  toJSON(): number {
    return Number(this.canonical);
  }
}

/** A checked JSON value. Objects are Maps in input order; canonical order is applied when writing. */
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
export type JsonObject = Map<string, JsonValue>;

/** Input bytes: a Uint8Array, or a string (encoded as UTF-8 first). */
export type JsonText = Uint8Array | string;

export function toBytes(input: JsonText): Buffer {
  if (typeof input === "string") return Buffer.from(input, "utf8");
  return Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
}

interface ParseMode {
  allowNonInteger: boolean;
  maxDepth: number;
  /** Test-only: RFC 8785 as is (no Unicode or number rules), for its reference vectors. */
  rfc8785: boolean;
}

class Parser {
  pos = 0;
  depth = 0;
  readonly path: (string | number)[] = [];
  /** If set, the byte span of each top-level member's value. */
  spans: Map<string, [number, number]> | undefined;
  /** The input as a latin1 string (one char per byte): its ASCII slices are the decoded text. */
  readonly text: string;
  constructor(
    readonly data: Buffer,
    readonly mode: ParseMode,
  ) {
    this.text = data.toString("latin1");
  }

  fail(kind: Kind, offset: number): DomainError {
    return new DomainError(kind, pointer(this.path), false, offset);
  }
  failKey(kind: Kind, offset: number): DomainError {
    return new DomainError(kind, pointer(this.path), true, offset);
  }

  skipSpace(): void {
    const d = this.data;
    let p = this.pos;
    while (p < d.length) {
      const c = d[p]!;
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) p++;
      else break;
    }
    this.pos = p;
  }

  parseValue(): JsonValue {
    const d = this.data;
    if (this.pos >= d.length) throw this.fail("syntax", this.pos);
    const c = d[this.pos]!;
    if (c === 0x7b) return this.parseObject();
    if (c === 0x5b) return this.parseArray();
    if (c === 0x22) {
      const start = this.pos;
      const s = this.parseString();
      const fault = this.checkText(s);
      if (fault !== undefined) throw this.fail(fault, start);
      return s;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.parseNumber();
    if (this.literal("true")) return true;
    if (this.literal("false")) return false;
    if (this.literal("null")) return null;
    throw this.fail("syntax", this.pos);
  }

  literal(text: string): boolean {
    const d = this.data;
    if (d.length - this.pos < text.length) return false;
    for (let i = 0; i < text.length; i++) if (d[this.pos + i] !== text.charCodeAt(i)) return false;
    this.pos += text.length;
    return true;
  }

  enter(): void {
    this.depth++;
    if (this.depth > this.mode.maxDepth) throw this.fail("too_deep", this.pos);
  }

  parseArray(): JsonValue[] {
    this.enter();
    const d = this.data;
    this.pos++;
    const elems: JsonValue[] = [];
    this.skipSpace();
    if (this.pos < d.length && d[this.pos] === 0x5d) {
      this.pos++;
      this.depth--;
      return elems;
    }
    for (;;) {
      this.path.push(elems.length);
      this.skipSpace();
      const v = this.parseValue();
      this.path.pop();
      elems.push(v);
      this.skipSpace();
      if (this.pos >= d.length) throw this.fail("syntax", this.pos);
      const c = d[this.pos];
      if (c === 0x2c) {
        this.pos++;
      } else if (c === 0x5d) {
        this.pos++;
        this.depth--;
        return elems;
      } else {
        throw this.fail("syntax", this.pos);
      }
    }
  }

  parseObject(): JsonObject {
    this.enter();
    const d = this.data;
    this.pos++;
    const members: JsonObject = new Map();
    this.skipSpace();
    if (this.pos < d.length && d[this.pos] === 0x7d) {
      this.pos++;
      this.depth--;
      return members;
    }
    // Go sorts the members when the object closes and reports the first
    // duplicate in canonical order, at the later occurrence's offset.
    let dup: string | undefined;
    let dupOffset = 0;
    for (;;) {
      this.skipSpace();
      if (this.pos >= d.length || d[this.pos] !== 0x22) throw this.failKey("syntax", this.pos);
      const start = this.pos;
      const name = this.parseString(true);
      const fault = this.checkText(name);
      if (fault !== undefined) throw this.failKey(fault, start);
      this.skipSpace();
      if (this.pos >= d.length || d[this.pos] !== 0x3a) throw this.failKey("syntax", this.pos);
      this.pos++;
      this.skipSpace();
      this.path.push(name);
      const valueStart = this.pos;
      const v = this.parseValue();
      this.path.pop();
      if (this.spans !== undefined && this.depth === 1) this.spans.set(name, [valueStart, this.pos]);
      if (members.has(name)) {
        if (dup === undefined || name < dup) {
          dup = name;
          dupOffset = start;
        }
      } else {
        members.set(name, v);
      }
      this.skipSpace();
      if (this.pos >= d.length) throw this.fail("syntax", this.pos);
      const c = d[this.pos];
      if (c === 0x2c) {
        this.pos++;
      } else if (c === 0x7d) {
        this.pos++;
        this.depth--;
        if (dup !== undefined) {
          this.path.push(dup);
          throw this.fail("duplicate_key", dupOffset);
        }
        return members;
      } else {
        throw this.fail("syntax", this.pos);
      }
    }
  }

  /** The domain's Unicode rules: no code point of §2.4, then NFC (well-formedness is checked while decoding). */
  checkText(s: string): "unstable_normalization" | "not_nfc" | undefined {
    if (this.mode.rfc8785) return undefined;
    for (let i = 0; i < s.length; i++) {
      if (s.charCodeAt(i) >= 0x80) return normalizationFault(s);
    }
    return undefined;
  }

  /** Decodes the string whose opening quote is at pos. */
  parseString(isKey = false): string {
    const d = this.data;
    this.pos++;
    const start = this.pos;
    let p = start;
    let high = 0;
    while (p < d.length) {
      const c = d[p]!;
      if (c === 0x22) {
        this.pos = p + 1;
        if (high < 0x80) return this.text.slice(start, p);
        const bad = invalidUTF8At(d, start, p);
        if (bad >= 0) throw this.failAt(isKey, "invalid_utf8", bad);
        return d.toString("utf8", start, p);
      }
      if (c === 0x5c) {
        this.pos = p;
        return this.parseEscapedString(start, isKey);
      }
      if (c < 0x20) {
        this.pos = p;
        throw this.failAt(isKey, "syntax", p);
      }
      high |= c;
      p++;
    }
    this.pos = p;
    throw this.failAt(isKey, "syntax", p);
  }

  failAt(isKey: boolean, kind: Kind, offset: number): DomainError {
    return isKey ? this.failKey(kind, offset) : this.fail(kind, offset);
  }

  parseEscapedString(start: number, isKey: boolean): string {
    const d = this.data;
    const bad = invalidUTF8At(d, start, this.pos);
    if (bad >= 0) throw this.failAt(isKey, "invalid_utf8", bad);
    let out = d.toString("utf8", start, this.pos);
    let run = this.pos; // start of the current run of unescaped bytes
    let p = this.pos;
    while (p < d.length) {
      const c = d[p]!;
      if (c === 0x22) {
        out += d.toString("utf8", run, p);
        this.pos = p + 1;
        return out;
      }
      if (c < 0x20) throw this.failAt(isKey, "syntax", p);
      if (c < 0x80 && c !== 0x5c) {
        p++;
        continue;
      }
      if (c >= 0x80) {
        const size = utf8SequenceLength(d, p, d.length);
        if (size === 0) throw this.failAt(isKey, "invalid_utf8", p);
        p += size;
        continue;
      }
      // A backslash.
      out += d.toString("utf8", run, p);
      const at = p;
      if (p + 1 >= d.length) throw this.failAt(isKey, "syntax", at);
      const e = d[p + 1]!;
      p += 2;
      switch (e) {
        case 0x22:
          out += '"';
          break;
        case 0x5c:
          out += "\\";
          break;
        case 0x2f:
          out += "/";
          break;
        case 0x62:
          out += "\b";
          break;
        case 0x66:
          out += "\f";
          break;
        case 0x6e:
          out += "\n";
          break;
        case 0x72:
          out += "\r";
          break;
        case 0x74:
          out += "\t";
          break;
        case 0x75: {
          const r = hex4(d, p);
          if (r < 0) throw this.failAt(isKey, "syntax", at);
          p += 4;
          if (r >= 0xd800 && r <= 0xdfff) {
            let ok = false;
            let lo = 0;
            if (r < 0xdc00 && p + 1 < d.length && d[p] === 0x5c && d[p + 1] === 0x75) {
              p += 2;
              lo = hex4(d, p);
              if (lo < 0) throw this.failAt(isKey, "syntax", p - 2);
              p += 4;
              ok = lo >= 0xdc00 && lo <= 0xdfff;
            }
            if (!ok) throw this.failAt(isKey, "lone_surrogate", at);
            out += String.fromCharCode(r, lo);
          } else {
            out += String.fromCharCode(r);
          }
          break;
        }
        default:
          throw this.failAt(isKey, "syntax", at);
      }
      run = p;
    }
    throw this.failAt(isKey, "syntax", p);
  }

  parseNumber(): JsonNumber {
    const d = this.data;
    const start = this.pos;
    const digits = (): number => {
      let n = 0;
      while (this.pos < d.length && d[this.pos]! >= 0x30 && d[this.pos]! <= 0x39) {
        this.pos++;
        n++;
      }
      return n;
    };
    if (d[this.pos] === 0x2d) this.pos++;
    if (this.pos < d.length && d[this.pos] === 0x30) this.pos++;
    else if (digits() === 0) throw this.fail("syntax", start);
    let plain = true;
    if (this.pos < d.length && d[this.pos] === 0x2e) {
      plain = false;
      this.pos++;
      if (digits() === 0) throw this.fail("syntax", start);
    }
    if (this.pos < d.length && (d[this.pos] === 0x65 || d[this.pos] === 0x45)) {
      plain = false;
      this.pos++;
      if (this.pos < d.length && (d[this.pos] === 0x2b || d[this.pos] === 0x2d)) this.pos++;
      if (digits() === 0) throw this.fail("syntax", start);
    }
    const tok = this.text.slice(start, this.pos);
    const neg = d[start] === 0x2d;
    if (plain && !this.mode.rfc8785 && this.pos - start - (neg ? 1 : 0) <= 15) {
      // At most 15 digits: always a safe integer.
      const v = Number(tok);
      return new JsonNumber(tok, v === 0 ? "0" : String(v));
    }
    const r = numberCanonical(tok, this.mode.allowNonInteger, this.mode.rfc8785);
    if (typeof r !== "string") throw this.fail(r.kind, start);
    return new JsonNumber(tok, r);
  }
}

/** Four hexadecimal digits at d[p:], or -1. */
function hex4(d: Buffer, p: number): number {
  if (d.length - p < 4) return -1;
  let r = 0;
  for (let i = p; i < p + 4; i++) {
    const c = d[i]!;
    let v: number;
    if (c >= 0x30 && c <= 0x39) v = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) v = c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) v = c - 0x41 + 10;
    else return -1;
    r = (r << 4) | v;
  }
  return r;
}

/**
 * The length of the well-formed UTF-8 sequence (RFC 3629) starting at
 * d[p] (a byte ≥ 0x80), or 0 if none starts there. Go's utf8.DecodeRune
 * accepts exactly these.
 */
function utf8SequenceLength(d: Uint8Array, p: number, end: number): number {
  const c = d[p]!;
  const cont = (i: number, lo = 0x80, hi = 0xbf): boolean => {
    if (p + i >= end) return false;
    const b = d[p + i]!;
    return b >= lo && b <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/** The offset of the first byte in d[start:end] that begins no well-formed UTF-8 sequence, or -1. */
function invalidUTF8At(d: Uint8Array, start: number, end: number): number {
  for (let i = start; i < end; ) {
    if (d[i]! < 0x80) {
      i++;
      continue;
    }
    const n = utf8SequenceLength(d, i, end);
    if (n === 0) return i;
    i += n;
  }
  return -1;
}

/** The exact value of a number token: sign × digits × 10^exp, digits without leading or trailing zeros. */
interface Decimal {
  negative: boolean;
  digits: string;
  exp: number;
  huge: boolean;
}

const MAX_EXPONENT = 1_000_000_000;

/** Reads the exact value of a token that matched the RFC 8259 number grammar (Go's parseDecimal). */
export function parseDecimal(tok: string): Decimal {
  let negative = false;
  if (tok[0] === "-") {
    negative = true;
    tok = tok.slice(1);
  }
  let mant = tok;
  let expText = "";
  const e = tok.search(/[eE]/);
  if (e >= 0) {
    mant = tok.slice(0, e);
    expText = tok.slice(e + 1);
  }
  let intPart = mant;
  let frac = "";
  const dot = mant.indexOf(".");
  if (dot >= 0) {
    intPart = mant.slice(0, dot);
    frac = mant.slice(dot + 1);
  }
  const digits = (intPart + frac).replace(/^0+/, "");
  const trimmed = digits.replace(/0+$/, "");
  if (trimmed === "") return { negative: false, digits: "", exp: 0, huge: false };
  let expNegative = false;
  if (expText !== "" && (expText[0] === "+" || expText[0] === "-")) {
    expNegative = expText[0] === "-";
    expText = expText.slice(1);
  }
  expText = expText.replace(/^0+/, "");
  let huge = false;
  let exp = 0;
  if (expText.length > 10) huge = true;
  else if (expText !== "") exp = Number(expText);
  if (expNegative) exp = -exp;
  exp += digits.length - trimmed.length - frac.length;
  if ((huge && expNegative) || exp < -MAX_EXPONENT) return { negative, digits: trimmed, exp: -1, huge: true };
  if (huge || exp > MAX_EXPONENT) return { negative, digits: trimmed, exp: 1, huge: true };
  return { negative, digits: trimmed, exp, huge: false };
}

function sameDecimal(a: Decimal, b: Decimal): boolean {
  return a.negative === b.negative && a.digits === b.digits && a.exp === b.exp && a.huge === b.huge;
}

const MAX_SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);

/** The canonical form of a number token under the domain's number rules, or the refusal kind. */
function numberCanonical(tok: string, allowNonInteger: boolean, rfc8785: boolean): string | { kind: Kind } {
  if (rfc8785) {
    const f = Number(tok);
    if (!Number.isFinite(f)) return { kind: "integer_range" };
    return String(f);
  }
  const dec = parseDecimal(tok);
  if (dec.exp >= 0) {
    if (dec.digits === "") return "0";
    if (dec.huge || dec.digits.length + dec.exp > 16) return { kind: "integer_range" };
    const v = BigInt(dec.digits + "0".repeat(dec.exp));
    if (v > MAX_SAFE_BIG) return { kind: "integer_range" };
    return (dec.negative ? "-" : "") + v.toString();
  }
  if (!allowNonInteger) return { kind: "non_integer" };
  const f = Number(tok);
  if (!Number.isFinite(f)) return { kind: "inexact_number" };
  const text = String(f);
  if (!sameDecimal(parseDecimal(text), dec)) return { kind: "inexact_number" };
  return text;
}

function mode(options: DomainOptions | undefined): ParseMode {
  const maxDepth = options?.maxDepth !== undefined && options.maxDepth > 0 ? options.maxDepth : DEFAULT_MAX_DEPTH;
  return { allowNonInteger: options?.allowNonInteger === true, maxDepth, rfc8785: false };
}

function maxBytes(options: DomainOptions | undefined): number {
  const m = options?.maxBytes;
  if (m === undefined || m <= 0) return DEFAULT_MAX_BYTES;
  return Math.min(m, MAX_INPUT_BYTES);
}

function parseWith(data: Buffer, m: ParseMode, limit: number): JsonValue {
  if (data.length > limit) throw new DomainError("too_large", "", false, limit);
  const p = new Parser(data, m);
  p.skipSpace();
  const v = p.parseValue();
  p.skipSpace();
  if (p.pos !== data.length) throw p.fail("syntax", p.pos);
  return v;
}

/**
 * Reads one JSON value inside the strict domain. Refusals are DomainErrors
 * with the same kind and pointer as Go's commit package.
 */
export function parse(input: JsonText, options?: DomainOptions): JsonValue {
  return parseWith(toBytes(input), mode(options), maxBytes(options));
}

/** Reads a JSON object inside the strict domain; anything else is refused as not_object. */
export function parseObject(input: JsonText, options?: DomainOptions): JsonObject {
  const data = toBytes(input);
  const v = parseWith(data, mode(options), maxBytes(options));
  if (!(v instanceof Map)) {
    let i = 0;
    while (i < data.length && (data[i] === 0x20 || data[i] === 0x09 || data[i] === 0x0a || data[i] === 0x0d)) i++;
    throw new DomainError("not_object", "", false, i);
  }
  return v;
}

/** Test-only: RFC 8785 without the strict domain's Unicode and number rules. @internal */
export function parseRFC8785(input: JsonText): JsonValue {
  return parseWith(toBytes(input), { allowNonInteger: true, maxDepth: DEFAULT_MAX_DEPTH, rfc8785: true }, MAX_INPUT_BYTES);
}

/**
 * Reads a JSON object in the strict domain (options as parse) and returns
 * it with the exact bytes of each top-level member's value, so that an
 * embedded signed document can be checked byte for byte.
 */
export function parseObjectWithRaw(input: JsonText, options?: DomainOptions): { value: JsonObject; raw: Map<string, Buffer> } {
  const data = toBytes(input);
  const limit = maxBytes(options);
  if (data.length > limit) throw new DomainError("too_large", "", false, limit);
  const p = new Parser(data, mode(options));
  p.spans = new Map();
  p.skipSpace();
  const v = p.parseValue();
  p.skipSpace();
  if (p.pos !== data.length) throw p.fail("syntax", p.pos);
  if (!(v instanceof Map)) throw new DomainError("not_object", "", false, 0);
  const raw = new Map<string, Buffer>();
  for (const [name, [a, b]] of p.spans) raw.set(name, data.subarray(a, b));
  return { value: v, raw };
}
