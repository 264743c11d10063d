// The RFC 8785 (JCS) serializer and the parameter digest
// (docs/commitment.md §1, §3).

import { createHash, timingSafeEqual } from "node:crypto";
import { DomainError, LedgerError, pointer } from "./errors.js";
import { normalizationFault } from "./unicode.js";
import {
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_DEPTH,
  type DomainOptions,
  JsonNumber,
  type JsonText,
  type JsonValue,
  parseObject,
  parse,
} from "./json.js";

/** Prefixes the canonical parameters in the parameter digest. */
export const PARAMS_DOMAIN_SEPARATOR = "ledger/v1/params\n";

/**
 * A value to serialize: what parse returns, or one built in memory with
 * JavaScript numbers (safe integers; others only when admitted) and plain
 * objects.
 */
export type JsonInput =
  | null
  | boolean
  | string
  | number
  | JsonNumber
  | readonly JsonInput[]
  | ReadonlyMap<string, JsonInput>
  | { readonly [name: string]: JsonInput };

/** Writes a value read by parse (already inside the domain) in RFC 8785 form. */
export function serializeChecked(v: JsonValue): string {
  if (v === null) return "null";
  switch (typeof v) {
    case "boolean":
      return v ? "true" : "false";
    case "string":
      return JSON.stringify(v);
  }
  if (v instanceof JsonNumber) return v.canonical;
  if (Array.isArray(v)) {
    let s = "[";
    for (let i = 0; i < v.length; i++) {
      if (i > 0) s += ",";
      s += serializeChecked(v[i]!);
    }
    return s + "]";
  }
  const m = v as Map<string, JsonValue>;
  const names = [...m.keys()].sort();
  let s = "{";
  for (let i = 0; i < names.length; i++) {
    if (i > 0) s += ",";
    const name = names[i]!;
    s += JSON.stringify(name) + ":" + serializeChecked(m.get(name)!);
  }
  return s + "}";
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function checkString(s: string, path: (string | number)[], key: boolean): void {
  if (loneSurrogate.test(s)) throw new DomainError("lone_surrogate", pointer(path), key, -1);
  const fault = normalizationFault(s);
  if (fault !== undefined) throw new DomainError(fault, pointer(path), key, -1);
}

function serializeInput(v: JsonInput, options: DomainOptions | undefined, path: (string | number)[], depth: number): string {
  if (v === null) return "null";
  switch (typeof v) {
    case "boolean":
      return v ? "true" : "false";
    case "string":
      checkString(v, path, false);
      return JSON.stringify(v);
    case "number":
      if (!Number.isFinite(v)) throw new DomainError("non_finite", pointer(path), false, -1);
      if (Number.isInteger(v)) {
        if (!Number.isSafeInteger(v)) throw new DomainError("integer_range", pointer(path), false, -1);
        return String(v);
      }
      if (options?.allowNonInteger !== true) throw new DomainError("non_integer", pointer(path), false, -1);
      return String(v);
    case "object":
      break;
    default:
      throw new DomainError("unsupported_type", pointer(path), false, -1);
  }
  if (v instanceof JsonNumber) {
    // Re-check: a JsonNumber may have been built by hand.
    const n = parse(v.canonical, { allowNonInteger: options?.allowNonInteger === true });
    if (!(n instanceof JsonNumber) || n.canonical !== v.canonical) throw new DomainError("syntax", pointer(path), false, -1);
    return v.canonical;
  }
  const maxDepth = options?.maxDepth !== undefined && options.maxDepth > 0 ? options.maxDepth : DEFAULT_MAX_DEPTH;
  if (depth + 1 > maxDepth) throw new DomainError("too_deep", pointer(path), false, -1);
  if (Array.isArray(v)) {
    let s = "[";
    for (let i = 0; i < v.length; i++) {
      if (i > 0) s += ",";
      path.push(i);
      s += serializeInput(v[i]!, options, path, depth + 1);
      path.pop();
    }
    return s + "]";
  }
  let entries: [string, JsonInput][];
  if (v instanceof Map) {
    entries = [...(v as ReadonlyMap<string, JsonInput>).entries()];
    for (const [name] of entries) {
      if (typeof name !== "string") throw new DomainError("unsupported_type", pointer(path), true, -1);
    }
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) throw new DomainError("unsupported_type", pointer(path), false, -1);
    entries = Object.entries(v as { [name: string]: JsonInput });
  }
  for (const [name] of entries) checkString(name, path, true);
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let s = "{";
  for (let i = 0; i < entries.length; i++) {
    const [name, value] = entries[i]!;
    if (i > 0) s += ",";
    path.push(name);
    s += JSON.stringify(name) + ":" + serializeInput(value, options, path, depth + 1);
    path.pop();
  }
  return s + "}";
}

/**
 * The RFC 8785 form of an in-memory value, after holding it to the strict
 * domain (Unicode, numbers, depth and size); refusals carry offset -1.
 */
export function canonicalizeValue(v: JsonInput, options?: DomainOptions): Buffer {
  const out = Buffer.from(serializeInput(v, options, [], 0), "utf8");
  const max = options?.maxBytes !== undefined && options.maxBytes > 0 ? options.maxBytes : DEFAULT_MAX_BYTES;
  if (out.length > max) throw new DomainError("too_large", "", false, -1);
  return out;
}

/** Checks JSON text against the strict domain and returns its RFC 8785 canonical form. */
export function canonicalize(input: JsonText, options?: DomainOptions): Buffer {
  return Buffer.from(serializeChecked(parse(input, options)), "utf8");
}

/** A version 1 parameter commitment: the digest and the length of the canonical bytes it covers. */
export interface Commitment {
  /** "sha256:" and 64 lower-case hex digits. */
  digest: string;
  size: number;
  /** The canonical bytes, JCS(params). */
  canonical: Buffer;
  /** Always false: a version 1 commitment hides nothing (hide, in hiding.ts, makes version 2 ones). */
  hiding: false;
}

const SEPARATOR_BYTES = Buffer.from(PARAMS_DOMAIN_SEPARATOR);

function commitBytes(canonical: Buffer): Commitment {
  const h = createHash("sha256");
  h.update(SEPARATOR_BYTES);
  h.update(canonical);
  return { digest: "sha256:" + h.digest("hex"), size: canonical.length, canonical, hiding: false };
}

/**
 * The parameter digest of raw parameters given as JSON text (a JSON object):
 * SHA-256("ledger/v1/params\n" || JCS(params)), with the length of JCS(params).
 */
export function paramsDigest(input: JsonText, options?: DomainOptions): Commitment {
  return commitBytes(Buffer.from(serializeChecked(parseObject(input, options)), "utf8"));
}

/** The parameter digest of parameters held in memory (an object). */
export function paramsDigestOf(params: JsonInput, options?: DomainOptions): Commitment {
  if (params === null || typeof params !== "object" || Array.isArray(params) || params instanceof JsonNumber) {
    throw new DomainError("not_object", "", false, -1);
  }
  return commitBytes(canonicalizeValue(params, options));
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** Checks the one accepted spelling of a digest, "sha256:" and 64 lower-case hex digits. */
export function parseDigest(s: string): Buffer {
  if (!DIGEST_RE.test(s)) throw new LedgerError("malformed_digest", 'malformed digest: want "sha256:" and 64 lower-case hex digits');
  return Buffer.from(s.slice(7), "hex");
}

/** Compares two digests (text form) in constant time; a malformed one is never equal. */
export function digestEqual(a: string, b: string): boolean {
  if (!DIGEST_RE.test(a) || !DIGEST_RE.test(b)) return false;
  return timingSafeEqual(Buffer.from(a.slice(7), "hex"), Buffer.from(b.slice(7), "hex"));
}

const PARAMS_DIGEST_RE = /^(v2:)?sha256:[0-9a-f]{64}$/;

/**
 * Parses a parameter digest of either version (docs/commitment.md §6):
 * "sha256:<hex>" (version 1) or "v2:sha256:<hex>" (version 2, hiding),
 * exactly, and says which it is.
 */
export function parseParamsDigest(s: string): { digest: Buffer; hiding: boolean } {
  const m = PARAMS_DIGEST_RE.exec(s);
  if (m === null) {
    throw new LedgerError("malformed_digest", 'malformed parameter digest: want "sha256:" or "v2:sha256:" and 64 lower-case hex digits');
  }
  const hiding = m[1] !== undefined;
  return { digest: Buffer.from(s.slice(hiding ? 10 : 7), "hex"), hiding };
}

/** Reports whether s is a parameter digest of either version, spelled exactly. */
export function isParamsDigest(s: string): boolean {
  return PARAMS_DIGEST_RE.test(s);
}

/**
 * Compares two parameter digests (text form, either version) in constant
 * time, as whole strings: a version 1 and a version 2 digest are never
 * equal, whatever their hex. A malformed one is never equal.
 */
export function paramsDigestEqual(a: string, b: string): boolean {
  if (!PARAMS_DIGEST_RE.test(a) || !PARAMS_DIGEST_RE.test(b) || a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a, "latin1"), Buffer.from(b, "latin1"));
}

export { DEFAULT_MAX_BYTES };
