// Declarations, minimization, the applied-tiers digest and the action
// definition digest (docs/declarations.md). Go's commit/declare and
// commit/tier are the reference.

import { createHash } from "node:crypto";
import { canonicalizeValue, type Commitment, type JsonInput, paramsDigest, serializeChecked } from "./canonical.js";
import { DomainError, LedgerError, pointer as renderPointer } from "./errors.js";
import { type Disclosure, type HidingCommitment, hideObject, type OpeningSource } from "./hiding.js";
import { type DomainOptions, JsonNumber, type JsonObject, type JsonText, type JsonValue, parse, parseObject } from "./json.js";
import {
  byteSize,
  count,
  endpointHost,
  payeeKnown,
  ProjectionError,
  recipientDomain,
  resourceDir,
  routeShape,
} from "./project.js";

export const DECLARATION_VERSION = 1;
export const ACTION_DOMAIN_SEPARATOR = "ledger/v1/action\n";
export const TIERS_DOMAIN_SEPARATOR = "ledger/v1/tiers\n";
export const MAX_FIELDS = 256;
export const MAX_NAME_BYTES = 64;
export const MAX_ROUTES = 256;
export const MAX_TOOL_NAME_BYTES = 1024;

export type FieldType = "string" | "integer" | "boolean" | "string_list" | "json";
export type Tier = "policy" | "derived" | "payload";

/**
 * A declaration or a call refused. pointer is an RFC 6901 pointer into the
 * declaration ("/fields/recipient/tier") or into the call's parameters
 * ("/recipient"); it never holds a parameter's value. code is one of
 * "domain:<kind>", "field_absent", "field_type", "projection_refused",
 * "declaration_invalid", "floor_exceeded" (docs/conformance.md).
 */
export class DeclarationError extends LedgerError {
  readonly action: string;
  readonly pointer: string;
  readonly problem: string;
  constructor(code: string, action: string, pointer: string, problem: string, options?: { cause?: unknown }) {
    super(code, `declare: ${action !== "" ? `action ${action}: ` : ""}${pointer !== "" ? `${pointer}: ` : ""}${problem}`, options);
    this.name = "DeclarationError";
    this.action = action;
    this.pointer = pointer;
    this.problem = problem;
  }
}

export interface Field {
  readonly name: string;
  readonly type: FieldType;
  readonly tier: Tier;
  /** Sorted; derived fields only. */
  readonly projections: readonly string[];
  readonly optional: boolean;
  /** route_shape templates in declared order. */
  readonly routes: readonly string[];
  readonly allowlist: string;
  readonly description: string;
}

export interface Tool {
  readonly server: string;
  readonly name: string;
  readonly definitionDigest: string;
}

const PROJECTIONS: Record<string, { input: FieldType }> = {
  recipient_domain: { input: "string" },
  payee_known: { input: "string" },
  endpoint_host: { input: "string" },
  route_shape: { input: "string" },
  resource_dir: { input: "string" },
  byte_size: { input: "string" },
  count: { input: "string_list" },
};

const FIELD_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;
const ACTION_PART = /^[A-Za-z][A-Za-z0-9_-]*$/;
const ACTION_NAME = /^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$/;
const ROUTE_VAR = /^\{[a-z][a-z0-9_]*\}$/;

export const isFieldName = (s: string): boolean => s.length <= MAX_NAME_BYTES && FIELD_NAME.test(s);
export const isActionName = (s: string): boolean => s.length <= MAX_NAME_BYTES && ACTION_NAME.test(s);
export const isActionPart = (s: string): boolean => s.length <= MAX_NAME_BYTES && ACTION_PART.test(s);

function escapePointer(s: string): string {
  return s.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Go's encoding/json folding of member names onto struct fields (all ASCII here). */
function fold(name: string): string {
  return name.replace(/\u017f/g, "s").replace(/\u212a/g, "k").toLowerCase();
}

class DecodeError extends Error {}

/** Reads an object's members the way Go's encoding/json fills a struct: case-insensitive names, unknown names refused, null as absent. */
function members(v: JsonValue, known: readonly string[]): Map<string, JsonValue> {
  if (!(v instanceof Map)) throw new DecodeError("not a declaration object");
  const out = new Map<string, JsonValue>();
  for (const [name, value] of v) {
    const k = known.find((n) => n === name) ?? known.find((n) => fold(n) === fold(name));
    if (k === undefined) throw new DecodeError(`unknown member ${JSON.stringify(name)}`);
    if (value === null) {
      // null leaves a Go field as it was, except a RawMessage (reviewed).
      if (k === "reviewed") out.set(k, null);
      continue;
    }
    out.set(k, value);
  }
  return out;
}

function str(v: JsonValue | undefined, member: string): string {
  if (v === undefined) return "";
  if (typeof v !== "string") throw new DecodeError(`member ${JSON.stringify(member)} is not a JSON string`);
  return v;
}

function strList(v: JsonValue | undefined, member: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new DecodeError(`member ${JSON.stringify(member)} is not a JSON array`);
  return v.map((e) => {
    if (e === null) return "";
    if (typeof e !== "string") throw new DecodeError(`member ${JSON.stringify(member)} is not a JSON string`);
    return e;
  });
}

function bool(v: JsonValue | undefined, member: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new DecodeError(`member ${JSON.stringify(member)} is not a JSON bool`);
  return v;
}

function int(v: JsonValue | undefined, member: string): number {
  if (v === undefined) return 0;
  if (!(v instanceof JsonNumber) || !/^-?[0-9]+$/.test(v.lexeme)) throw new DecodeError(`member ${JSON.stringify(member)} is not a JSON int`);
  return Number(v.lexeme);
}

interface FileField {
  type: string;
  tier: string;
  projections: string[];
  optional: boolean;
  routes: string[];
  allowlist: string;
  description: string;
}

const FIELD_MEMBERS = ["type", "tier", "projections", "optional", "routes", "allowlist", "description"];
const FILE_MEMBERS = ["declaration", "action", "description", "fields", "tool", "reviewed"];
const TOOL_MEMBERS = ["server", "name", "definition_digest"];

export interface FloorMap {
  readonly [action: string]: { readonly [field: string]: Tier };
}

export interface MinimizeOptions {
  /** The strict domain of the parameters (allowNonInteger and bounds). */
  domain?: DomainOptions;
  /** Allowlists for payee_known, by name. */
  allowlists?: { readonly [name: string]: readonly string[] | ReadonlySet<string> } | ReadonlyMap<string, readonly string[] | ReadonlySet<string>>;
  /** The disclosure floor: the highest tier of each field, "*" for the others. */
  floor?: FloorMap;
  /**
   * The parameter commitment's format version: 1 (the default for now),
   * or 2, the hiding commitment (docs/commitment.md §7), which returns the
   * disclosure alongside.
   */
  commitmentVersion?: 1 | 2;
  /**
   * Only with commitmentVersion 2: where the openings come from. Default
   * randomOpenings(); a Disclosure re-commits a retried call with the
   * first call's openings; derivedOpenings(secret, callKey) stores nothing.
   */
  openings?: OpeningSource;
}

export interface MinimizeResult {
  /** The version 1 parameter commitment of the raw bytes. */
  params: Commitment;
  /** The canonical minimized attributes (RFC 8785). */
  attributes: Buffer;
  /** The applied-tiers digest. */
  tiersDigest: string;
}

/** A minimization committed with version 2: the commitment, and the disclosure that opens it (keep it, mode 0600). */
export interface HidingMinimizeResult {
  /** The version 2 (hiding) commitment: "v2:sha256:…". */
  params: HidingCommitment;
  attributes: Buffer;
  tiersDigest: string;
  /** Every field's value and opening: what an auditor is shown (only()), and what erasure deletes. */
  disclosure: Disclosure;
}

const TIER_RANK: Record<string, number> = { payload: 0, derived: 1, policy: 2 };

function sha256(separator: string, body: Buffer): string {
  return "sha256:" + createHash("sha256").update(separator).update(body).digest("hex");
}

/** A checked action declaration. */
export class Declaration {
  readonly action: string;
  readonly description: string;
  /** Sorted by name. */
  readonly fields: readonly Field[];
  readonly tool: Tool | undefined;
  readonly unreviewed: boolean;

  private constructor(action: string, description: string, fields: Field[], tool: Tool | undefined, unreviewed: boolean) {
    this.action = action;
    this.description = description;
    this.fields = fields;
    this.tool = tool;
    this.unreviewed = unreviewed;
  }

  /** Whether a person has reviewed it (a draft carries "reviewed": false). */
  get reviewed(): boolean {
    return !this.unreviewed;
  }

  /** Reads a declaration file (JSON text, the same files Go reads). */
  static parse(input: JsonText): Declaration {
    let doc: JsonValue;
    try {
      doc = parse(input);
    } catch (e) {
      if (e instanceof DomainError) {
        throw new DeclarationError("declaration_invalid", "", e.pointer, "not in the strict JSON domain: " + e.code, { cause: e });
      }
      throw e;
    }
    let f: {
      declaration: number;
      action: string;
      description: string;
      fields: Map<string, FileField> | undefined;
      tool: { server: string; name: string; definition_digest: string } | undefined;
      reviewed: JsonValue | undefined;
    };
    try {
      const m = members(doc, FILE_MEMBERS);
      const fieldsV = m.get("fields");
      let fields: Map<string, FileField> | undefined;
      if (fieldsV !== undefined) {
        if (!(fieldsV instanceof Map)) throw new DecodeError('member "fields" is not a JSON object');
        fields = new Map();
        for (const [name, fv] of fieldsV) {
          const fm = fv === null ? new Map<string, JsonValue>() : members(fv, FIELD_MEMBERS);
          fields.set(name, {
            type: str(fm.get("type"), "type"),
            tier: str(fm.get("tier"), "tier"),
            projections: strList(fm.get("projections"), "projections"),
            optional: bool(fm.get("optional"), "optional"),
            routes: strList(fm.get("routes"), "routes"),
            allowlist: str(fm.get("allowlist"), "allowlist"),
            description: str(fm.get("description"), "description"),
          });
        }
      }
      const toolV = m.get("tool");
      let tool;
      if (toolV !== undefined) {
        const tm = members(toolV, TOOL_MEMBERS);
        tool = { server: str(tm.get("server"), "server"), name: str(tm.get("name"), "name"), definition_digest: str(tm.get("definition_digest"), "definition_digest") };
      }
      f = {
        declaration: int(m.get("declaration"), "declaration"),
        action: str(m.get("action"), "action"),
        description: str(m.get("description"), "description"),
        fields,
        tool,
        reviewed: m.has("reviewed") ? m.get("reviewed") : undefined,
      };
    } catch (e) {
      if (e instanceof DecodeError) throw new DeclarationError("declaration_invalid", "", "", e.message);
      throw e;
    }
    const fail = (p: string, problem: string): DeclarationError => new DeclarationError("declaration_invalid", f.action, p, problem);
    if (f.declaration === 0) throw fail("/declaration", "missing");
    if (f.declaration !== DECLARATION_VERSION) throw fail("/declaration", `version ${f.declaration}; this reader knows version ${DECLARATION_VERSION}`);
    if (f.action === "") throw fail("/action", "missing");
    if (!isActionName(f.action)) throw fail("/action", "not a name of dot-separated parts, each ASCII letters, digits, '_' and '-' starting with a letter (at most 64 bytes)");
    let unreviewed = false;
    if (f.reviewed !== undefined) {
      if (f.reviewed === false) unreviewed = true;
      else throw fail("/reviewed", "only false may be written (an unreviewed draft); remove the member once the declaration is reviewed");
    }
    let tool: Tool | undefined;
    if (f.tool !== undefined) {
      const t = f.tool;
      if (t.server === "") throw fail("/tool/server", "missing");
      if (!isActionPart(t.server)) throw fail("/tool/server", "not ASCII letters, digits, '_' and '-', starting with a letter (at most 64 bytes)");
      if (t.name === "") throw fail("/tool/name", "missing");
      if (Buffer.byteLength(t.name) > MAX_TOOL_NAME_BYTES) throw fail("/tool/name", "more than 1024 bytes");
      if (/[\u0000-\u001f\u007f-\u009f]/.test(t.name)) throw fail("/tool/name", "holds a control character");
      if (!isActionPart(t.name)) throw fail("/tool/name", "a tool whose name is not ASCII letters, digits, '_' and '-', starting with a letter (at most 64 bytes), cannot be declared");
      if (t.definition_digest === "") throw fail("/tool/definition_digest", "missing");
      if (!/^sha256:[0-9a-f]{64}$/.test(t.definition_digest)) throw fail("/tool/definition_digest", 'not "sha256:" and 64 lower-case hex digits');
      if (/^sha256:0{64}$/.test(t.definition_digest)) throw fail("/tool/definition_digest", "all zeros");
      const want = t.server + "." + t.name;
      if (f.action !== want) throw fail("/action", `a tool's action must be its server and name joined by '.' (${want})`);
      tool = { server: t.server, name: t.name, definitionDigest: t.definition_digest };
    }
    if (f.fields === undefined) throw fail("/fields", "missing");
    if (f.fields.size === 0 && tool === undefined) throw fail("/fields", 'empty: only the declaration of a tool (with "tool") may have no field');
    if (f.fields.size > MAX_FIELDS) throw fail("/fields", "more than 256 fields");
    const fields: Field[] = [];
    for (const name of [...f.fields.keys()].sort()) {
      const ff = f.fields.get(name)!;
      const p = "/fields/" + escapePointer(name);
      if (!isFieldName(name)) throw fail(p, "not a field name: ASCII letters, digits and '_', starting with a letter (at most 64 bytes)");
      const type = ff.type;
      if (type === "") throw fail(p + "/type", "missing");
      if (!["string", "integer", "boolean", "string_list", "json"].includes(type)) throw fail(p + "/type", "not string, integer, boolean, string_list or json");
      const t = ff.tier;
      if (type === "json" && (t === "policy" || t === "derived")) throw fail(p + "/tier", "a json field must be payload: no policy or projection reads a value of any shape");
      if (t === "policy" || t === "payload") {
        if (ff.projections.length !== 0) throw fail(p + "/projections", "only derived fields have projections");
      } else if (t === "derived") {
        if (ff.projections.length === 0) throw fail(p + "/projections", "a derived field needs at least one projection");
      } else if (t === "") throw fail(p + "/tier", "missing");
      else throw fail(p + "/tier", "not policy, derived or payload");
      ff.projections.forEach((pn, i) => {
        const spec = PROJECTIONS[pn];
        const pp = `${p}/projections/${i}`;
        if (spec === undefined || !Object.hasOwn(PROJECTIONS, pn)) throw fail(pp, "unknown projection");
        if (spec.input !== type) throw fail(pp, `${pn} takes a ${spec.input} field, not ${type}`);
        if (ff.projections.slice(0, i).includes(pn)) throw fail(pp, "repeated");
      });
      const projections = [...ff.projections].sort(byteOrder);
      const hasRoute = projections.includes("route_shape");
      if (hasRoute && ff.routes.length === 0) throw fail(p + "/routes", "route_shape needs the action's route templates");
      if (!hasRoute && ff.routes.length !== 0) throw fail(p + "/routes", "only a field projected by route_shape has routes");
      if (ff.routes.length > MAX_ROUTES) throw fail(p + "/routes", "more than 256 routes");
      ff.routes.forEach((r, i) => {
        const rp = `${p}/routes/${i}`;
        if (!r.startsWith("/") || Buffer.byteLength(r) > 1024) throw fail(rp, "not a path template starting with '/'");
        for (const seg of r.slice(1).split("/")) {
          if ((seg === "" && r !== "/") || (/[{}]/.test(seg) && !ROUTE_VAR.test(seg)) || /[?#%\\ ]/.test(seg)) {
            throw fail(rp, "segments must be literals or {name}, without '?', '#', '%', '\\' or spaces");
          }
        }
        if (ff.routes.slice(0, i).includes(r)) throw fail(rp, "repeated");
      });
      const hasPayee = projections.includes("payee_known");
      if (hasPayee && ff.allowlist === "") throw fail(p + "/allowlist", "payee_known needs the name of an allowlist");
      if (!hasPayee && ff.allowlist !== "") throw fail(p + "/allowlist", "only a field projected by payee_known names an allowlist");
      fields.push({
        name,
        type: type as FieldType,
        tier: t as Tier,
        projections,
        optional: ff.optional,
        routes: [...ff.routes],
        allowlist: ff.allowlist,
        description: ff.description,
      });
    }
    fields.sort((a, b) => byteOrder(a.name, b.name));
    return new Declaration(f.action, f.description, fields, tool, unreviewed);
  }

  /** The declared field named name. */
  field(name: string): Field | undefined {
    return this.fields.find((f) => f.name === name);
  }

  /** The normalized tier table, in canonical form. */
  tierTable(): Buffer {
    return canonicalizeValue({
      action: this.action,
      fields: this.fields.map((f) => ({ name: f.name, tier: f.tier, projections: [...f.projections].sort(byteOrder) })),
    });
  }

  /** The applied-tiers digest: SHA-256("ledger/v1/tiers\n" || JCS(table)). */
  tiersDigest(): string {
    return sha256(TIERS_DOMAIN_SEPARATOR, this.tierTable());
  }

  /** The canonical declaration, every member written out (docs/declarations.md §4). */
  canonical(): Buffer {
    const fields: Record<string, JsonInput> = Object.create(null) as Record<string, JsonInput>;
    for (const f of this.fields) {
      fields[f.name] = {
        type: f.type,
        tier: f.tier,
        projections: [...f.projections],
        optional: f.optional,
        routes: [...f.routes],
        allowlist: f.allowlist,
        description: f.description,
      };
    }
    const obj: Record<string, JsonInput> = { declaration: DECLARATION_VERSION, action: this.action, description: this.description, fields };
    if (this.tool !== undefined) obj["tool"] = { server: this.tool.server, name: this.tool.name, definition_digest: this.tool.definitionDigest };
    if (this.unreviewed) obj["reviewed"] = false;
    return canonicalizeValue(obj);
  }

  /** The action definition digest: SHA-256("ledger/v1/action\n" || canonical()). */
  definitionDigest(): string {
    return sha256(ACTION_DOMAIN_SEPARATOR, this.canonical());
  }

  /** Checks the declaration against a disclosure floor. */
  checkFloor(floor: FloorMap | undefined): void {
    if (floor === undefined || !Object.hasOwn(floor, this.action)) return;
    const caps = floor[this.action]!;
    for (const f of this.fields) {
      let limit: string | undefined = Object.hasOwn(caps, f.name) ? caps[f.name] : undefined;
      if (limit === undefined) {
        if (!Object.hasOwn(caps, "*")) continue;
        limit = caps["*"]!;
      }
      const rank = TIER_RANK[limit];
      const p = "/fields/" + escapePointer(f.name);
      if (rank === undefined) throw new DeclarationError("floor_exceeded", this.action, p, `the floor names an unknown tier ${JSON.stringify(limit)}`);
      if (TIER_RANK[f.tier]! > rank) throw new DeclarationError("floor_exceeded", this.action, p + "/tier", `declared ${f.tier}, past the workload's floor of ${limit}`);
    }
  }

  /**
   * Minimizes a call's raw parameters: their commitment, the minimized
   * attributes and the applied-tiers digest, or a DeclarationError whose
   * pointer is a declared field (never a value, never an undeclared name).
   */
  minimize(raw: JsonText, options: MinimizeOptions & { commitmentVersion: 2 }): HidingMinimizeResult;
  minimize(raw: JsonText, options?: MinimizeOptions & { commitmentVersion?: 1 }): MinimizeResult;
  minimize(raw: JsonText, options?: MinimizeOptions): MinimizeResult | HidingMinimizeResult;
  minimize(raw: JsonText, options: MinimizeOptions = {}): MinimizeResult | HidingMinimizeResult {
    const version = options.commitmentVersion ?? 1;
    if (version !== 1 && version !== 2) throw new LedgerError("bad_options", "minimize: commitmentVersion is 1 or 2");
    if (options.openings !== undefined && version !== 2) throw new LedgerError("bad_options", "minimize: openings are for commitmentVersion 2");
    this.checkFloor(options.floor);
    let params: Commitment | undefined;
    let values: JsonObject;
    try {
      if (version === 1) {
        params = paramsDigest(raw, options.domain);
        values = parse(raw, options.domain) as JsonObject;
      } else {
        values = parseObject(raw, options.domain);
      }
    } catch (e) {
      if (e instanceof DomainError) {
        throw new DeclarationError("domain:" + e.code, this.action, this.safePointer(e.pointer), "parameters outside the strict domain: " + e.code, { cause: e });
      }
      throw e;
    }
    const attrs = new Map<string, JsonInput>();
    for (const f of this.fields) {
      const p = "/" + escapePointer(f.name);
      if (!values.has(f.name)) {
        if (f.optional) continue;
        throw new DeclarationError("field_absent", this.action, p, "declared field is absent");
      }
      const v = values.get(f.name)!;
      const problem = checkType(f.type, v);
      if (problem !== "") throw new DeclarationError("field_type", this.action, p, problem);
      if (f.tier === "policy") {
        attrs.set(f.name, v as JsonInput);
      } else if (f.tier === "derived") {
        const out = new Map<string, JsonInput>();
        for (const pn of f.projections) {
          try {
            out.set(pn, project(f, pn, v, options.allowlists));
          } catch (e) {
            if (e instanceof ProjectionError) throw new DeclarationError("projection_refused", this.action, p, e.message, { cause: e });
            throw e;
          }
        }
        attrs.set(f.name, out);
      }
    }
    const attributes = canonicalizeValue(attrs);
    if (params !== undefined) return { params, attributes, tiersDigest: this.tiersDigest() };
    // Version 2 commits once the call is known to minimize, so that its
    // refusals are version 1's, in the same order.
    const { commitment, disclosure } = hideObject(values, options.openings);
    return { params: commitment, attributes, tiersDigest: this.tiersDigest(), disclosure };
  }

  private safePointer(p: string): string {
    if (p === "") return "";
    const first = p.slice(1).split("/")[0]!;
    const name = first.replace(/~1/g, "/").replace(/~0/g, "~");
    return this.field(name) !== undefined ? "/" + first : "(an undeclared field)";
  }
}

function byteOrder(a: string, b: string): number {
  // Names here are ASCII or NFC text; Go compares bytes, which for
  // well-formed text is code point order.
  const ab = Buffer.from(a, "utf8");
  const bb = Buffer.from(b, "utf8");
  return Buffer.compare(ab, bb);
}

function checkType(t: FieldType, v: JsonValue): string {
  switch (t) {
    case "json":
      return "";
    case "string":
      if (typeof v === "string") return "";
      break;
    case "boolean":
      if (typeof v === "boolean") return "";
      break;
    case "integer":
      if (v instanceof JsonNumber) {
        if (/^-?[0-9]+$/.test(v.lexeme)) return "";
        return "not an integer written without fraction or exponent";
      }
      break;
    case "string_list":
      if (Array.isArray(v)) {
        for (const e of v) if (typeof e !== "string") return "not an array of strings";
        return "";
      }
      break;
  }
  return `not a ${t}`;
}

function allowlist(lists: MinimizeOptions["allowlists"], name: string): readonly string[] | ReadonlySet<string> | undefined {
  if (lists === undefined) return undefined;
  if (lists instanceof Map) return (lists as ReadonlyMap<string, readonly string[] | ReadonlySet<string>>).get(name);
  const o = lists as { readonly [name: string]: readonly string[] | ReadonlySet<string> };
  return Object.hasOwn(o, name) ? o[name] : undefined;
}

function project(f: Field, p: string, v: JsonValue, lists: MinimizeOptions["allowlists"]): JsonInput {
  switch (p) {
    case "recipient_domain":
      return recipientDomain(v);
    case "payee_known":
      return payeeKnown(v, allowlist(lists, f.allowlist));
    case "endpoint_host":
      return endpointHost(v);
    case "route_shape":
      return routeShape(v, f.routes);
    case "resource_dir":
      return resourceDir(v);
    case "byte_size":
      return byteSize(v);
    case "count":
      return count(v);
  }
  throw new ProjectionError(p, "not implemented");
}

export { serializeChecked as _serializeChecked, renderPointer as _pointer };
