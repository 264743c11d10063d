// The hiding parameter commitment, version 2 (docs/commitment.md §6, §7),
// and its disclosure file (§7.4). Go's commit/hiding.go and
// commit/disclosure.go are the reference.
//
//	c_f    = SHA-256("ledger/v2/field\n" || opening_f || JCS(name_f) || JCS(value_f))
//	digest = SHA-256("ledger/v2/params\n" || JCS(name_1) || c_1 || JCS(name_2) || c_2 || ...)
//	size   = len(JCS(name_1) || c_1 || ...)          (fields in canonical order)
//
// The strict domain and the canonical form are version 1's (json.ts,
// canonical.ts): an input hide refuses gets exactly the refusal
// paramsDigest gives. Openings are secrets: no message, toString, toJSON
// or inspected form of an Opening, a Disclosure or an opening source holds
// one, or a value.

import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import { parseParamsDigest, serializeChecked } from "./canonical.js";
import { DomainError, type Kind, LedgerError, pointer } from "./errors.js";
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, type DomainOptions, JsonNumber, type JsonObject, type JsonText, type JsonValue, parseObject } from "./json.js";
import { normalizationFault } from "./unicode.js";

/** Prefixes the field names and commitments in a version 2 parameter digest. */
export const HIDING_DOMAIN_SEPARATOR = "ledger/v2/params\n";
/** Prefixes a field's canonical name and value in its commitment. */
export const FIELD_DOMAIN_SEPARATOR = "ledger/v2/field\n";
/** The HKDF salt of derived openings (docs/commitment.md §7.5). */
export const OPENING_DERIVATION_SALT = "ledger/v2/opening\n";
/** The length of an opening in bytes. */
export const OPENING_SIZE = 32;
/** The value of a disclosure file's "disclosure" member: the commitment version it opens. */
export const DISCLOSURE_FORMAT = 2;

const HIDING_SEPARATOR_BYTES = Buffer.from(HIDING_DOMAIN_SEPARATOR);
const FIELD_SEPARATOR_BYTES = Buffer.from(FIELD_DOMAIN_SEPARATOR);
const SALT_BYTES = Buffer.from(OPENING_DERIVATION_SALT);
const HEX32 = /^[0-9a-f]{64}$/;
const V2_DIGEST = /^v2:sha256:[0-9a-f]{64}$/;
const INSPECT = Symbol.for("nodejs.util.inspect.custom");

/** A version 2 (hiding) parameter commitment. */
export interface HidingCommitment {
  /** "v2:sha256:" and 64 lower-case hex digits. */
  digest: string;
  /** The length of the names and field commitments the digest covers: it depends on the fields' names only. */
  size: number;
  hiding: true;
}

/** A version 2 commitment with the disclosure that opens it, which stays with the workload. */
export interface HideResult {
  commitment: HidingCommitment;
  disclosure: Disclosure;
}

/** Why a disclosure does not open a commitment (docs/commitment.md §7.4); the strings are stable. */
export type DisclosureCode = "malformed" | "not_hiding" | "commitment_mismatch" | "field_mismatch" | "field_not_opened";

/**
 * A disclosure that does not open a commitment, a malformed disclosure
 * file, or a field an operation needs that the disclosure does not open.
 * field names the field at fault (if one is), pointer the place in a file
 * (RFC 6901). It never carries a value or an opening.
 */
export class DisclosureError extends LedgerError {
  declare readonly code: DisclosureCode;
  /** The field at fault, or "". */
  readonly field: string;
  /** For malformed: the JSON pointer of the fault in the file ("" is the whole file). */
  readonly pointer: string;
  /** What is wrong, in words, or "". */
  readonly problem: string;
  constructor(code: DisclosureCode, details: { field?: string; pointer?: string; problem?: string; cause?: unknown } = {}) {
    const field = details.field ?? "";
    const ptr = details.pointer ?? "";
    const problem = details.problem ?? "";
    let msg = `commit: disclosure: ${code}`;
    if (field !== "") msg += ` in field ${JSON.stringify(field)}`;
    if (ptr !== "" || code === "malformed") msg += ` at ${JSON.stringify(ptr)}`;
    if (problem !== "") msg += `: ${problem}`;
    if (details.cause instanceof Error) msg += ` (${details.cause.message})`;
    super(code, msg, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "DisclosureError";
    this.field = field;
    this.pointer = ptr;
    this.problem = problem;
  }
}

/** An opening source refused its input or gave no opening. */
export type OpeningCode = "short_secret" | "empty_call_key" | "bad_call_key" | "bad_opening";

/** A derived-openings secret shorter than 32 bytes, an empty or ill-formed call key, or an opening that is not 32 bytes. */
export class OpeningError extends LedgerError {
  declare readonly code: OpeningCode;
  constructor(code: OpeningCode, message: string, options?: { cause?: unknown }) {
    super(code, `commit: ${message}`, options);
    this.name = "OpeningError";
  }
}

let openingBytes: (o: Opening) => Buffer;
let ownOpening: (b: Buffer) => Opening;

/**
 * The secret that opens one field's commitment: 32 bytes, as secret as the
 * value it hides. Its printed forms (toString, toJSON, util.inspect) are
 * redacted; a Disclosure writes it to its file.
 */
export class Opening {
  readonly #bytes: Buffer;
  private constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }
  static {
    openingBytes = (o) => o.#bytes;
    ownOpening = (b) => new Opening(b);
  }
  /** An opening from its 32 bytes (copied), for an OpeningSource of one's own. */
  static from(bytes: Uint8Array): Opening {
    if (!(bytes instanceof Uint8Array) || bytes.length !== OPENING_SIZE) throw new OpeningError("bad_opening", `an opening is ${OPENING_SIZE} bytes`);
    return new Opening(Buffer.from(bytes));
  }
  /** Compares two openings in constant time. */
  equals(o: Opening): boolean {
    return timingSafeEqual(this.#bytes, o.#bytes);
  }
  toString(): string {
    return "Opening(redacted)";
  }
  toJSON(): string {
    return "Opening(redacted)";
  }
  [INSPECT](): string {
    return "Opening(redacted)";
  }
}

/** Gives the opening of each top-level field of one call's parameters. */
export interface OpeningSource {
  /** The opening of the named field. MUST be the same for the same field within one call; throws if it has none. */
  opening(field: string): Opening;
}

class RandomOpenings implements OpeningSource {
  opening(): Opening {
    return ownOpening(randomBytes(OPENING_SIZE));
  }
  toString(): string {
    return "RandomOpenings";
  }
}

const RANDOM = new RandomOpenings();

/**
 * Each opening drawn from node:crypto's CSPRNG, one per field per call:
 * the default, and the only source whose openings are independent of
 * every other secret.
 */
export function randomOpenings(): OpeningSource {
  return RANDOM;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The strict domain's refusal of a string (lone surrogate, unstable normalization, not NFC), or undefined. */
function textFault(s: string): Kind | undefined {
  if (LONE_SURROGATE.test(s)) return "lone_surrogate";
  return normalizationFault(s);
}

/**
 * HKDF-SHA256 (RFC 5869) of 32 bytes. node:crypto's hkdfSync refuses an
 * info longer than 1024 bytes, which RFC 5869 does not bound (a long field
 * name makes one); those are expanded here with HMAC, one block being all
 * 32 bytes take.
 * @internal
 */
export function hkdf32(secret: Buffer, info: Buffer, useNode = info.length <= 1024): Buffer {
  if (useNode) return Buffer.from(hkdfSync("sha256", secret, SALT_BYTES, info, OPENING_SIZE));
  const prk = createHmac("sha256", SALT_BYTES).update(secret).digest();
  return createHmac("sha256", prk).update(info).update(Buffer.of(1)).digest();
}

class DerivedOpenings implements OpeningSource {
  readonly #secret: Buffer;
  readonly #info: Buffer;
  constructor(secret: Buffer, info: Buffer) {
    this.#secret = secret;
    this.#info = info;
  }
  opening(field: string): Opening {
    const kind = textFault(field);
    if (kind !== undefined) throw new DomainError(kind, "", true, -1);
    return ownOpening(hkdf32(this.#secret, Buffer.concat([this.#info, Buffer.from(JSON.stringify(field), "utf8")])));
  }
  toString(): string {
    return "DerivedOpenings(redacted)";
  }
  toJSON(): string {
    return "DerivedOpenings(redacted)";
  }
  [INSPECT](): string {
    return "DerivedOpenings(redacted)";
  }
}

/**
 * Derives each opening from a workload secret (at least 32 bytes) and the
 * call's key (its idempotency key), so that nothing is stored per call:
 *
 *	opening_f = HKDF-SHA256(secret, salt "ledger/v2/opening\n", info JCS(callKey) || JCS(name_f), 32)
 *
 * The trade-off (docs/commitment.md §7.5): the one secret then guards
 * every value ever committed with it, erasure means destroying it for
 * every call at once, and calls under one key are linkable. Refusals are
 * OpeningError short_secret, empty_call_key and bad_call_key.
 */
export function derivedOpenings(secret: Uint8Array, callKey: string): OpeningSource {
  if (!(secret instanceof Uint8Array) || secret.length < OPENING_SIZE) throw new OpeningError("short_secret", `an opening secret is at least ${OPENING_SIZE} bytes`);
  if (typeof callKey !== "string" || callKey === "") throw new OpeningError("empty_call_key", "derived openings need a non-empty call key");
  const kind = textFault(callKey);
  if (kind !== undefined) throw new OpeningError("bad_call_key", `the call key: ${kind}`);
  return new DerivedOpenings(Buffer.from(secret), Buffer.from(JSON.stringify(callKey), "utf8"));
}

interface Field {
  /** As decoded. */
  readonly name: string;
  readonly commitment: Buffer;
  /** The canonical value (RFC 8785 text), when disclosed. */
  readonly value: string | undefined;
  readonly opening: Opening | undefined;
}

function fieldCommitment(opening: Opening, name: string, value: string): Buffer {
  return createHash("sha256").update(FIELD_SEPARATOR_BYTES).update(openingBytes(opening)).update(JSON.stringify(name) + value, "utf8").digest();
}

/** The commitment to fields (in canonical order): the digest bytes and the size. */
function commitMap(fields: readonly Field[]): { digest: Buffer; size: number } {
  const h = createHash("sha256").update(HIDING_SEPARATOR_BYTES);
  let size = 0;
  for (const f of fields) {
    const name = Buffer.from(JSON.stringify(f.name), "utf8");
    h.update(name).update(f.commitment);
    size += name.length + f.commitment.length;
  }
  return { digest: h.digest(), size };
}

let makeDisclosure: (fields: readonly Field[]) => Disclosure;

/**
 * Opens a version 2 commitment: every field's commitment, and for the
 * disclosed fields the canonical value and the opening. hide returns one
 * with every field disclosed; only() keeps a subset to hand to an auditor;
 * deleting the file of the whole one is erasure (docs/commitment.md §7.6).
 * It is an OpeningSource: an approved call retried with the first call's
 * disclosure commits identically if and only if its parameters are equal.
 * Its printed forms are a summary without values or openings; serialize()
 * writes the file, which is as secret as the values it discloses.
 */
export class Disclosure implements OpeningSource {
  readonly #fields: readonly Field[];
  readonly #digest: Buffer;
  readonly #commitment: HidingCommitment;

  private constructor(fields: readonly Field[]) {
    this.#fields = fields;
    const { digest, size } = commitMap(fields);
    this.#digest = digest;
    this.#commitment = { digest: "v2:sha256:" + digest.toString("hex"), size, hiding: true };
  }
  static {
    makeDisclosure = (fields) => new Disclosure(fields);
  }

  /** What the field commitments hash to; check compares it with an entry's. */
  get commitment(): HidingCommitment {
    return { ...this.#commitment };
  }

  /** The names of every committed field, in canonical order. */
  fields(): string[] {
    return this.#fields.map((f) => f.name);
  }

  /** The names of the fields whose value is disclosed, in canonical order. */
  disclosed(): string[] {
    return this.#fields.filter((f) => f.value !== undefined).map((f) => f.name);
  }

  /** The names of the fields whose value stays hidden, in canonical order. */
  hidden(): string[] {
    return this.#fields.filter((f) => f.value === undefined).map((f) => f.name);
  }

  #field(name: string): Field | undefined {
    return this.#fields.find((f) => f.name === name);
  }

  /** A disclosed field's canonical JSON value, or undefined. */
  value(name: string): Buffer | undefined {
    const v = this.#field(name)?.value;
    return v === undefined ? undefined : Buffer.from(v, "utf8");
  }

  /** A disclosed field's opening; a field not disclosed (or not committed) is DisclosureError field_not_opened. */
  opening(name: string): Opening {
    const f = this.#field(name);
    if (f === undefined || f.opening === undefined) throw new DisclosureError("field_not_opened", { field: name });
    return f.opening;
  }

  /** The canonical form of the whole parameters when every field is disclosed, else undefined. */
  params(): Buffer | undefined {
    let s = "{";
    for (let i = 0; i < this.#fields.length; i++) {
      const f = this.#fields[i]!;
      if (f.value === undefined) return undefined;
      if (i > 0) s += ",";
      s += JSON.stringify(f.name) + ":" + f.value;
    }
    return Buffer.from(s + "}", "utf8");
  }

  /** A copy disclosing just the named fields (each disclosed here; else field_not_opened), every commitment kept. */
  only(names: readonly string[]): Disclosure {
    for (const n of names) {
      const f = this.#field(n);
      if (f === undefined || f.value === undefined) throw new DisclosureError("field_not_opened", { field: n });
    }
    const keep = new Set(names);
    return new Disclosure(
      this.#fields.map((f) => (keep.has(f.name) ? f : { name: f.name, commitment: f.commitment, value: undefined, opening: undefined })),
    );
  }

  /**
   * Checks this disclosure against a commitment from an entry: it must be
   * a version 2 one (not_hiding), the field commitments must hash to it
   * (commitment_mismatch), and each disclosed value with its opening must
   * give its field's commitment (field_mismatch, naming the field). A
   * digest spelled neither way is a LedgerError malformed_digest.
   */
  check(c: { readonly digest: string; readonly size: number }): void {
    const { digest, hiding } = parseParamsDigest(c.digest);
    if (!hiding) throw new DisclosureError("not_hiding");
    if (!timingSafeEqual(digest, this.#digest) || c.size !== this.#commitment.size) throw new DisclosureError("commitment_mismatch");
    for (const f of this.#fields) {
      if (f.value === undefined || f.opening === undefined) continue;
      if (!timingSafeEqual(fieldCommitment(f.opening, f.name, f.value), f.commitment)) throw new DisclosureError("field_mismatch", { field: f.name });
    }
  }

  /**
   * The disclosure file (docs/commitment.md §7.4) in canonical form, byte
   * for byte what Go's Disclosure.MarshalJSON writes:
   *
   *	{"disclosure":2,"fields":{NAME:{"commitment":HEX,"opening":HEX,"value":VALUE},...},"params_digest":"v2:sha256:HEX","params_size":N}
   *
   * with "opening" and "value" only for disclosed fields. Write it with
   * mode 0600; deleting it is erasure.
   */
  serialize(): Buffer {
    let s = `{"disclosure":${DISCLOSURE_FORMAT},"fields":{`;
    for (let i = 0; i < this.#fields.length; i++) {
      const f = this.#fields[i]!;
      if (i > 0) s += ",";
      s += JSON.stringify(f.name) + ':{"commitment":"' + f.commitment.toString("hex") + '"';
      if (f.value !== undefined && f.opening !== undefined) s += ',"opening":"' + openingBytes(f.opening).toString("hex") + '","value":' + f.value;
      s += "}";
    }
    s += `},"params_digest":"${this.#commitment.digest}","params_size":${this.#commitment.size}}`;
    return Buffer.from(s, "utf8");
  }

  /**
   * Reads a disclosure file. Values are held to the strict domain of the
   * parameters (options, the default: integers only, 1 MiB, 64 levels);
   * the file's own members to exactly the form serialize writes, in any
   * order and spacing; its params_digest and params_size must be what its
   * field commitments hash to. Refusals are DisclosureError malformed with
   * the JSON pointer of the fault (the DomainError of a value outside the
   * domain as its cause).
   */
  static parse(data: JsonText, options?: DomainOptions): Disclosure {
    const maxBytes = options?.maxBytes !== undefined && options.maxBytes > 0 ? options.maxBytes : DEFAULT_MAX_BYTES;
    const maxDepth = options?.maxDepth !== undefined && options.maxDepth > 0 ? options.maxDepth : DEFAULT_MAX_DEPTH;
    let root: JsonObject;
    try {
      // Commitments and openings beside the values; fields → NAME → value.
      root = parseObject(data, { allowNonInteger: options?.allowNonInteger === true, maxBytes: 4 * maxBytes + (1 << 16), maxDepth: maxDepth + 2 });
    } catch (e) {
      if (e instanceof DomainError) throw new DisclosureError("malformed", { pointer: e.pointer, problem: "outside the strict domain", cause: e });
      throw e;
    }
    const malformed = (ptr: string, problem: string): DisclosureError => new DisclosureError("malformed", { pointer: ptr, problem });
    const want = ["disclosure", "fields", "params_digest", "params_size"];
    for (const name of root.keys()) if (!want.includes(name)) throw malformed("", `unknown member (want ${JSON.stringify(want)})`);
    const format = root.get("disclosure");
    const fields = root.get("fields");
    const digestText = root.get("params_digest");
    const size = root.get("params_size");
    if (format === undefined || fields === undefined || digestText === undefined || size === undefined) throw malformed("", `missing a member (want ${JSON.stringify(want)})`);
    if (!(format instanceof JsonNumber) || format.canonical !== String(DISCLOSURE_FORMAT)) throw malformed("/disclosure", "not 2, the only disclosure format");
    if (!(fields instanceof Map)) throw malformed("/fields", "not an object");
    if (typeof digestText !== "string") throw malformed("/params_digest", "not a string");
    if (!(size instanceof JsonNumber) || !/^-?[0-9]+$/.test(size.canonical)) throw malformed("/params_size", "not an integer");

    const fieldMembers = ["commitment", "opening", "value"];
    const out: Field[] = [];
    for (const name of [...fields.keys()].sort()) {
      const ptr = pointer(["fields", name]);
      const f = fields.get(name)!;
      if (!(f instanceof Map)) throw malformed(ptr, "not an object");
      for (const m of f.keys()) if (!fieldMembers.includes(m)) throw malformed(ptr, `unknown member (want ${JSON.stringify(fieldMembers)})`);
      const commitment = f.get("commitment");
      const opening = f.get("opening");
      const value: JsonValue | undefined = f.get("value");
      if (commitment === undefined) throw malformed(ptr, 'no "commitment"');
      if (typeof commitment !== "string" || !HEX32.test(commitment)) throw malformed(ptr + "/commitment", "not 64 lower-case hex digits");
      if ((opening === undefined) !== (value === undefined)) throw malformed(ptr, '"opening" and "value" come together or not at all');
      let o: Opening | undefined;
      if (opening !== undefined) {
        if (typeof opening !== "string" || !HEX32.test(opening)) throw malformed(ptr + "/opening", "not 64 lower-case hex digits");
        o = ownOpening(Buffer.from(opening, "hex"));
      }
      out.push({ name, commitment: Buffer.from(commitment, "hex"), value: value === undefined ? undefined : serializeChecked(value), opening: o });
    }
    const x = new Disclosure(out);
    if (!V2_DIGEST.test(digestText)) throw malformed("/params_digest", 'not "v2:sha256:" and 64 lower-case hex digits');
    if (digestText !== x.#commitment.digest || Number(size.canonical) !== x.#commitment.size) {
      throw malformed("/params_digest", "the field commitments do not hash to the file's own params_digest and params_size");
    }
    return x;
  }

  /** A summary without values or openings. */
  toString(): string {
    return `Disclosure(${this.#fields.length} fields, ${this.disclosed().length} disclosed)`;
  }
  toJSON(): string {
    return this.toString();
  }
  [INSPECT](): string {
    return this.toString();
  }
}

/**
 * Commits to a parsed parameter object (already inside the domain) under
 * src's openings. @internal
 */
export function hideObject(params: JsonObject, src: OpeningSource = RANDOM): HideResult {
  const names = [...params.keys()].sort(); // UTF-16 code unit order, as JCS
  const drawn = src === RANDOM ? randomBytes(OPENING_SIZE * names.length) : undefined; // one draw for every field
  const fields: Field[] = names.map((name, i) => {
    const value = serializeChecked(params.get(name)!);
    let opening: Opening;
    if (drawn !== undefined) {
      opening = ownOpening(drawn.subarray(i * OPENING_SIZE, (i + 1) * OPENING_SIZE));
    } else {
      opening = src.opening(name);
      if (!(opening instanceof Opening)) throw new OpeningError("bad_opening", `the opening source gave no Opening for field ${JSON.stringify(name)}`);
    }
    return { name, commitment: fieldCommitment(opening, name, value), value, opening };
  });
  const disclosure = makeDisclosure(fields);
  return { commitment: disclosure.commitment, disclosure };
}

/**
 * Checks raw parameters (JSON text: bytes or a string) against the strict
 * domain and returns their version 2 commitment with the disclosure that
 * opens it. Openings come from openings (default: randomOpenings(), a new
 * one per field per call); a Disclosure as the source re-commits an
 * approved call with the first call's openings, and a field it does not
 * open is DisclosureError field_not_opened. Refusals of the parameters are
 * the DomainErrors paramsDigest gives for the same input.
 */
export function hide(raw: JsonText, openings: OpeningSource = RANDOM, options?: DomainOptions): HideResult {
  return hideObject(parseObject(raw, options), openings);
}
