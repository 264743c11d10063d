// Signed entries (docs/entry.md): strict decoding, the signed message, the
// entry hash and the Merkle leaf hash. Go's package entry is the reference.

import { createHash } from "node:crypto";
import { isParamsDigest, serializeChecked } from "./canonical.js";
import { DomainError, LedgerError } from "./errors.js";
import { JsonNumber, type JsonObject, type JsonValue, parse } from "./json.js";

export const MAX_ENTRY_BYTES = 65535;
export const MAX_ATTRIBUTES_BYTES = 32 << 10;
export const MAX_STRING_BYTES = 1024;
export const MAX_POLICIES = 256;
const MAX_TTL_MS = 366 * 24 * 3600 * 1000;

/** An entry refused by the decoder: field names the member, never its value. */
export class EntryError extends LedgerError {
  readonly field: string;
  constructor(field: string, problem: string) {
    super("entry_invalid", `entry: ${field !== "" ? field + ": " : ""}${problem}`);
    this.name = "EntryError";
    this.field = field;
  }
}

/** A decoded, strictly valid signed entry. Members are as in docs/entry.md §1. */
export interface Entry {
  readonly version: number;
  readonly kind: string | undefined;
  readonly index: number;
  readonly origin: string;
  readonly keyId: string;
  readonly prev: string;
  readonly time: string;
  readonly sig: Buffer;
  /** Every member, as decoded (strings, numbers as JavaScript numbers, arrays; attributes as canonical text). */
  readonly members: Readonly<Record<string, unknown>>;
  /** The attributes' canonical bytes, for decisions. */
  readonly attributes: Buffer | undefined;
  /** The signed bytes, exactly as received. */
  readonly raw: Buffer;
  /** The signed message M (docs/entry.md §2). */
  readonly message: Buffer;
}

const COMMON_V4 = ["index", "key_id", "kind", "origin", "prev", "sig", "time", "version"];
const V1 = ["action", "attributes", "decision", "index", "key_id", "mediator", "origin", "params_digest", "params_size", "policies", "prev", "principal", "sig", "tiers_digest", "time", "version"];
const V4_MEMBERS: Record<string, string[]> = {
  approval_config: ["execution_ttl_ms", "pending_ttl_ms"],
  approval: ["approval", "approver", "preview_digest", "request", "verdict"],
  consumption: ["action", "approval", "mediator", "params_digest", "params_size", "principal", "request"],
  outcome: ["approval", "consumption", "mediator", "operation_id", "result"],
};

const IDENTIFIERS = new Set(["action", "decision", "key_id", "kind", "mediator", "origin", "principal", "approver", "result", "verdict", "operation_id"]);
const DIGESTS = new Set(["tiers_digest", "definition_digest", "policy_set", "prev", "approval", "preview_digest"]);
const INTEGERS = new Set(["index", "params_size", "version", "request", "consumption", "execution_ttl_ms", "pending_ttl_ms"]);

/** The code points an identifier may not hold (docs/entry.md §1.1, frozen at Unicode 15.0). */
const REFUSED_RANGES: [number, number][] = [
  [0x0000, 0x001f], [0x007f, 0x009f], [0x00ad, 0x00ad], [0x0600, 0x0605], [0x061c, 0x061c], [0x06dd, 0x06dd],
  [0x070f, 0x070f], [0x0890, 0x0891], [0x08e2, 0x08e2], [0x180e, 0x180e], [0x200b, 0x200f], [0x2028, 0x202e],
  [0x2060, 0x2064], [0x2066, 0x206f], [0xfeff, 0xfeff], [0xfff9, 0xfffb], [0x110bd, 0x110bd], [0x110cd, 0x110cd],
  [0x13430, 0x1343f], [0x1bca0, 0x1bca3], [0x1d173, 0x1d17a], [0xe0001, 0xe0001], [0xe0020, 0xe007f],
];

export function isIdentifier(s: string): boolean {
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    for (const [lo, hi] of REFUSED_RANGES) if (c >= lo && c <= hi) return false;
  }
  return true;
}

function expectedMembers(version: number, kind: string | undefined, m: JsonObject): string[] {
  switch (version) {
    case 1:
      return V1;
    case 2:
      return [...V1, "definition_digest"];
    case 3:
      if (kind === "decision") return [...V1, "definition_digest", "kind", "policy_errors", "policy_set"];
      if (kind === "policy_set") return ["index", "key_id", "kind", "origin", "policy_set", "prev", "sig", "time", "version"];
      throw new EntryError("kind", kind === undefined ? "missing" : "not a known kind");
    case 4: {
      if (kind === undefined) throw new EntryError("kind", "missing");
      const extra = V4_MEMBERS[kind];
      if (extra === undefined || !Object.hasOwn(V4_MEMBERS, kind)) throw new EntryError("kind", "not a known kind");
      return [...COMMON_V4, ...extra.filter((x) => x !== "operation_id" || m.has("operation_id"))];
    }
    case 5:
      if (kind === undefined) throw new EntryError("kind", "missing");
      if (kind !== "outcome") throw new EntryError("kind", "not a known kind");
      return [...COMMON_V4, "decision", "mediator", "result", ...(m.has("operation_id") ? ["operation_id"] : [])];
  }
  throw new EntryError("version", "not a known version");
}

const ZERO_DIGEST = "sha256:" + "0".repeat(64);
const TIME_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

function validTime(s: string): boolean {
  const m = TIME_RE.exec(s);
  if (m === null) return false;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59) return false;
  const days = new Date(Date.UTC(2000, mo, 0)).getUTCDate();
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const max = mo === 2 ? (leap ? 29 : 28) : days;
  return d <= max;
}

function separator(version: number): string {
  return `ledger/v${version}/entry\n`;
}

/**
 * Decodes a signed entry strictly: its bytes must be exactly the canonical
 * encoding of a valid entry (docs/entry.md §3). Refusals are EntryError.
 */
export function parseEntry(input: Uint8Array): Entry {
  const raw = Buffer.from(input);
  if (raw.length > MAX_ENTRY_BYTES) throw new EntryError("", `longer than ${MAX_ENTRY_BYTES} bytes`);
  let doc: JsonValue;
  try {
    doc = parse(raw, { maxBytes: MAX_ENTRY_BYTES });
  } catch (e) {
    if (e instanceof DomainError) throw new EntryError("", `not in the strict JSON domain: ${e.code} at ${JSON.stringify(e.pointer)}`);
    throw e;
  }
  if (!(doc instanceof Map)) throw new EntryError("", "not a JSON object");
  if (!Buffer.from(serializeChecked(doc), "utf8").equals(raw)) throw new EntryError("", "not in canonical form");
  const v = doc.get("version");
  if (!(v instanceof JsonNumber) || !/^[0-9]+$/.test(v.lexeme)) throw new EntryError("version", "not an integer in 0..2^53-1");
  const version = Number(v.lexeme);
  const kindV = doc.get("kind");
  if (kindV !== undefined && typeof kindV !== "string") throw new EntryError("kind", "not a string");
  const kind = kindV as string | undefined;
  if (version <= 2 && kind !== undefined) throw new EntryError("kind", "not a member of a version " + version + " entry");
  const want = expectedMembers(version, kind, doc);
  for (const name of want) if (!doc.has(name)) throw new EntryError(name, "missing");
  for (const name of doc.keys()) if (!want.includes(name)) throw new EntryError(name, "unknown member");

  const members: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [name, value] of doc) {
    if (name === "attributes") continue;
    if (name === "decision" && version === 5) {
      members[name] = integer(name, value);
      continue;
    }
    if (INTEGERS.has(name)) {
      members[name] = integer(name, value);
    } else if (name === "policies" || name === "policy_errors") {
      if (!Array.isArray(value) || value.some((x) => typeof x !== "string")) throw new EntryError(name, "not an array of strings");
      const ids = value as string[];
      if (ids.length > MAX_POLICIES) throw new EntryError(name, `more than ${MAX_POLICIES}`);
      for (let i = 0; i < ids.length; i++) {
        checkString(name, ids[i]!, true);
        if (i > 0 && Buffer.compare(Buffer.from(ids[i - 1]!), Buffer.from(ids[i]!)) >= 0) throw new EntryError(name, `not sorted in byte order without repeats (at ${i})`);
      }
      members[name] = ids;
    } else {
      if (typeof value !== "string") throw new EntryError(name, "not a string");
      if (name === "params_digest") {
        // Either version of the parameter commitment (docs/commitment.md §6).
        if (!isParamsDigest(value)) throw new EntryError(name, "not a parameter digest ((v2:)sha256:<64 lower-case hex digits>)");
      } else if (DIGESTS.has(name)) {
        if (!/^sha256:[0-9a-f]{64}$/.test(value)) throw new EntryError(name, "not a digest (sha256:<64 lower-case hex digits>)");
      } else if (name === "time") {
        if (!validTime(value)) throw new EntryError(name, "not a UTC time written as 2006-01-02T15:04:05.000000Z");
      } else if (name === "sig") {
        if (!/^[A-Za-z0-9+/]{86}==$/.test(value) || Buffer.from(value, "base64").toString("base64") !== value) throw new EntryError(name, "not a base64 Ed25519 signature");
      } else {
        checkString(name, value, IDENTIFIERS.has(name));
      }
      members[name] = value;
    }
  }
  let attributes: Buffer | undefined;
  if (doc.has("attributes")) {
    const a = doc.get("attributes")!;
    if (!(a instanceof Map)) throw new EntryError("attributes", "not a JSON object");
    attributes = Buffer.from(serializeChecked(a), "utf8");
    if (attributes.length > MAX_ATTRIBUTES_BYTES) throw new EntryError("attributes", `longer than ${MAX_ATTRIBUTES_BYTES} bytes`);
    members["attributes"] = attributes.toString("utf8");
  }
  checkRules(version, kind, members);
  const withoutSig = new Map(doc);
  withoutSig.delete("sig");
  const message = Buffer.concat([Buffer.from(separator(version)), Buffer.from(serializeChecked(withoutSig), "utf8")]);
  return {
    version,
    kind,
    index: members["index"] as number,
    origin: members["origin"] as string,
    keyId: members["key_id"] as string,
    prev: members["prev"] as string,
    time: members["time"] as string,
    sig: Buffer.from(members["sig"] as string, "base64"),
    members,
    attributes,
    raw,
    message,
  };
}

function integer(name: string, v: JsonValue): number {
  if (!(v instanceof JsonNumber) || !/^(0|[1-9][0-9]*)$/.test(v.lexeme)) throw new EntryError(name, "not an integer in 0..2^53-1");
  return Number(v.lexeme);
}

function checkString(name: string, s: string, identifier: boolean): void {
  if (s === "") throw new EntryError(name, "empty");
  if (Buffer.byteLength(s) > MAX_STRING_BYTES) throw new EntryError(name, `longer than ${MAX_STRING_BYTES} bytes`);
  if (identifier && !isIdentifier(s)) throw new EntryError(name, "holds a character an identifier may not hold");
}

function checkRules(version: number, kind: string | undefined, m: Record<string, unknown>): void {
  const index = m["index"] as number;
  const nonZero = (name: string): void => {
    if (m[name] === ZERO_DIGEST) throw new EntryError(name, "all zeros");
  };
  const size = (): void => {
    const s = m["params_size"] as number;
    // A hiding (v2:) commitment of no field covers nothing: size 0.
    const least = String(m["params_digest"]).startsWith("v2:") ? 0 : 2;
    if (s < least) throw new EntryError("params_size", "not a canonical object size");
  };
  if (version === 5) {
    if (!["succeeded", "failed", "unknown"].includes(m["result"] as string)) throw new EntryError("result", "not succeeded, failed or unknown");
    if ((m["decision"] as number) >= index) throw new EntryError("decision", "not an earlier entry");
    return;
  }
  if (version === 4) {
    switch (kind) {
      case "approval_config":
        for (const n of ["execution_ttl_ms", "pending_ttl_ms"]) {
          const v = m[n] as number;
          if (v < 1 || v > MAX_TTL_MS) throw new EntryError(n, "not a whole number of milliseconds from 1 to 31622400000");
        }
        return;
      case "approval":
        if (!["approve", "deny"].includes(m["verdict"] as string)) throw new EntryError("verdict", "not approve or deny");
        nonZero("preview_digest");
        break;
      case "consumption":
        size();
        break;
      case "outcome":
        if (!["succeeded", "failed", "unknown"].includes(m["result"] as string)) throw new EntryError("result", "not succeeded, failed or unknown");
        if ((m["consumption"] as number) >= index) throw new EntryError("consumption", "not an earlier entry");
        break;
    }
    nonZero("approval");
    if (kind !== "outcome" && (m["request"] as number) >= index) throw new EntryError("request", "not an earlier entry");
    return;
  }
  if (kind === "policy_set") {
    nonZero("policy_set");
    return;
  }
  if (kind === "decision") {
    nonZero("definition_digest");
    nonZero("policy_set");
    const errs = m["policy_errors"] as string[];
    if (errs.length > 0 && m["decision"] !== "deny") throw new EntryError("policy_errors", "a decision with erroring policies is deny (fail closed)");
    for (const id of errs) if (!(m["policies"] as string[]).includes(id)) throw new EntryError("policy_errors", "an erroring policy is not among the determining policies (fail closed)");
  }
  if (version === 2) nonZero("definition_digest");
  if (!["allow", "deny", "needs_approval"].includes(m["decision"] as string)) throw new EntryError("decision", "not allow, deny or needs_approval");
  size();
}

/** The entry hash: SHA-256 of the signed message, "sha256:<hex>". */
export function entryHash(e: Entry): string {
  return "sha256:" + createHash("sha256").update(e.message).digest("hex");
}

/** The RFC 6962 leaf hash of a signed entry: SHA-256(0x00 || entry). */
export function leafHash(raw: Uint8Array): Buffer {
  return createHash("sha256").update(Buffer.of(0)).update(raw).digest();
}
